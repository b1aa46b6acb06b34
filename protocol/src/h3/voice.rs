//! The HTTP/3 voice and the `h3_text` string peers publish.
//!
//! `voice_id = "h3v1_" + hex(sha256(description))[..24]`, the description being these lines
//! (the same choices as the HTTP/2 voice, docs/voice-http.md; docs/quic.md):
//!
//! ```text
//! h3v1
//! s=<the control stream's SETTINGS, wire order, id:value joined by ';'; a GREASE id is `g`>
//! ps=<first request's pseudo-headers, wire order: m a s p, others by full name>
//! h=<first request's regular header names, wire order, minus the per-request ones>
//! ```
//!
//! GREASE setting ids and values are random per connection (RFC 9114 section 7.2.4.1): only
//! their position is kept. `h3_text` is 0x676e67/pingly's format: SETTINGS sorted by (GREASE,
//! id), GREASE written `GREASE`, then `|` and the pseudo-header letters.

use md5::{Digest as _, Md5};
use serde::Serialize;
use sha2::Sha256;

use exitvoice_schema::VoiceId;

use super::{HeaderField, Setting};
use crate::h2::{pseudo_letter, PER_REQUEST_HEADERS};
use crate::text::hex_id;

/// What the HTTP/3 voice is computed from, with the results.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct H3Voice {
    /// `h3v1_…`.
    pub voice_id: VoiceId,
    /// The text [`voice_id`] hashed.
    pub voice_description: String,
    /// Peers' `h3_text` (pingly's format).
    pub h3_text: String,
    /// md5 of `h3_text`, lowercase hex.
    pub h3_text_hash: String,
}

impl H3Voice {
    /// The voice of a connection's SETTINGS and its first request's fields.
    pub fn new(settings: &[Setting], fields: &[HeaderField]) -> Self {
        let text = h3_text(settings, fields);
        Self {
            voice_id: voice_id(settings, fields),
            voice_description: voice_description(settings, fields),
            h3_text_hash: h3_text_hash(&text),
            h3_text: text,
        }
    }
}

fn pseudo_name(name: &str) -> String {
    pseudo_letter(name.as_bytes()).map_or_else(|| name.to_owned(), |l| char::from(l).to_string())
}

/// The text [`voice_id`] hashes.
pub fn voice_description(settings: &[Setting], fields: &[HeaderField]) -> String {
    let s = settings_text(settings.iter(), "g");
    let ps: Vec<String> = fields
        .iter()
        .filter(|f| f.is_pseudo())
        .map(|f| pseudo_name(&f.name))
        .collect();
    let h: Vec<&str> = fields
        .iter()
        .filter(|f| !f.is_pseudo() && !PER_REQUEST_HEADERS.contains(&f.name.as_bytes()))
        .map(|f| f.name.as_str())
        .collect();
    format!("h3v1\ns={}\nps={}\nh={}\n", s, ps.join(","), h.join(","))
}

/// The HTTP/3 voice, `h3v1_` + 24 lowercase hex.
pub fn voice_id(settings: &[Setting], fields: &[HeaderField]) -> VoiceId {
    let digest = Sha256::digest(voice_description(settings, fields).as_bytes());
    VoiceId(hex_id("h3v1_", digest.get(..12).unwrap_or_default()))
}

/// pingly's `h3_text`: `1:65536;7:100;51:1;GREASE|m,a,s,p`.
pub fn h3_text(settings: &[Setting], fields: &[HeaderField]) -> String {
    let mut sorted: Vec<&Setting> = settings.iter().collect();
    sorted.sort_by_key(|s| (s.grease, s.id));
    let s = settings_text(sorted.into_iter(), "GREASE");
    let ps: Vec<String> = fields
        .iter()
        .filter(|f| f.is_pseudo())
        .map(|f| f.name.chars().nth(1).map(String::from).unwrap_or_default())
        .collect();
    format!("{s}|{}", ps.join(","))
}

/// Settings as `id:value` joined by `;`, each GREASE setting as `grease`.
fn settings_text<'a>(settings: impl Iterator<Item = &'a Setting>, grease: &str) -> String {
    settings
        .map(|s| {
            if s.grease {
                grease.to_owned()
            } else {
                format!("{}:{}", s.id, s.value)
            }
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// md5 of an `h3_text`, lowercase hex.
pub fn h3_text_hash(text: &str) -> String {
    hex_id("", &Md5::digest(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h3::decode_settings;

    fn field(name: &str) -> HeaderField {
        HeaderField {
            name: name.to_owned(),
            value: String::new(),
        }
    }

    /// Chrome 152's SETTINGS and m,a,s,p: the `h3_text` and its md5 as the public echo
    /// services publish them (docs/quic.md, "Reference values").
    #[test]
    fn chrome_h3_text_matches_the_published_hash() {
        let settings = decode_settings(&super::super::settings::CHROME_SETTINGS).expect("settings");
        let fields: Vec<HeaderField> = [":method", ":authority", ":scheme", ":path", "user-agent"]
            .into_iter()
            .map(field)
            .collect();
        let voice = H3Voice::new(&settings, &fields);
        assert_eq!(voice.h3_text, "1:65536;6:262144;7:100;51:1;GREASE|m,a,s,p");
        assert_eq!(voice.h3_text_hash, "e1d11ee6f2f4c7b1f11bfaaf4dbbc211");
        assert_eq!(
            voice.voice_description,
            "h3v1\ns=1:65536;6:262144;7:100;51:1;g\nps=m,a,s,p\nh=user-agent\n"
        );
        assert!(voice.voice_id.0.starts_with("h3v1_") && voice.voice_id.0.len() == 29);
        // pingly's own example.
        assert_eq!(
            h3_text_hash("1:65536;7:100;51:1;GREASE|m,a,s,p"),
            "b4eb54404dffe4bd2f75bd24785bb476"
        );
    }

    #[test]
    fn grease_values_do_not_move_the_voice() {
        let a = decode_settings(&[0x01, 0x00, 0x40, 0x7e, 0x05]).expect("a");
        let b = decode_settings(&[0x01, 0x00, 0x40, 0x9d, 0x09]).expect("b");
        let fields = [field(":method")];
        assert_eq!(voice_id(&a, &fields), voice_id(&b, &fields));
        let c = decode_settings(&[0x40, 0x7e, 0x05, 0x01, 0x00]).expect("c");
        assert_ne!(voice_id(&a, &fields), voice_id(&c, &fields));
    }
}
