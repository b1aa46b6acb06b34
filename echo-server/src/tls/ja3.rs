//! JA3 (salesforce/ja3, README.md and python/ja3.py) and JA3N, the same string with the
//! extension list sorted (spec: fingerprints.md section 1).
//!
//! `SSLVersion,Ciphers,Extensions,EllipticCurves,EllipticCurvePointFormats`, decimal numbers
//! joined by `-`, GREASE removed everywhere except the point formats, which are taken byte by
//! byte. A malformed supported_groups or ec_point_formats extension gives an empty field.

use md5::{Digest, Md5};

use super::ascii::Ascii;
use super::client_hello::ClientHello;
use super::enums::ExtensionType;
use super::extension::ExtensionBody;
use super::grease::is_grease;

/// Appends `values` in decimal joined by `-`.
fn push_list(out: &mut Ascii, values: impl Iterator<Item = u16>) {
    let mut sep = None;
    for v in values {
        out.sep_dec(sep, v);
        sep = Some(b'-');
    }
}

/// Lowercase hex of an md5 digest.
fn md5_hex(hasher: Md5) -> String {
    let mut out = Ascii::with_capacity(32);
    out.hex(&hasher.finalize());
    out.into_string()
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
    let mut ja3 = Ascii::with_capacity(256);
    ja3.dec(hello.legacy_version.0);
    ja3.byte(b',');
    push_list(
        &mut ja3,
        hello.cipher_suites.values().filter(|v| !is_grease(*v)),
    );
    ja3.byte(b',');
    let head = ja3.len();
    // Both strings share `version,ciphers,`: hash it once.
    let mut prefix = Md5::new();
    prefix.update(ja3.as_bytes());

    let mut ja3n = Ascii::with_capacity(256);
    ja3n.bytes_from(&ja3);
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
    ja3.byte(b',');
    if let Some(ExtensionBody::SupportedGroups(groups)) =
        hello.extension(ExtensionType::SUPPORTED_GROUPS)
    {
        push_list(&mut ja3, groups.values().filter(|v| !is_grease(*v)));
    }
    ja3.byte(b',');
    if let Some(ExtensionBody::EcPointFormats(formats)) =
        hello.extension(ExtensionType::EC_POINT_FORMATS)
    {
        push_list(&mut ja3, formats.values().map(u16::from));
    }
    ja3n.extend(ja3.bytes(tail_start..ja3.len()));

    let mut h = prefix.clone();
    h.update(ja3.bytes(head..ja3.len()));
    let ja3_hash = md5_hex(h);
    let mut h = prefix;
    h.update(ja3n.bytes(head..ja3n.len()));
    let ja3n_hash = md5_hex(h);
    Ja3Set {
        ja3: ja3.into_string(),
        ja3_hash,
        ja3n: ja3n.into_string(),
        ja3n_hash,
    }
}
