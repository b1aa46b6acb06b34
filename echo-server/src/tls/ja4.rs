//! JA4 and its raw / original-order variants (FoxIO-LLC/ja4 technical_details/JA4.md, BSD-3;
//! spec: fingerprints.md section 2). JA4+ methods (JA4H, JA4S, …) are deliberately absent:
//! they are under the FoxIO non-commercial licence.

use sha2::{Digest, Sha256};

use super::ascii::{hex_digit, Ascii};
use super::client_hello::ClientHello;
use super::enums::ExtensionType;
use super::extension::ExtensionBody;
use super::grease::is_grease;

/// Appends `values` as 4-digit hex joined by `,`.
fn push_hex_list(out: &mut Ascii, values: impl Iterator<Item = u16>) {
    let mut values = values;
    if let Some(first) = values.next() {
        out.hex4(first);
    }
    for v in values {
        out.sep_hex4(b',', v);
    }
}

/// Appends the first 12 hex chars of sha256(`input`), or `000000000000` for an empty list.
fn push_hash12(out: &mut Ascii, input: &[u8]) {
    if input.is_empty() {
        out.str("000000000000");
        return;
    }
    let digest = Sha256::digest(input);
    out.hex(digest.get(..6).unwrap_or_default());
}

/// The two ALPN characters of JA4_a from the first protocol name (spec 2024-08 / 2026-01):
/// alphanumeric first and last byte → those two characters; otherwise the first hex digit of
/// the first byte and the last hex digit of the last byte; no name → `00`.
pub fn alpn_chars(first: Option<&[u8]>) -> [char; 2] {
    match first.and_then(|n| Some((*n.first()?, *n.last()?))) {
        Some((a, z)) if a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric() => {
            [char::from(a), char::from(z)]
        }
        Some((a, z)) => [char::from(hex_digit(a >> 4)), char::from(hex_digit(z))],
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

/// Appends a count as two digits, capped at 99.
fn push_count(out: &mut Ascii, n: usize) {
    let n = n.min(99);
    // Both are single digits.
    out.byte(b'0' + (n / 10) as u8);
    out.byte(b'0' + (n % 10) as u8);
}

/// The four JA4 strings.
pub(crate) struct Ja4Set {
    pub(crate) ja4: String,
    pub(crate) ja4_r: String,
    pub(crate) ja4_o: String,
    pub(crate) ja4_ro: String,
}

/// JA4_a: transport, version, SNI, cipher count, extension count, ALPN (always 10 chars).
fn part_a(hello: &ClientHello<'_>) -> Ascii {
    let exts = hello.extensions();
    let mut a = Ascii::with_capacity(10);
    // Transport: `q` when the hello carries QUIC transport parameters (as FoxIO's Rust tool
    // decides it); an echo server on TCP otherwise sees `t`.
    let quic = exts
        .iter()
        .any(|e| e.kind == ExtensionType::QUIC_TRANSPORT_PARAMETERS);
    a.byte(if quic { b'q' } else { b't' });
    let version = match hello.extension(ExtensionType::SUPPORTED_VERSIONS) {
        Some(ExtensionBody::SupportedVersions(list)) => {
            list.values().filter(|v| !is_grease(*v)).max()
        }
        _ => None,
    }
    .unwrap_or(hello.legacy_version.0);
    a.str(version_code(version));
    let sni = exts.iter().any(|e| e.kind == ExtensionType::SERVER_NAME);
    a.byte(if sni { b'd' } else { b'i' });
    push_count(
        &mut a,
        hello
            .cipher_suites
            .values()
            .filter(|v| !is_grease(*v))
            .count(),
    );
    push_count(&mut a, exts.iter().filter(|e| !is_grease(e.kind.0)).count());
    let first_alpn = match hello.extension(ExtensionType::APPLICATION_LAYER_PROTOCOL_NEGOTIATION) {
        Some(ExtensionBody::Alpn(names)) => names.iter().next(),
        _ => None,
    };
    for c in alpn_chars(first_alpn) {
        // Alphanumeric ASCII or a hex digit.
        a.byte(u8::try_from(c).unwrap_or(b'0'));
    }
    a
}

/// Builds `a_ciphers_exts[_sigs]` and the hashed form from the same pieces.
fn raw_and_hashed(
    a: &Ascii,
    ciphers: impl Iterator<Item = u16>,
    exts: impl Iterator<Item = u16>,
    sigs: impl Iterator<Item = u16> + Clone,
) -> (String, String) {
    let mut raw = Ascii::with_capacity(a.len() + 320);
    raw.bytes_from(a);
    raw.byte(b'_');
    let b_start = raw.len();
    push_hex_list(&mut raw, ciphers);
    let b_end = raw.len();
    raw.byte(b'_');
    let c_start = raw.len();
    push_hex_list(&mut raw, exts);
    let exts_empty = raw.len() == c_start;
    if sigs.clone().next().is_some() {
        raw.byte(b'_');
        push_hex_list(&mut raw, sigs);
    }
    let mut hashed = Ascii::with_capacity(36);
    hashed.bytes_from(a);
    hashed.byte(b'_');
    push_hash12(&mut hashed, raw.bytes(b_start..b_end));
    hashed.byte(b'_');
    if exts_empty {
        hashed.str("000000000000");
    } else {
        push_hash12(&mut hashed, raw.bytes(c_start..raw.len()));
    }
    (raw.into_string(), hashed.into_string())
}

/// JA4, JA4_r, JA4_o and JA4_ro of `hello`, given its non-GREASE cipher suites and extension
/// types, each sorted.
pub(crate) fn ja4_set(
    hello: &ClientHello<'_>,
    sorted_ciphers: &[u16],
    sorted_types: &[u16],
) -> Ja4Set {
    let a = part_a(hello);
    let sig_list = match hello.extension(ExtensionType::SIGNATURE_ALGORITHMS) {
        Some(ExtensionBody::SignatureAlgorithms(list)) => Some(list),
        _ => None,
    };
    let sigs = sig_list
        .into_iter()
        .flat_map(|list| list.values())
        .filter(|v| !is_grease(*v));
    let (ja4_r, ja4) = raw_and_hashed(
        &a,
        sorted_ciphers.iter().copied(),
        sorted_types
            .iter()
            .copied()
            .filter(|v| *v != 0x0000 && *v != 0x0010),
        sigs.clone(),
    );
    let (ja4_ro, ja4_o) = raw_and_hashed(
        &a,
        hello.cipher_suites.values().filter(|v| !is_grease(*v)),
        hello
            .extensions()
            .iter()
            .map(|e| e.kind.0)
            .filter(|v| !is_grease(*v)),
        sigs,
    );
    Ja4Set {
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

    /// The ALPN cases listed in the spec (fingerprints.md section 2, JA4.md 2024-08 / 2026-01).
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

    fn hash12(input: &str) -> String {
        let mut s = Ascii::with_capacity(12);
        push_hash12(&mut s, input.as_bytes());
        s.into_string()
    }

    /// Spec examples for the hashed parts (fingerprints.md section 2).
    #[test]
    fn spec_hash_examples() {
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
