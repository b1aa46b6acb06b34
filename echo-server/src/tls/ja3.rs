//! JA3 (salesforce/ja3, README.md and python/ja3.py) and JA3N, the same string with the
//! extension list sorted (spec: fingerprints.md section 1).
//!
//! `SSLVersion,Ciphers,Extensions,EllipticCurves,EllipticCurvePointFormats`, decimal numbers
//! joined by `-`, GREASE removed everywhere except the point formats, which are taken byte by
//! byte. A malformed supported_groups or ec_point_formats extension gives an empty field.

use md5::{Digest, Md5};

use super::client_hello::ClientHello;
use super::enums::ExtensionType;
use super::extension::ExtensionBody;
use super::grease::is_grease;
use super::ja4::hex_string;

/// Appends `value` in decimal.
fn push_dec(out: &mut String, value: u16) {
    let mut started = false;
    for div in [10_000u16, 1_000, 100, 10, 1] {
        let digit = value / div % 10;
        if digit != 0 || started || div == 1 {
            started = true;
            // `digit` is 0..=9.
            out.push(char::from(b'0' + digit as u8));
        }
    }
}

/// Appends `values` in decimal joined by `-`.
fn push_list(out: &mut String, values: impl Iterator<Item = u16>) {
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push('-');
        }
        push_dec(out, v);
    }
}

/// JA3 and JA3N: strings and md5 hashes.
pub(crate) struct Ja3Set {
    pub(crate) ja3: String,
    pub(crate) ja3_hash: String,
    pub(crate) ja3n: String,
    pub(crate) ja3n_hash: String,
}

/// JA3 and JA3N of `hello`; `sorted_types` are its non-GREASE extension types, sorted.
pub(crate) fn ja3_set(hello: &ClientHello<'_>, sorted_types: &[u16]) -> Ja3Set {
    let mut ja3 = String::with_capacity(256);
    push_dec(&mut ja3, hello.legacy_version.0);
    ja3.push(',');
    push_list(
        &mut ja3,
        hello.cipher_suites.values().filter(|v| !is_grease(*v)),
    );
    ja3.push(',');
    let head = ja3.len();
    // Both strings share `version,ciphers,`: hash it once.
    let mut prefix = Md5::new();
    prefix.update(ja3.as_bytes());

    let mut ja3n = String::with_capacity(256);
    ja3n.push_str(&ja3);
    push_list(
        &mut ja3,
        hello
            .extensions()
            .iter()
            .map(|e| e.kind.0)
            .filter(|v| !is_grease(*v)),
    );
    push_list(&mut ja3n, sorted_types.iter().copied());

    let tail_start = ja3.len();
    ja3.push(',');
    if let Some(ExtensionBody::SupportedGroups(groups)) =
        hello.extension(ExtensionType::SUPPORTED_GROUPS)
    {
        push_list(&mut ja3, groups.values().filter(|v| !is_grease(*v)));
    }
    ja3.push(',');
    if let Some(ExtensionBody::EcPointFormats(formats)) =
        hello.extension(ExtensionType::EC_POINT_FORMATS)
    {
        push_list(&mut ja3, formats.values().map(u16::from));
    }
    let tail = ja3.get(tail_start..).unwrap_or_default();
    ja3n.push_str(tail);

    let mut h = prefix.clone();
    h.update(ja3.get(head..).unwrap_or_default().as_bytes());
    let ja3_hash = hex_string(&h.finalize());
    let mut h = prefix;
    h.update(ja3n.get(head..).unwrap_or_default().as_bytes());
    let ja3n_hash = hex_string(&h.finalize());
    Ja3Set {
        ja3,
        ja3_hash,
        ja3n,
        ja3n_hash,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal() {
        for v in [0u16, 7, 10, 99, 100, 771, 4865, 65535] {
            let mut s = String::new();
            push_dec(&mut s, v);
            assert_eq!(s, v.to_string());
        }
    }
}
