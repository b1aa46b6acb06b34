//! The Akamai HTTP/2 fingerprint (Shuster, Segal, Fridman, "Passive Fingerprinting of HTTP/2
//! Clients", Black Hat EU 2017), canonical and in the variants other tools print.
//!
//! Canonical: `S|WU|P|PS` where S = every setting of the first non-ACK SETTINGS frame on stream
//! 0, wire order, `id:value` joined by `;` (unknown and GREASE ids as sent); WU = increment of
//! the first stream-0 WINDOW_UPDATE before the first HEADERS, or `00` when there is none; P =
//! PRIORITY frames before the first HEADERS as `stream:exclusive:dependency:weight` with the
//! real weight (wire byte + 1), joined by `,`, or `0`; PS = pseudo-header order of the first
//! HEADERS as letters `m`,`a`,`s`,`p` (others such as `:protocol` skipped). docs/voice-http.md
//! lists the variants and which tools print them.

use md5::{Digest, Md5};

use super::H2Prefix;
use crate::text::hex_id;

/// A way of writing the Akamai string. Only [`AkamaiVariant::Canonical`] is the paper's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AkamaiVariant {
    /// The paper's definition, as in the module docs.
    Canonical,
    /// GREASE setting ids (`0x?a?a`) left out of S.
    GreaseSettingsDropped,
    /// P with the weight byte as sent (0..=255) instead of the real weight.
    PriorityWireWeight,
    /// WU = sum of every stream-0 WINDOW_UPDATE before the first HEADERS.
    WindowUpdateSum,
    /// WU = first stream-0 WINDOW_UPDATE anywhere in the capture, even after the HEADERS.
    WindowUpdateAnywhere,
    /// WU = `0` (not `00`) when absent.
    WindowUpdateSingleZero,
}

impl AkamaiVariant {
    /// Every variant, canonical first.
    pub const ALL: [Self; 6] = [
        Self::Canonical,
        Self::GreaseSettingsDropped,
        Self::PriorityWireWeight,
        Self::WindowUpdateSum,
        Self::WindowUpdateAnywhere,
        Self::WindowUpdateSingleZero,
    ];
}

/// The canonical Akamai string.
pub fn akamai_fingerprint(prefix: &H2Prefix) -> String {
    akamai_variant(prefix, AkamaiVariant::Canonical)
}

/// md5 of an Akamai string, lowercase hex (what tls.peet.ws calls `akamai_fingerprint_hash`).
pub fn akamai_fingerprint_hash(fingerprint: &str) -> String {
    hex_id("", &Md5::digest(fingerprint.as_bytes()))
}

/// Append `n` in decimal.
fn push_num(s: &mut Vec<u8>, n: u64) {
    s.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// The Akamai string as `variant` writes it.
pub fn akamai_variant(prefix: &H2Prefix, variant: AkamaiVariant) -> String {
    let mut s: Vec<u8> = Vec::with_capacity(96);
    if let Some(settings) = prefix.settings() {
        let mut sep = false;
        for e in &settings.entries {
            if variant == AkamaiVariant::GreaseSettingsDropped && e.is_grease() {
                continue;
            }
            if sep {
                s.push(b';');
            }
            push_num(&mut s, e.id.into());
            s.push(b':');
            push_num(&mut s, e.value.into());
            sep = true;
        }
    }
    s.push(b'|');
    let wu = match variant {
        AkamaiVariant::WindowUpdateSum => window_update_sum(prefix),
        AkamaiVariant::WindowUpdateAnywhere => window_update_anywhere(prefix),
        _ => prefix.connection_window_update(),
    };
    match wu {
        Some(v) => push_num(&mut s, v.into()),
        None if variant == AkamaiVariant::WindowUpdateSingleZero => s.push(b'0'),
        None => s.extend_from_slice(b"00"),
    }
    s.push(b'|');
    let mut any = false;
    for (stream, f) in prefix.priority_frames() {
        if any {
            s.push(b',');
        }
        let weight = if variant == AkamaiVariant::PriorityWireWeight {
            u16::from(f.weight_byte)
        } else {
            f.weight
        };
        push_num(&mut s, stream.into());
        s.extend_from_slice(if f.exclusive { b":1:" } else { b":0:" });
        push_num(&mut s, f.dependency.into());
        s.push(b':');
        push_num(&mut s, weight.into());
        any = true;
    }
    if !any {
        s.push(b'0');
    }
    s.push(b'|');
    if let Some(req) = prefix.first_request() {
        let mut sep = false;
        for name in req.pseudo_header_order() {
            let Some(letter) = pseudo_letter(name) else {
                continue;
            };
            if sep {
                s.push(b',');
            }
            s.push(letter);
            sep = true;
        }
    }
    // Only ASCII was written: digits, separators and the letters of `pseudo_letter`.
    String::from_utf8(s).unwrap_or_default()
}

/// The letter of a pseudo-header in PS, or `None` for those the format skips.
pub(crate) fn pseudo_letter(name: &[u8]) -> Option<u8> {
    match name {
        b":method" => Some(b'm'),
        b":authority" => Some(b'a'),
        b":scheme" => Some(b's'),
        b":path" => Some(b'p'),
        _ => None,
    }
}

fn window_update_sum(prefix: &H2Prefix) -> Option<u32> {
    let mut sum: Option<u32> = None;
    for (stream, inc) in window_updates(prefix, true) {
        if stream == 0 {
            sum = Some(sum.unwrap_or(0).saturating_add(inc));
        }
    }
    sum
}

fn window_update_anywhere(prefix: &H2Prefix) -> Option<u32> {
    window_updates(prefix, false).find_map(|(stream, inc)| (stream == 0).then_some(inc))
}

/// (stream, increment) of WINDOW_UPDATE frames, optionally only those before the first HEADERS.
fn window_updates(
    prefix: &H2Prefix,
    before_headers: bool,
) -> impl Iterator<Item = (u32, u32)> + '_ {
    prefix
        .frames
        .iter()
        .take_while(move |f| !before_headers || f.header.kind != super::FrameType::HEADERS)
        .filter_map(|f| match &f.payload {
            super::Payload::WindowUpdate(w) => Some((f.header.stream_id, w.increment)),
            _ => None,
        })
}
