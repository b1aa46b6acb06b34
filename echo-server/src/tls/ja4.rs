//! JA4 and its raw / original-order variants (FoxIO-LLC/ja4 technical_details/JA4.md, BSD-3;
//! spec: fingerprints.md section 2). JA4+ methods (JA4H, JA4S, …) are deliberately absent:
//! they are under the FoxIO non-commercial licence.

use sha2::{Digest as _, Sha256};
use std::ops::Range;

use super::ascii::{hex_digit, Ascii, Cursor};
use super::client_hello::ClientHello;
use super::enums::{ProtocolVersion, SignatureScheme};
use super::grease::is_grease;
use super::survey::Survey;

/// Appends the first 12 hex chars of sha256(`input`, already written), or `000000000000` for an
/// empty input.
fn push_hash12(c: &mut Cursor<'_>, input: Range<usize>) {
    if input.is_empty() {
        c.str("000000000000");
        return;
    }
    let digest = Sha256::digest(c.bytes(input));
    c.hex(digest.get(..6).unwrap_or_default());
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
fn version_code(v: u16) -> [u8; 2] {
    match v {
        0x0304 => *b"13",
        0x0303 => *b"12",
        0x0302 => *b"11",
        0x0301 => *b"10",
        0x0300 => *b"s3",
        0x0002 => *b"s2",
        0xfeff => *b"d1",
        0xfefd => *b"d2",
        0xfefc => *b"d3",
        _ => *b"00",
    }
}

/// A count as two digits, capped at 99.
fn count(n: usize) -> [u8; 2] {
    let n = n.min(99);
    // Both are single digits.
    [b'0' + (n / 10) as u8, b'0' + (n % 10) as u8]
}

/// Where the four JA4 strings sit in the scratch buffer.
pub(crate) struct Ja4Set {
    pub(crate) ja4: Range<usize>,
    pub(crate) ja4_r: Range<usize>,
    pub(crate) ja4_o: Range<usize>,
    pub(crate) ja4_ro: Range<usize>,
}

/// JA4_a: transport, version, SNI, cipher count, extension count, ALPN (always 10 chars).
fn part_a(hello: &ClientHello<'_>, s: &Survey<'_>) -> [u8; 10] {
    // Transport: `q` when the hello carries QUIC transport parameters (as FoxIO's Rust tool
    // decides it); an echo server on TCP otherwise sees `t`.
    let transport = if s.quic { b'q' } else { b't' };
    let version = s
        .supported_versions
        .and_then(|e| e.short_list::<ProtocolVersion>())
        .and_then(|list| list.values().filter(|v| !is_grease(*v)).max())
        .unwrap_or(hello.legacy_version().0);
    let [v0, v1] = version_code(version);
    let sni = if s.server_name { b'd' } else { b'i' };
    let [c0, c1] = count(s.ciphers.as_slice().len());
    let [e0, e1] = count(s.types.as_slice().len());
    let first_alpn = s
        .alpn
        .and_then(|e| e.names())
        .and_then(|names| names.iter().next());
    // Alphanumeric ASCII or a hex digit.
    let [a0, a1] = alpn_chars(first_alpn).map(|c| u8::try_from(c).unwrap_or(b'0'));
    [transport, v0, v1, sni, c0, c1, e0, e1, a0, a1]
}

/// Writes `a_ciphers_exts[_sigs]` (raw) then `a_hash(ciphers)_hash(exts[_sigs])` (hashed);
/// `sigs` is where an earlier raw string already holds the hex signature list, if any.
fn raw_and_hashed(
    c: &mut Cursor<'_>,
    a: &[u8; 10],
    ciphers: &[u16],
    exts: impl Iterator<Item = u16>,
    sigs: Option<Range<usize>>,
    sig_list: impl Iterator<Item = u16>,
) -> (Range<usize>, Range<usize>, Range<usize>) {
    let raw_start = c.pos();
    c.extend(a);
    c.byte(b'_');
    let b = c.pos();
    c.hex4_list(b',', ciphers.iter().copied());
    let b = b..c.pos();
    c.byte(b'_');
    let c_start = c.pos();
    c.hex4_list(b',', exts);
    let exts_empty = c.pos() == c_start;
    let sigs = match sigs {
        Some(range) => {
            if !range.is_empty() {
                c.byte(b'_');
                c.repeat(range.clone());
            }
            range
        }
        None => {
            let at = c.pos();
            c.byte(b'_');
            let list = c.pos();
            c.hex4_list(b',', sig_list);
            if c.pos() == list {
                // No signature algorithm: no `_` either.
                c.rewind(at);
                at..at
            } else {
                list..c.pos()
            }
        }
    };
    let raw = raw_start..c.pos();
    let hashed_start = c.pos();
    c.extend(a);
    c.byte(b'_');
    push_hash12(c, b);
    c.byte(b'_');
    if exts_empty {
        c.str("000000000000");
    } else {
        push_hash12(c, c_start..raw.end);
    }
    (raw, hashed_start..c.pos(), sigs)
}

/// Writes JA4_r, JA4, JA4_ro and JA4_o of `hello` to `out`.
pub(crate) fn write_ja4(hello: &ClientHello<'_>, s: &Survey<'_>, out: &mut Ascii) -> Ja4Set {
    let a = part_a(hello, s);
    let sig_list = s
        .signature_algorithms
        .and_then(|e| e.long_list::<SignatureScheme>());
    let sig_values = || {
        sig_list
            .into_iter()
            .flat_map(|list| list.values())
            .filter(|v| !is_grease(*v))
    };
    // 5 bytes a number in each raw string, and the two hashed strings.
    let numbers =
        s.ciphers.as_slice().len() + s.types.as_slice().len() + sig_list.map_or(0, |l| l.len());
    out.write(10 * numbers + 128, |c| {
        let (ja4_r, ja4, sigs) = raw_and_hashed(
            c,
            &a,
            s.sorted_ciphers.as_slice(),
            s.sorted_types
                .as_slice()
                .iter()
                .copied()
                .filter(|v| *v != 0x0000 && *v != 0x0010),
            None,
            sig_values(),
        );
        let (ja4_ro, ja4_o, _) = raw_and_hashed(
            c,
            &a,
            s.ciphers.as_slice(),
            s.types.as_slice().iter().copied(),
            Some(sigs),
            std::iter::empty(),
        );
        Ja4Set {
            ja4,
            ja4_r,
            ja4_o,
            ja4_ro,
        }
    })
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
        let mut s = Ascii::new(&mut []);
        s.write(input.len() + 12, |c| {
            c.str(input);
            push_hash12(c, 0..input.len());
        });
        s.text()
            .map(|t| t[input.len()..].to_owned())
            .unwrap_or_default()
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
