//! The parts of the echo's opaque `detail` JSON the page shows, read as typed structs.
//!
//! The echo writes `tls.detail` and `http2.detail` straight from its parsers' models; the page
//! only reads the JSON the client would get from `/api/all`, never the bytes again. Every field
//! defaults, so a detail that lacks one (a truncated capture) still renders what is there.

use serde::Deserialize;

/// A registry code point as the echo writes it: `{"value": n, "name": "…"}`, `name` absent when
/// unknown and `GREASE` for RFC 8701 values.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Code {
    pub(crate) value: u32,
    #[serde(default)]
    pub(crate) name: Option<String>,
}

impl Code {
    /// Whether the echo named it GREASE.
    pub(crate) fn is_grease(&self) -> bool {
        self.name.as_deref() == Some("GREASE")
    }
}

/// `tls.detail`: the parsed ClientHello.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct HelloDetail {
    pub(crate) cipher_suites: Vec<Code>,
    pub(crate) extensions: Vec<Extension>,
}

/// One extension of the ClientHello, wire order.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Extension {
    #[serde(rename = "type")]
    pub(crate) kind: Code,
    pub(crate) len: u32,
    pub(crate) body: ExtensionBody,
}

/// What the echo decoded of an extension's body; `value` is a list of code points for the
/// registries (groups, signature algorithms, versions) and of strings for ALPN and SNI.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ExtensionBody {
    pub(crate) value: serde_json::Value,
}

impl ExtensionBody {
    /// The decoded values as one line: names (or numbers) of a code-point list, the strings of
    /// a string list, a single string as is; empty for anything else.
    pub(crate) fn summary(&self) -> String {
        match &self.value {
            serde_json::Value::Array(items) => items
                .iter()
                .filter_map(|item| match item {
                    serde_json::Value::String(text) => Some(text.clone()),
                    serde_json::Value::Object(code) => code
                        .get("name")
                        .and_then(|n| n.as_str().map(str::to_owned))
                        .or_else(|| code.get("value").map(|v| v.to_string())),
                    other => Some(other.to_string()),
                })
                .collect::<Vec<_>>()
                .join(", "),
            serde_json::Value::String(text) => text.clone(),
            _ => String::new(),
        }
    }
}

/// `http2.detail`: SETTINGS, WINDOW_UPDATE, priorities, the request's HEADERS, and what was cut.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Http2Detail {
    pub(crate) settings: Option<Vec<Setting>>,
    pub(crate) connection_window_update: Option<u32>,
    pub(crate) priority_frames: Vec<StreamPriority>,
    pub(crate) request: Option<RequestDetail>,
    pub(crate) voice_description: String,
    pub(crate) truncated: bool,
    pub(crate) frames_capped: bool,
    pub(crate) header_blocks_capped: bool,
    pub(crate) priority_capped: bool,
}

/// One SETTINGS entry, wire order.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Setting {
    pub(crate) id: u16,
    pub(crate) value: u32,
    pub(crate) name: Option<String>,
}

/// A PRIORITY frame sent before the first HEADERS.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct StreamPriority {
    pub(crate) stream_id: u32,
    pub(crate) priority: Priority,
}

/// Exclusive bit, dependency and weight (1–256).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Priority {
    pub(crate) exclusive: bool,
    pub(crate) dependency: u32,
    pub(crate) weight: u16,
}

impl Priority {
    /// `exclusive, depends on N, weight W`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{}depends on stream {}, weight {}",
            if self.exclusive { "exclusive, " } else { "" },
            self.dependency,
            self.weight
        )
    }
}

/// The first request's HEADERS frame as the detail records it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RequestDetail {
    pub(crate) stream_id: u32,
    pub(crate) priority: Option<Priority>,
}

/// Reads `json` as `T`; the default (an empty section) when it is `null` or of another shape.
pub(crate) fn read<T: Default + for<'de> Deserialize<'de>>(json: &str) -> T {
    serde_json::from_str::<Option<T>>(json)
        .ok()
        .flatten()
        .unwrap_or_default()
}
