//! JA4 and its raw / original-order variants (FoxIO-LLC/ja4 technical_details/JA4.md, BSD-3). JA4+
//! methods (JA4H, JA4S, …) are deliberately absent: they are under the FoxIO non-commercial
//! licence.

use sha2::{Digest as _, Sha256};

use super::client_hello::ClientHello;
use super::enums::{ExtensionType, ProtocolVersion, SignatureScheme};
use super::grease::{is_grease, without_grease};
use crate::text::{push_decimal, push_hex};

/// Appends the first 12 hex chars of sha256(`input`), or `000000000000` for an empty input.
fn push_hash12(out: &mut String, input: &str) {
    if input.is_empty() {
        out.push_str("000000000000");
    } else {
        push_hex(out, Sha256::digest(input).get(..6).unwrap_or_default());
    }
}

/// The lowercase hex digit of the low nibble of `v`.
fn hex_digit(v: u8) -> char {
    char::from_digit(u32::from(v & 0x0f), 16).unwrap_or('0')
}

/// `values` as 4-digit lowercase hex joined by `,`.
fn hex_list(values: &[u16]) -> String {
    let mut out = String::with_capacity(5 * values.len());
    push_hex_list(&mut out, values);
    out
}

/// Appends `values` as 4-digit lowercase hex joined by `,`.
fn push_hex_list(out: &mut String, values: &[u16]) {
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_hex(out, &v.to_be_bytes());
    }
}

/// The two ALPN characters of JA4_a from the first protocol name (spec 2024-08 / 2026-01):
/// alphanumeric first and last byte → those two characters; otherwise the first hex digit of
/// the first byte and the last hex digit of the last byte; no name → `00`.
pub fn alpn_chars(first: Option<&[u8]>) -> [char; 2] {
    match first.and_then(|n| Some((*n.first()?, *n.last()?))) {
        Some((a, z)) if a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric() => {
            [char::from(a), char::from(z)]
        }
        Some((a, z)) => [hex_digit(a >> 4), hex_digit(z)],
        None => ['0', '0'],
    }
}

/// The version code of JA4_a.
fn version_code(v: u16) -> &'static str {
    match v {
        0x0304 => "13",
        0x0303 => "12",
        0x0302 => "11",
        0x0301 => "10",
        0x0300 => "s3",
        0x0002 => "s2",
        0xfeff => "d1",
        0xfefd => "d2",
        0xfefc => "d3",
        _ => "00",
    }
}

/// JA4 in its four forms.
pub(crate) struct Ja4 {
    pub(crate) ja4: String,
    pub(crate) ja4_r: String,
    pub(crate) ja4_o: String,
    pub(crate) ja4_ro: String,
}

/// JA4_a: transport, version, SNI, cipher count, extension count, ALPN (always 10 chars).
fn part_a(hello: &ClientHello<'_>, ciphers: usize, types: &[u16]) -> String {
    // Transport: `q` when the hello carries QUIC transport parameters (as FoxIO's Rust tool
    // decides it); an echo server on TCP otherwise sees `t`.
    let has = |kind: ExtensionType| types.contains(&kind.0);
    let transport = if has(ExtensionType::QUIC_TRANSPORT_PARAMETERS) {
        'q'
    } else {
        't'
    };
    let version = hello
        .first_extension(ExtensionType::SUPPORTED_VERSIONS)
        .and_then(|e| e.short_list::<ProtocolVersion>())
        .and_then(|list| list.values().filter(|v| !is_grease(*v)).max())
        .unwrap_or(hello.legacy_version().0);
    let sni = if has(ExtensionType::SERVER_NAME) {
        'd'
    } else {
        'i'
    };
    let first_alpn = hello
        .first_extension(ExtensionType::APPLICATION_LAYER_PROTOCOL_NEGOTIATION)
        .and_then(|e| e.names())
        .and_then(|names| names.iter().next());
    let [a0, a1] = alpn_chars(first_alpn);
    let mut a = String::with_capacity(10);
    a.push(transport);
    a.push_str(version_code(version));
    a.push(sni);
    for count in [ciphers, types.len()].map(|count| count.min(99)) {
        if count < 10 {
            a.push('0');
        }
        push_decimal(&mut a, count);
    }
    a.extend([a0, a1]);
    a
}

/// `a_ciphers_exts[_sigs]` (raw) and `a_hash(ciphers)_hash(exts[_sigs])` (hashed); an empty
/// extension list hashes to zeros even when there are signature algorithms.
fn raw_and_hashed(a: &str, ciphers: &[u16], exts: &[u16], sigs: &str) -> (String, String) {
    let ciphers = hex_list(ciphers);
    let mut exts_sigs = String::with_capacity(5 * exts.len() + 1 + sigs.len());
    push_hex_list(&mut exts_sigs, exts);
    if !sigs.is_empty() {
        exts_sigs.push('_');
        exts_sigs.push_str(sigs);
    }
    let mut raw = String::with_capacity(a.len() + ciphers.len() + exts_sigs.len() + 2);
    for part in [a, "_", &ciphers, "_", &exts_sigs] {
        raw.push_str(part);
    }
    let mut hashed = String::with_capacity(a.len() + 26);
    hashed.push_str(a);
    hashed.push('_');
    push_hash12(&mut hashed, &ciphers);
    hashed.push('_');
    push_hash12(&mut hashed, if exts.is_empty() { "" } else { &exts_sigs });
    (raw, hashed)
}

/// JA4, JA4_r, JA4_o and JA4_ro of `hello`.
pub(crate) fn ja4(hello: &ClientHello<'_>) -> Ja4 {
    let ciphers = without_grease(hello.cipher_suites().values());
    let types = without_grease(hello.extensions().map(|e| e.kind.0));
    let a = part_a(hello, ciphers.len(), &types);
    let sigs = hello
        .first_extension(ExtensionType::SIGNATURE_ALGORITHMS)
        .and_then(|e| e.long_list::<SignatureScheme>())
        .map(|list| hex_list(&without_grease(list.values())))
        .unwrap_or_default();

    let mut sorted_ciphers = ciphers.clone();
    sorted_ciphers.sort_unstable();
    // The sorted form leaves out server_name and ALPN.
    let mut sorted_types = types.clone();
    sorted_types.retain(|v| {
        *v != ExtensionType::SERVER_NAME.0
            && *v != ExtensionType::APPLICATION_LAYER_PROTOCOL_NEGOTIATION.0
    });
    sorted_types.sort_unstable();

    let (ja4_r, ja4) = raw_and_hashed(&a, &sorted_ciphers, &sorted_types, &sigs);
    let (ja4_ro, ja4_o) = raw_and_hashed(&a, &ciphers, &types, &sigs);
    Ja4 {
        ja4,
        ja4_r,
        ja4_o,
        ja4_ro,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alpn(name: &[u8]) -> String {
        alpn_chars(Some(name)).iter().collect()
    }

    /// The ALPN cases JA4.md lists (its 2024-08 and 2026-01 revisions).
    #[test]
    fn alpn_edge_cases() {
        assert_eq!(alpn(b"h2"), "h2");
        assert_eq!(alpn(b"http/1.1"), "h1");
        assert_eq!(alpn(b"h3"), "h3");
        assert_eq!(alpn(b"a"), "aa");
        assert_eq!(alpn(&[0xab]), "ab");
        assert_eq!(alpn(&[0x20]), "20");
        assert_eq!(alpn(&[0xab, 0xcd]), "ad");
        assert_eq!(alpn(&[0x20, 0x61]), "21");
        assert_eq!(alpn(&[0x30, 0xab]), "3b");
        assert_eq!(alpn(&[0x61, 0x20]), "60");
        assert_eq!(alpn(&[0x30, 0x31, 0xab, 0xcd]), "3d");
        assert_eq!(alpn(&[0x30, 0xab, 0xcd, 0x31]), "01");
        assert_eq!(alpn(&[0xba, 0xad]), "bd");
        assert_eq!(alpn(b""), "00");
        assert_eq!(alpn_chars(None).iter().collect::<String>(), "00");
    }

    /// JA4.md's examples for the hashed parts.
    #[test]
    fn spec_hash_examples() {
        let hash12 = |input: &str| {
            let mut out = String::new();
            push_hash12(&mut out, input);
            out
        };
        assert_eq!(
            hash12("002f,0035,009c,009d,1301,1302,1303,c013,c014,c02b,c02c,c02f,c030,cca8,cca9"),
            "8daaf6152771"
        );
        assert_eq!(
            hash12(
                "0005,000a,000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01_0403,0804,0401,0503,0805,0501,0806,0601"
            ),
            "e5627efa2ab1"
        );
        assert_eq!(
            hash12("0005,000a,000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01"),
            "6d807ffa2a79"
        );
        assert_eq!(hash12(""), "000000000000");
    }
}
