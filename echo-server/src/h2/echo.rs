//! The HTTP/2 part of the echo JSON: the connection's fingerprints, and one request's headers.

use exitvoice_schema::{Http2Connection, Http2Echo};
use serde_json::json;

use super::frame::Payload;
use super::{akamai, voice, H2Prefix};
use crate::classify;

/// The connection-level HTTP/2 facts of a parsed prefix: the fingerprints, the browser profile it
/// matches, and the detail (frame log, settings, priorities, the first request's header
/// representations, the Akamai variants, the voice description).
pub fn connection(prefix: &H2Prefix) -> Http2Connection {
    let akamai_fingerprint = akamai::akamai_fingerprint(prefix);
    let akamai_fingerprint_hash = akamai::akamai_fingerprint_hash(&akamai_fingerprint);
    let variants: serde_json::Map<String, serde_json::Value> = akamai::AkamaiVariant::ALL
        .iter()
        .filter_map(|v| {
            let key = serde_json::to_value(v).ok()?.as_str()?.to_owned();
            Some((key, akamai::akamai_variant(prefix, *v).into()))
        })
        .collect();
    let detail = json!({
        "frames": prefix.frames,
        "settings": prefix.settings().map(|s| &s.entries),
        "connection_window_update": prefix.connection_window_update(),
        "priority_frames": prefix
            .priority_frames()
            .map(|(stream_id, f)| json!({"stream_id": stream_id, "priority": f}))
            .collect::<Vec<_>>(),
        "request": prefix.first_request(),
        "akamai_variants": variants,
        "voice_description": voice::voice_description(prefix),
        "truncated": prefix.truncated,
        "frames_capped": prefix.frames_capped,
        "header_blocks_capped": prefix.header_blocks_capped,
        "priority_capped": prefix.priority_capped,
    });
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
        profile: classify::browser_profile(prefix).map(|p| p.name.to_owned()),
        own_preface_and_settings,
        detail,
    }
}

/// The echo of request number `request_index` (0-based, into [`H2Prefix::requests`]) of the
/// connection. The fingerprints are the connection's; the header orders and the detail's
/// `request` are that request's (empty when the index is past the decoded requests).
pub fn echo(prefix: &H2Prefix, request_index: usize) -> Http2Echo {
    let connection = connection(prefix);
    let request = prefix.requests.get(request_index);
    let mut detail = connection.detail;
    detail["request"] = serde_json::to_value(request).unwrap_or_default();
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
        detail,
    }
}
