//! The HTTP/2 part of the echo JSON.

use exitvoice_schema::Http2Echo;
use serde_json::json;

use super::{akamai, voice, H2Prefix};

/// The echo of request number `request_index` (0-based, into [`H2Prefix::requests`]) of the
/// connection. The fingerprints are the connection's; the header orders and representations are
/// that request's (empty when the index is past the decoded requests).
pub fn echo(prefix: &H2Prefix, request_index: usize) -> Http2Echo {
    let akamai_fingerprint = akamai::akamai_fingerprint(prefix);
    let akamai_fingerprint_hash = akamai::akamai_fingerprint_hash(&akamai_fingerprint);
    let request = prefix.requests.get(request_index);
    let lossy = |n: &[u8]| String::from_utf8_lossy(n).into_owned();
    let pseudo_header_order = request
        .map(|r| r.pseudo_header_order().map(lossy).collect())
        .unwrap_or_default();
    let header_order = request
        .map(|r| r.header_names().map(lossy).collect())
        .unwrap_or_default();
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
        "request": request,
        "akamai_variants": variants,
        "voice_description": voice::voice_description(prefix),
        "truncated": prefix.truncated,
        "frames_capped": prefix.frames_capped,
        "header_blocks_capped": prefix.header_blocks_capped,
        "priority_capped": prefix.priority_capped,
    });
    Http2Echo {
        akamai_fingerprint,
        akamai_fingerprint_hash,
        voice_id: voice::voice_id(prefix),
        pseudo_header_order,
        header_order,
        detail,
    }
}
