//! The HTTP/2 part of the echo JSON: the connection's fingerprints, and one request's headers.

use exitvoice_schema::{Http2Connection, Http2Echo, RawJson};
use serde::{Serialize, Serializer};

use super::frame::{Frame, Payload, PriorityFields, Setting};
use super::{akamai, voice, H2Prefix, Request};

/// The connection-level HTTP/2 facts of a parsed prefix: the fingerprints. The browser profile it
/// matches is the caller's to fill (`classify::browser_profile`, which reads `h2`, not the other
/// way round); the frame log and what is read from it (`detail`) is written only when an answer
/// or a reader needs it ([`detail`]).
pub fn connection(prefix: &H2Prefix) -> Http2Connection {
    let akamai_fingerprint = akamai::akamai_fingerprint(prefix);
    let akamai_fingerprint_hash = akamai::akamai_fingerprint_hash(&akamai_fingerprint);
    // RFC 9113 section 3.4: the preface "MUST be followed by a SETTINGS frame"; a connection
    // whose first frame is anything else was not opened by this client's own stack.
    let own_preface_and_settings = matches!(
        prefix.frames.first().map(|f| &f.payload),
        Some(Payload::Settings(s)) if !s.ack
    );
    Http2Connection {
        akamai_fingerprint,
        akamai_fingerprint_hash,
        voice_id: voice::voice_id(prefix),
        profile: None,
        own_preface_and_settings,
        detail: RawJson::null(),
    }
}

/// The echo's `http2.detail` of the connection: the frame log, settings, priorities, `request`'s
/// header representations (the first request's in a connection's facts), the Akamai variants
/// and the voice description, written straight from the parser's model.
pub fn detail(prefix: &H2Prefix, request: Option<&Request>) -> RawJson {
    RawJson::of(&Detail {
        akamai_variants: Variants(prefix),
        connection_window_update: prefix.connection_window_update(),
        frames: &prefix.frames,
        frames_capped: prefix.frames_capped,
        header_blocks_capped: prefix.header_blocks_capped,
        priority_capped: prefix.priority_capped,
        priority_frames: prefix
            .priority_frames()
            .map(|(stream_id, priority)| StreamPriority {
                priority,
                stream_id,
            })
            .collect(),
        request,
        settings: prefix.settings().map(|s| s.entries.as_slice()),
        truncated: prefix.truncated,
        voice_description: voice::voice_description(prefix),
    })
}

/// `http2.detail`, fields in alphabetical order.
#[derive(Serialize)]
struct Detail<'a> {
    akamai_variants: Variants<'a>,
    connection_window_update: Option<u32>,
    frames: &'a [Frame],
    frames_capped: bool,
    header_blocks_capped: bool,
    priority_capped: bool,
    priority_frames: Vec<StreamPriority>,
    request: Option<&'a Request>,
    settings: Option<&'a [Setting]>,
    truncated: bool,
    voice_description: String,
}

/// A PRIORITY frame before the first HEADERS, with its stream.
#[derive(Serialize)]
struct StreamPriority {
    priority: PriorityFields,
    stream_id: u32,
}

/// Every Akamai variant's string, as a map from the variant's name.
struct Variants<'a>(&'a H2Prefix);

impl Serialize for Variants<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(
            akamai::AkamaiVariant::ALL
                .iter()
                .map(|v| (v, akamai::akamai_variant(self.0, *v))),
        )
    }
}

/// The echo of request number `request_index` (0-based, into [`H2Prefix::requests`]) of the
/// connection. The fingerprints are the connection's; the header orders and the detail's
/// `request` are that request's (empty when the index is past the decoded requests).
pub fn echo(prefix: &H2Prefix, request_index: usize) -> Http2Echo {
    let connection = connection(prefix);
    let request = prefix.requests.get(request_index);
    let lossy = |n: &[u8]| String::from_utf8_lossy(n).into_owned();
    Http2Echo {
        akamai_fingerprint: connection.akamai_fingerprint,
        akamai_fingerprint_hash: connection.akamai_fingerprint_hash,
        voice_id: connection.voice_id,
        pseudo_header_order: request
            .map(|r| r.pseudo_header_order().map(lossy).collect())
            .unwrap_or_default(),
        header_order: request
            .map(|r| r.header_names().map(lossy).collect())
            .unwrap_or_default(),
        detail: detail(prefix, request),
    }
}
