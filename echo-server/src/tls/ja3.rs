//! JA3 (salesforce/ja3, README.md and python/ja3.py) and JA3N, the same string with the
//! extension list sorted (spec: fingerprints.md section 1).
//!
//! `SSLVersion,Ciphers,Extensions,EllipticCurves,EllipticCurvePointFormats`, decimal numbers
//! joined by `-`, GREASE removed everywhere except the point formats, which are taken byte by
//! byte. A malformed supported_groups or ec_point_formats extension gives an empty field.

use std::ops::Range;

use md5::{Digest as _, Md5};

use super::ascii::Ascii;
use super::client_hello::ClientHello;
use super::enums::{EcPointFormat, NamedGroup};
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
pub(crate) fn write_ja3(hello: &ClientHello<'_>, s: &Survey<'_>, out: &mut Ascii) -> Ja3Set {
    let groups = s.supported_groups.and_then(|e| e.long_list::<NamedGroup>());
    let formats = s
        .ec_point_formats
        .and_then(|e| e.byte_list::<EcPointFormat>());
    // Up to 6 bytes a number, each string twice (JA3, JA3N), and the two hashes.
    let numbers = s.ciphers.as_slice().len()
        + s.types.as_slice().len()
        + groups.map_or(0, |g| g.len())
        + formats.map_or(0, |f| f.len());
    out.write(12 * numbers + 96, |c| {
        let start = c.pos();
        c.dec(hello.legacy_version().0);
        c.byte(b',');
        c.dec_list(b'-', s.ciphers.as_slice().iter().copied());
        c.byte(b',');
        let head = c.pos();
        c.dec_list(b'-', s.types.as_slice().iter().copied());
        let tail = c.pos();
        c.byte(b',');
        if let Some(groups) = groups {
            c.dec_list(b'-', groups.values().filter(|v| !is_grease(*v)));
        }
        c.byte(b',');
        if let Some(formats) = formats {
            c.dec_list(b'-', formats.values().map(u16::from));
        }
        let ja3 = start..c.pos();

        // JA3N: the same `version,ciphers,` and `,curves,formats` around the sorted types.
        let ja3n_start = c.pos();
        c.repeat(start..head);
        c.dec_list(b'-', s.sorted_types.as_slice().iter().copied());
        c.repeat(tail..ja3.end);
        let ja3n = ja3n_start..c.pos();

        let ja3_digest = Md5::digest(c.bytes(ja3.clone()));
        let ja3n_digest = Md5::digest(c.bytes(ja3n.clone()));

        let ja3_hash_start = c.pos();
        c.hex(&ja3_digest);
        let ja3_hash = ja3_hash_start..c.pos();
        c.hex(&ja3n_digest);
        let ja3n_hash = ja3_hash.end..c.pos();
        Ja3Set {
            ja3,
            ja3_hash,
            ja3n,
            ja3n_hash,
        }
    })
}
