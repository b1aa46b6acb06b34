//! JA3 (salesforce/ja3, README.md and python/ja3.py) and JA3N, the same string with the
//! extension list sorted (spec: fingerprints.md section 1).
//!
//! `SSLVersion,Ciphers,Extensions,EllipticCurves,EllipticCurvePointFormats`, decimal numbers
//! joined by `-`, GREASE removed everywhere except the point formats, which are taken byte by
//! byte. A malformed supported_groups or ec_point_formats extension gives an empty field.

use std::fmt::Write as _;

use md5::{Digest as _, Md5};

use super::client_hello::ClientHello;
use super::enums::{EcPointFormat, ExtensionType, NamedGroup};
use super::grease::is_grease;

/// JA3 and JA3N with their lowercase-hex md5 hashes.
pub(crate) struct Ja3 {
    pub(crate) ja3: String,
    pub(crate) ja3_hash: String,
    pub(crate) ja3n: String,
    pub(crate) ja3n_hash: String,
}

/// `values` in decimal joined by `-`.
fn decimal(values: impl IntoIterator<Item = u16>) -> String {
    let values = values.into_iter();
    let mut out = String::with_capacity(6 * values.size_hint().1.unwrap_or(0));
    for v in values {
        if !out.is_empty() {
            out.push('-');
        }
        // Writing to a String cannot fail.
        let _ = write!(out, "{v}");
    }
    out
}

/// JA3 and JA3N of `hello`.
pub(crate) fn ja3(hello: &ClientHello<'_>) -> Ja3 {
    let version = hello.legacy_version().0;
    let ciphers = decimal(hello.cipher_suites().values().filter(|v| !is_grease(*v)));
    let mut types: Vec<u16> = hello
        .extensions()
        .map(|e| e.kind.0)
        .filter(|v| !is_grease(*v))
        .collect();
    let groups = hello
        .first_extension(ExtensionType::SUPPORTED_GROUPS)
        .and_then(|e| e.long_list::<NamedGroup>())
        .map(|list| decimal(list.values().filter(|v| !is_grease(*v))))
        .unwrap_or_default();
    let formats = hello
        .first_extension(ExtensionType::EC_POINT_FORMATS)
        .and_then(|e| e.byte_list::<EcPointFormat>())
        .map(|list| decimal(list.values().map(u16::from)))
        .unwrap_or_default();

    let ja3 = format!(
        "{version},{ciphers},{},{groups},{formats}",
        decimal(types.clone())
    );
    types.sort_unstable();
    let ja3n = format!("{version},{ciphers},{},{groups},{formats}", decimal(types));
    Ja3 {
        ja3_hash: hex::encode(Md5::digest(&ja3)),
        ja3n_hash: hex::encode(Md5::digest(&ja3n)),
        ja3,
        ja3n,
    }
}
