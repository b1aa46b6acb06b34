//! The HTTP/1 voice: `h1v1_` + 24 hex of sha256 over
//!
//! ```text
//! h1v1
//! v=<version, e.g. HTTP/1.1>
//! h=<header names in original case and wire order, joined by ','>
//! ```
//!
//! The method and target are left out, so a stack's GET and POST share a voice; so are the
//! names of fields that exist only because of the request rather than the stack (`Cookie`,
//! `Referer`, `Content-Length`, `Content-Type`, `Transfer-Encoding`; matched ignoring case) and
//! all values (user-agent strings change with every release of the same stack).

use sha2::{Digest, Sha256};

use exitvoice_schema::VoiceId;

use super::H1Head;
use crate::text::hex_id;

const PER_REQUEST_HEADERS: [&str; 5] = [
    "cookie",
    "referer",
    "content-length",
    "content-type",
    "transfer-encoding",
];

/// The text [`voice_id`] hashes.
pub fn voice_description(head: &H1Head) -> String {
    let mut text = String::new();
    describe(head, |part| text.push_str(part));
    text
}

/// The HTTP/1 voice, `h1v1_` + 24 lowercase hex. The description goes straight into the hash,
/// part by part: a voice is taken on every HTTP/1 request.
pub fn voice_id(head: &H1Head) -> VoiceId {
    let mut hasher = Sha256::new();
    describe(head, |part| hasher.update(part.as_bytes()));
    let digest = hasher.finalize();
    VoiceId(hex_id("h1v1_", digest.get(..12).unwrap_or_default()))
}

/// Hands the description to `put` in parts, in order.
fn describe(head: &H1Head, mut put: impl FnMut(&str)) {
    put("h1v1\nv=");
    put(&head.version);
    put("\nh=");
    let stack_names = head.headers.iter().map(|(n, _)| n.as_str()).filter(|n| {
        !PER_REQUEST_HEADERS
            .iter()
            .any(|p| p.eq_ignore_ascii_case(n))
    });
    for (i, name) in stack_names.enumerate() {
        if i > 0 {
            put(",");
        }
        put(name);
    }
    put("\n");
}
