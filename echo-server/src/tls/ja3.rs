//! JA3 (salesforce/ja3, README.md and python/ja3.py) and JA3N, the same string with the
//! extension list sorted (spec: fingerprints.md section 1).
//!
//! `SSLVersion,Ciphers,Extensions,EllipticCurves,EllipticCurvePointFormats`, decimal numbers
//! joined by `-`, GREASE removed everywhere except the point formats, which are taken byte by
//! byte. A malformed supported_groups or ec_point_formats extension gives an empty field.

use std::ops::Range;

use md5::{Digest, Md5};

use super::ascii::Ascii;
use super::client_hello::ClientHello;
use super::extension::ExtensionBody;
use super::grease::is_grease;
use super::survey::Survey;

/// Where JA3, JA3N and their md5 hashes sit in the scratch buffer.
pub(crate) struct Ja3Set {
    pub(crate) ja3: Range<usize>,
    pub(crate) ja3_hash: Range<usize>,
    pub(crate) ja3n: Range<usize>,
    pub(crate) ja3n_hash: Range<usize>,
}

/// Writes JA3, JA3N and their lowercase-hex md5 hashes of `hello` to `out`.
pub(crate) fn write_ja3(hello: &ClientHello<'_>, s: &Survey<'_, '_>, out: &mut Ascii) -> Ja3Set {
    let start = out.len();
    out.dec(hello.legacy_version.0);
    out.byte(b',');
    out.dec_list(b'-', s.ciphers.as_slice().iter().copied());
    out.byte(b',');
    let head = out.len();
    out.dec_list(b'-', s.types.as_slice().iter().copied());
    let tail = out.len();
    out.byte(b',');
    if let Some(ExtensionBody::SupportedGroups(groups)) = s.supported_groups {
        out.dec_list(b'-', groups.values().filter(|v| !is_grease(*v)));
    }
    out.byte(b',');
    if let Some(ExtensionBody::EcPointFormats(formats)) = s.ec_point_formats {
        out.dec_list(b'-', formats.values().map(u16::from));
    }
    let ja3 = start..out.len();

    // JA3N: the same `version,ciphers,` and `,curves,formats` around the sorted types.
    let ja3n_start = out.len();
    out.repeat(start..head);
    out.dec_list(b'-', s.sorted_types.as_slice().iter().copied());
    out.repeat(tail..ja3.end);
    let ja3n = ja3n_start..out.len();

    // Both strings share `version,ciphers,`: hash it once.
    let mut prefix = Md5::new();
    prefix.update(out.bytes(start..head));
    let mut h = prefix.clone();
    h.update(out.bytes(head..ja3.end));
    let ja3_digest = h.finalize();
    let mut h = prefix;
    h.update(out.bytes(ja3n.start + (head - start)..ja3n.end));
    let ja3n_digest = h.finalize();

    let ja3_hash_start = out.len();
    out.hex(&ja3_digest);
    let ja3_hash = ja3_hash_start..out.len();
    out.hex(&ja3n_digest);
    let ja3n_hash = ja3_hash.end..out.len();
    Ja3Set {
        ja3,
        ja3_hash,
        ja3n,
        ja3n_hash,
    }
}
