//! JA4 and its raw / original-order variants (FoxIO-LLC/ja4 technical_details/JA4.md, BSD-3;
//! spec: fingerprints.md section 2). JA4+ methods (JA4H, JA4S, …) are deliberately absent:
//! they are under the FoxIO non-commercial licence.

use sha2::{Digest, Sha256};

use super::client_hello::ClientHello;
use super::enums::ExtensionType;
use super::extension::ExtensionBody;
use super::grease::is_grease;

/// Lowercase hex digits.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// The hex digit of the low nibble of `v`.
fn hex_digit(v: u8) -> char {
    char::from(HEX.get(usize::from(v & 0x0f)).copied().unwrap_or(b'0'))
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex_string(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex_bytes(&mut out, bytes);
    out
}

/// Appends `bytes` as lowercase hex.
pub(crate) fn push_hex_bytes(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        out.push(hex_digit(b >> 4));
        out.push(hex_digit(*b));
    }
}

/// Appends `v` as 4 lowercase hex digits.
pub(crate) fn push_hex4(out: &mut String, v: u16) {
    let [hi, lo] = v.to_be_bytes();
    for b in [hi >> 4, hi, lo >> 4, lo] {
        out.push(hex_digit(b));
    }
}

/// Appends `values` as 4-digit hex joined by `,`.
fn push_hex_list(out: &mut String, values: impl Iterator<Item = u16>) {
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_hex4(out, v);
    }
}

/// Appends the first 12 hex chars of sha256(`input`), or `000000000000` for an empty list.
fn push_hash12(out: &mut String, input: &str) {
    if input.is_empty() {
        out.push_str("000000000000");
        return;
    }
    let digest = Sha256::digest(input.as_bytes());
    push_hex_bytes(out, digest.get(..6).unwrap_or_default());
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

/// Appends a count as two digits, capped at 99.
fn push_count(out: &mut String, n: usize) {
    let n = n.min(99);
    out.push(char::from(b'0' + (n / 10) as u8));
    out.push(char::from(b'0' + (n % 10) as u8));
}

/// The four JA4 strings.
pub(crate) struct Ja4Set {
    pub(crate) ja4: String,
    pub(crate) ja4_r: String,
    pub(crate) ja4_o: String,
    pub(crate) ja4_ro: String,
}

/// JA4_a: transport, version, SNI, cipher count, extension count, ALPN (always 10 chars).
fn part_a(hello: &ClientHello<'_>) -> String {
    let exts = hello.extensions();
    let mut a = String::with_capacity(10);
    // Transport: `q` when the hello carries QUIC transport parameters (as FoxIO's Rust tool
    // decides it); an echo server on TCP otherwise sees `t`.
    let quic = exts
        .iter()
        .any(|e| e.kind == ExtensionType::QUIC_TRANSPORT_PARAMETERS);
    a.push(if quic { 'q' } else { 't' });
    let version = match hello.extension(ExtensionType::SUPPORTED_VERSIONS) {
        Some(ExtensionBody::SupportedVersions(list)) => {
            list.values().filter(|v| !is_grease(*v)).max()
        }
        _ => None,
    }
    .unwrap_or(hello.legacy_version.0);
    a.push_str(version_code(version));
    let sni = exts.iter().any(|e| e.kind == ExtensionType::SERVER_NAME);
    a.push(if sni { 'd' } else { 'i' });
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
    a.extend(alpn_chars(first_alpn));
    a
}

/// Builds `a_ciphers_exts[_sigs]` and the hashed form from the same pieces.
fn raw_and_hashed(
    a: &str,
    ciphers: impl Iterator<Item = u16>,
    exts: impl Iterator<Item = u16>,
    sigs: impl Iterator<Item = u16> + Clone,
) -> (String, String) {
    let mut raw = String::with_capacity(a.len() + 256);
    raw.push_str(a);
    raw.push('_');
    let b_start = raw.len();
    push_hex_list(&mut raw, ciphers);
    let b_end = raw.len();
    raw.push('_');
    let c_start = raw.len();
    push_hex_list(&mut raw, exts);
    let exts_empty = raw.len() == c_start;
    if sigs.clone().next().is_some() {
        raw.push('_');
        push_hex_list(&mut raw, sigs);
    }
    let mut hashed = String::with_capacity(36);
    hashed.push_str(a);
    hashed.push('_');
    push_hash12(&mut hashed, raw.get(b_start..b_end).unwrap_or_default());
    hashed.push('_');
    if exts_empty {
        hashed.push_str("000000000000");
    } else {
        push_hash12(&mut hashed, raw.get(c_start..).unwrap_or_default());
    }
    (raw, hashed)
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

    /// Spec examples for the hashed parts (fingerprints.md section 2).
    #[test]
    fn spec_hash_examples() {
        let mut s = String::new();
        push_hash12(
            &mut s,
            "002f,0035,009c,009d,1301,1302,1303,c013,c014,c02b,c02c,c02f,c030,cca8,cca9",
        );
        assert_eq!(s, "8daaf6152771");
        s.clear();
        push_hash12(
            &mut s,
            "0005,000a,000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01_0403,0804,0401,0503,0805,0501,0806,0601",
        );
        assert_eq!(s, "e5627efa2ab1");
        s.clear();
        push_hash12(
            &mut s,
            "0005,000a,000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01",
        );
        assert_eq!(s, "6d807ffa2a79");
    }
}
