//! JA3 (salesforce/ja3, README.md and python/ja3.py) and JA3N, the same string with the
//! extension list sorted (as the JA3N variant is published beside JA3).
//!
//! `SSLVersion,Ciphers,Extensions,EllipticCurves,EllipticCurvePointFormats`, decimal numbers
//! joined by `-`, GREASE removed everywhere except the point formats, which are taken byte by
//! byte. A malformed supported_groups or ec_point_formats extension gives an empty field.

use md5::{Digest as _, Md5};

use super::client_hello::ClientHello;
use super::enums::{EcPointFormat, ExtensionType, NamedGroup};
use super::grease::{is_grease, without_grease};
use crate::text::{hex_id, push_decimal};

/// JA3 and JA3N with their lowercase-hex md5 hashes.
pub(crate) struct Ja3 {
    pub(crate) ja3: String,
    pub(crate) ja3_hash: String,
    pub(crate) ja3n: String,
    pub(crate) ja3n_hash: String,
}

/// Appends `values` in decimal joined by `-`.
fn push_decimals(out: &mut String, values: impl IntoIterator<Item = u16>) {
    for (i, v) in values.into_iter().enumerate() {
        if i > 0 {
            out.push('-');
        }
        push_decimal(out, v);
    }
}

/// JA3 and JA3N of `hello`: the two strings share all but the extension field, so the common
/// parts are written once and copied.
pub(crate) fn ja3(hello: &ClientHello<'_>) -> Ja3 {
    let mut head = String::with_capacity(256);
    push_decimal(&mut head, hello.legacy_version().0);
    head.push(',');
    push_decimals(
        &mut head,
        hello.cipher_suites().values().filter(|v| !is_grease(*v)),
    );
    head.push(',');
    let mut types = without_grease(hello.extensions().map(|e| e.kind.0));
    let mut tail = String::with_capacity(64);
    tail.push(',');
    if let Some(list) = hello
        .first_extension(ExtensionType::SUPPORTED_GROUPS)
        .and_then(|e| e.long_list::<NamedGroup>())
    {
        push_decimals(&mut tail, list.values().filter(|v| !is_grease(*v)));
    }
    tail.push(',');
    if let Some(list) = hello
        .first_extension(ExtensionType::EC_POINT_FORMATS)
        .and_then(|e| e.byte_list::<EcPointFormat>())
    {
        push_decimals(&mut tail, list.values().map(u16::from));
    }

    let with_types = |types: &[u16]| {
        let mut out = String::with_capacity(head.len() + 6 * types.len() + tail.len());
        out.push_str(&head);
        push_decimals(&mut out, types.iter().copied());
        out.push_str(&tail);
        out
    };
    let ja3 = with_types(&types);
    types.sort_unstable();
    let ja3n = with_types(&types);
    Ja3 {
        ja3_hash: hex_id("", &Md5::digest(&ja3)),
        ja3n_hash: hex_id("", &Md5::digest(&ja3n)),
        ja3,
        ja3n,
    }
}
