//! Say what changed: two observations' voices, field by field.
//!
//! A voice id says *that* a layer differs; [`between`] says *which* fields: the SYN's initial
//! TTL, window, window scale, option layout and quirks (the TCP voice's fields), cipher suites,
//! extensions, groups, signature algorithms, ALPN, versions (every list extension of the
//! ClientHello), SETTINGS ids, values and order, WINDOW_UPDATE, PRIORITY, pseudo-header and
//! header order, the HTTP/1 header order, and ALPN offered / negotiated / spoken. It reads the
//! echo's JSON (the fingerprints and the parsed ClientHello's `detail`), the same for a probe's
//! echo, a stored observation and `exitvoice inspect`'s analysis of a capture file.
//!
//! Normalized like the voices (DESIGN.md, "voice"): GREASE values are dropped (RFC 8701), the
//! extension set is compared as a set (Chrome permutes its extension order on every
//! connection), and the extensions that come and go with resumption or the hello's size
//! (padding, session_ticket, pre_shared_key, early_data) and the server name (the target, not
//! the stack) are left out; so are what the path changes in a SYN (TTL as received, MSS value,
//! the IP layer's quirks). Unknown JSON shapes are read as text, never a panic.

use exitvoice_schema::{Alpn, Change, Echo, Http1Echo, Http2Echo, Spoken, TcpEcho, TlsEcho};
use serde_json::Value;

/// Extension bodies (the echo's `kind` names) that come and go with resumption or the hello's
/// size: left out of the extension set, as the TLS voice leaves them out.
const VOLATILE: [&str; 4] = ["padding", "session_ticket", "pre_shared_key", "early_data"];
/// Extension bodies in the set but not compared as fields: the server name is the target, not
/// the stack; GREASE and unknown bodies are opaque bytes.
const NOT_FIELDS: [&str; 3] = ["server_name", "grease", "unknown"];

/// p0f's quirks of the IP layer, which an IPv6 SYN of the same stack cannot have: left out, as
/// the TCP voice leaves them out.
const IP_QUIRKS: [&str; 5] = ["df", "id+", "id-", "0+", "flow"];

/// One comparable field of a voice.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Field {
    /// A list whose order is part of the voice (ciphers, groups, SETTINGS, header order).
    Ordered(Vec<String>),
    /// A set: only membership counts (the extension types).
    Set(Vec<String>),
    /// A single value.
    Value(String),
}

impl Field {
    fn text(&self) -> String {
        match self {
            Self::Ordered(items) | Self::Set(items) => items.join(","),
            Self::Value(value) => value.clone(),
        }
    }

    fn items(&self) -> &[String] {
        match self {
            Self::Ordered(items) | Self::Set(items) => items,
            Self::Value(_) => &[],
        }
    }
}

/// The comparable fields of one observation's voice, in a fixed order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VoiceView {
    fields: Vec<(&'static str, String, Field)>,
}

impl VoiceView {
    /// The voice fields of a probe's echo (or a stored observation's).
    pub fn of_echo(echo: &Echo) -> Self {
        Self::of_parts(
            echo.tls.as_ref(),
            &echo.alpn,
            echo.http2.as_ref(),
            echo.http1.as_ref(),
        )
        .with_tcp(echo.tcp.as_ref())
    }

    /// The view with the SYN's fields in front, when there was a SYN: from its p0f signature
    /// (`ver:ttl+dist:olen:mss:wsize,scale:olayout:quirks:pclass`, p0f's README section 5),
    /// whose window form and option names are p0f's.
    #[must_use]
    pub fn with_tcp(self, tcp: Option<&TcpEcho>) -> Self {
        let Some(tcp) = tcp else {
            return self;
        };
        let parts: Vec<&str> = tcp.p0f.split(':').collect();
        let part = |i: usize| parts.get(i).copied().unwrap_or_default();
        let (window, scale) = part(4).split_once(',').unwrap_or((part(4), ""));
        let list = |text: &str| -> Vec<String> {
            text.split(',')
                .filter(|item| !item.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let quirks = list(part(6))
            .into_iter()
            .filter(|quirk| !IP_QUIRKS.contains(&quirk.as_str()))
            .collect();
        let mut view = Self::default();
        view.push(
            "tcp",
            "initial_ttl",
            Field::Value(tcp.initial_ttl.to_string()),
        );
        view.push("tcp", "window", Field::Value(window.to_owned()));
        view.push("tcp", "window_scale", Field::Value(scale.to_owned()));
        view.push("tcp", "options", Field::Ordered(list(part(5))));
        view.push("tcp", "quirks", Field::Set(quirks));
        view.fields.extend(self.fields);
        view
    }

    /// The voice fields of a connection's parts: its ClientHello fingerprints, ALPN, and the
    /// HTTP/2 or HTTP/1 echo of its first request.
    pub fn of_parts(
        tls: Option<&TlsEcho>,
        alpn: &Alpn,
        http2: Option<&Http2Echo>,
        http1: Option<&Http1Echo>,
    ) -> Self {
        let mut view = Self::default();
        view.push("tls", "client_hello", Field::Value(present(tls.is_some())));
        if let Some(tls) = tls {
            view.tls(&tls.detail.to_value());
        }
        if tls.is_none() {
            // With a ClientHello, its `alpn` field is the offer.
            view.push("alpn", "offered", Field::Ordered(alpn.offered.clone()));
        }
        view.push(
            "alpn",
            "negotiated",
            Field::Value(alpn.negotiated.clone().unwrap_or_else(|| "none".to_owned())),
        );
        let spoken = match alpn.spoken {
            Spoken::H2 => "h2",
            Spoken::Http1 => "http/1.1",
            _ => "unknown",
        };
        view.push("alpn", "spoken", Field::Value(spoken.to_owned()));
        if let Some(h2) = http2 {
            view.http2(h2);
        }
        if let Some(h1) = http1 {
            let version = h1.request_line.rsplit(' ').next().unwrap_or_default();
            view.push("http1", "version", Field::Value(version.to_owned()));
            view.push(
                "http1",
                "header_order",
                Field::Ordered(h1.header_order.clone()),
            );
        }
        view
    }

    fn push(&mut self, layer: &'static str, field: &str, value: Field) {
        self.fields.push((layer, field.to_owned(), value));
    }

    /// The ClientHello's fields from the echo's parsed `detail`.
    fn tls(&mut self, detail: &Value) {
        let version = detail.get("legacy_version").map_or_else(String::new, code);
        self.push("tls", "legacy_version", Field::Value(version));
        self.push(
            "tls",
            "cipher_suites",
            Field::Ordered(codes(detail.get("cipher_suites"))),
        );
        let extensions = detail
            .get("extensions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut set: Vec<(u64, String)> = Vec::new();
        for extension in extensions {
            let Some(kind) = extension.get("type") else {
                continue;
            };
            let body = extension.get("body");
            let body_kind = body
                .and_then(|b| b.get("kind"))
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            let value = kind.get("value").and_then(Value::as_u64).unwrap_or(0);
            if is_grease(value) || VOLATILE.contains(&body_kind) {
                continue;
            }
            if !set.iter().any(|(v, _)| *v == value) {
                set.push((value, code(kind)));
            }
            if NOT_FIELDS.contains(&body_kind) {
                continue;
            }
            // Every list-valued extension is a field of its own, named after its body.
            if let Some(list) = body.and_then(|b| b.get("value")).filter(|v| v.is_array()) {
                self.push("tls", body_kind, Field::Ordered(codes(Some(list))));
            }
        }
        set.sort_unstable();
        self.push(
            "tls",
            "extensions",
            Field::Set(set.into_iter().map(|(_, name)| name).collect()),
        );
    }

    /// The HTTP/2 fields: the Akamai string's parts (SETTINGS in wire order as `id:value`,
    /// WINDOW_UPDATE, PRIORITY frames), the HEADERS priority, pseudo-header and header order.
    fn http2(&mut self, h2: &Http2Echo) {
        let mut parts = h2.akamai_fingerprint.split('|');
        let mut part = || parts.next().unwrap_or_default().to_owned();
        let settings = part();
        let settings = settings
            .split([';', ','])
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        self.push("http2", "settings", Field::Ordered(settings));
        self.push("http2", "window_update", Field::Value(part()));
        self.push("http2", "priority_frames", Field::Value(part()));
        let headers_priority = h2
            .detail
            .to_value()
            .get("request")
            .and_then(|r| r.get("priority"))
            .filter(|p| !p.is_null())
            .map_or_else(|| "none".to_owned(), Value::to_string);
        self.push("http2", "headers_priority", Field::Value(headers_priority));
        self.push(
            "http2",
            "pseudo_header_order",
            Field::Ordered(h2.pseudo_header_order.clone()),
        );
        self.push(
            "http2",
            "header_order",
            Field::Ordered(h2.header_order.clone()),
        );
    }

    fn get(&self, layer: &str, field: &str) -> Option<&Field> {
        self.fields
            .iter()
            .find(|(l, f, _)| *l == layer && f == field)
            .map(|(_, _, value)| value)
    }
}

/// What differs from `before` to `after`, in `before`'s field order, then fields only `after`
/// has. A field one side lacks compares with an empty list (or `absent`): an h2 connection
/// downgraded to HTTP/1.1 shows its HTTP/2 fields removed and its HTTP/1 fields added.
pub fn between(before: &VoiceView, after: &VoiceView) -> Vec<Change> {
    let mut changes = Vec::new();
    let missing = Field::Value("absent".to_owned());
    let empty_list = |f: &Field| match f {
        Field::Ordered(_) => Field::Ordered(Vec::new()),
        Field::Set(_) => Field::Set(Vec::new()),
        Field::Value(_) => Field::Value("absent".to_owned()),
    };
    let only_after = after
        .fields
        .iter()
        .filter(|(l, f, _)| before.get(l, f).is_none());
    for (layer, field, old) in &before.fields {
        let new = after
            .get(layer, field)
            .cloned()
            .unwrap_or_else(|| empty_list(old));
        if let Some(change) = compare(layer, field, old, &new) {
            changes.push(change);
        }
    }
    for (layer, field, new) in only_after {
        let old = if matches!(new, Field::Value(_)) {
            missing.clone()
        } else {
            empty_list(new)
        };
        if let Some(change) = compare(layer, field, &old, new) {
            changes.push(change);
        }
    }
    changes
}

fn compare(layer: &str, field: &str, old: &Field, new: &Field) -> Option<Change> {
    if old == new {
        return None;
    }
    let added: Vec<String> = new
        .items()
        .iter()
        .filter(|i| !old.items().contains(i))
        .cloned()
        .collect();
    let removed: Vec<String> = old
        .items()
        .iter()
        .filter(|i| !new.items().contains(i))
        .cloned()
        .collect();
    let shared = |a: &Field, b: &Field| -> Vec<String> {
        a.items()
            .iter()
            .filter(|i| b.items().contains(i))
            .cloned()
            .collect()
    };
    let reordered = matches!(new, Field::Ordered(_)) && shared(old, new) != shared(new, old);
    if matches!(new, Field::Set(_)) && added.is_empty() && removed.is_empty() {
        return None;
    }
    Some(Change {
        layer: layer.to_owned(),
        field: field.to_owned(),
        before: old.text(),
        after: new.text(),
        added,
        removed,
        reordered,
    })
}

fn present(yes: bool) -> String {
    if yes { "present" } else { "absent" }.to_owned()
}

/// RFC 8701 section 2: GREASE values are `0x?a?a` with both bytes equal.
fn is_grease(value: u64) -> bool {
    value & 0x0f0f == 0x0a0a && value >> 8 == value & 0xff
}

/// A registry code as the echo writes it (`{"value": 4865, "name": …}`) as `0x` and four hex
/// digits (the numbers JA3 and JA4 use, without a name table that could lag). Other shapes: key
/// shares by group, plain strings (ALPN names) as they are, anything else as JSON text.
fn code(value: &Value) -> String {
    if let Some(number) = value.get("value").and_then(Value::as_u64) {
        return format!("0x{number:04x}");
    }
    if let Some(group) = value.get("group") {
        return code(group);
    }
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A JSON list of codes, GREASE dropped.
fn codes(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|item| {
            let value = item
                .get("value")
                .or_else(|| item.get("group").and_then(|g| g.get("value")))
                .and_then(Value::as_u64);
            !value.is_some_and(is_grease)
        })
        .map(code)
        .collect()
}

#[cfg(test)]
mod tests;
