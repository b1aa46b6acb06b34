//! The HTTP/2 voice: a hash of what distinguishes one client stack's HTTP/2 from another's and
//! stays the same across its connections.
//!
//! `voice_id = "h2v1_" + hex(sha256(description))[..24]`, where the description is these lines
//! (see [`voice_description`]; docs/voice-http.md explains each choice):
//!
//! ```text
//! h2v1
//! s=<first non-ACK SETTINGS, wire order, id:value joined by ';'; a GREASE id is written `g`>
//! wu=<first stream-0 WINDOW_UPDATE increment before the first HEADERS, or ->
//! p=<PRIORITY frames before the first HEADERS, stream:exclusive:dependency:weight, or ->
//! hp=<first request's HEADERS priority exclusive:dependency:weight, or ->
//! ps=<first request's pseudo-headers, wire order: m a s p, others by full name>
//! h=<first request's regular header names, wire order, minus the per-request ones>
//! ```
//!
//! Header *values* are left out, `user-agent` included: values change with the page and the
//! browser build (every Chrome release changes the user-agent and sec-ch-ua) while the HTTP/2
//! stack that writes the frames does not, and a value is the first thing a proxy or a script
//! rewrites without touching the stack. GREASE setting ids and values are random per connection,
//! so only their position stays. Names of fields that depend on the request rather than the
//! stack (`cookie`, `referer`, `content-length`, `content-type`) are left out too.

use sha2::{Digest, Sha256};

use exitvoice_schema::VoiceId;

use super::akamai::pseudo_letter;
use super::H2Prefix;
use crate::text::hex_id;

/// Header names left out of the voice (they depend on the request, not the stack).
pub(crate) const PER_REQUEST_HEADERS: [&[u8]; 4] =
    [b"cookie", b"referer", b"content-length", b"content-type"];

/// Where the description goes (one buffer, hashed in one call: many small hasher updates cost
/// more than the copy).
trait Sink {
    fn put(&mut self, bytes: &[u8]);

    fn num(&mut self, n: u64) {
        self.put(itoa::Buffer::new().format(n).as_bytes());
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// The description in a buffer on the stack (no allocation for the usual few hundred bytes),
/// moved to the heap if it outgrows it.
struct StackSink {
    buf: [u8; 512],
    len: usize,
    spill: Vec<u8>,
}

impl Sink for StackSink {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        match self.buf.get_mut(self.len..end) {
            Some(dst) if self.spill.is_empty() => {
                dst.copy_from_slice(bytes);
                self.len = end;
            }
            _ => {
                if self.spill.is_empty() {
                    self.spill
                        .extend_from_slice(self.buf.get(..self.len).unwrap_or_default());
                }
                self.spill.extend_from_slice(bytes);
            }
        }
    }
}

impl StackSink {
    fn bytes(&self) -> &[u8] {
        if self.spill.is_empty() {
            self.buf.get(..self.len).unwrap_or_default()
        } else {
            &self.spill
        }
    }
}

fn describe(prefix: &H2Prefix, w: &mut impl Sink) {
    w.put(b"h2v1\ns=");
    if let Some(settings) = prefix.settings() {
        for (i, e) in settings.entries.iter().enumerate() {
            if i > 0 {
                w.put(b";");
            }
            if e.is_grease() {
                w.put(b"g");
            } else {
                w.num(e.id.into());
                w.put(b":");
                w.num(e.value.into());
            }
        }
    }
    w.put(b"\nwu=");
    match prefix.connection_window_update() {
        Some(v) => w.num(v.into()),
        None => w.put(b"-"),
    }
    w.put(b"\np=");
    let mut any = false;
    for (stream, f) in prefix.priority_frames() {
        if any {
            w.put(b",");
        }
        w.num(stream.into());
        w.put(if f.exclusive { b":1:" } else { b":0:" });
        w.num(f.dependency.into());
        w.put(b":");
        w.num(f.weight.into());
        any = true;
    }
    if !any {
        w.put(b"-");
    }
    let req = prefix.first_request();
    w.put(b"\nhp=");
    match req.and_then(|r| r.priority) {
        Some(f) => {
            w.put(if f.exclusive { b"1:" } else { b"0:" });
            w.num(f.dependency.into());
            w.put(b":");
            w.num(f.weight.into());
        }
        None => w.put(b"-"),
    }
    w.put(b"\nps=");
    if let Some(req) = req {
        for (i, name) in req.pseudo_header_order().enumerate() {
            if i > 0 {
                w.put(b",");
            }
            match pseudo_letter(name) {
                Some(c) => w.put(&[c]),
                None => w.put(name),
            }
        }
    }
    w.put(b"\nh=");
    if let Some(req) = req {
        let mut first = true;
        for name in req.header_names() {
            if PER_REQUEST_HEADERS.contains(&name) {
                continue;
            }
            if !first {
                w.put(b",");
            }
            w.put(name);
            first = false;
        }
    }
    w.put(b"\n");
}

/// The text that [`voice_id`] hashes (for display and debugging; lossy UTF-8).
pub fn voice_description(prefix: &H2Prefix) -> String {
    let mut buf = Vec::with_capacity(256);
    describe(prefix, &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The HTTP/2 voice, `h2v1_` + 24 lowercase hex.
pub fn voice_id(prefix: &H2Prefix) -> VoiceId {
    let mut sink = StackSink {
        buf: [0; 512],
        len: 0,
        spill: Vec::new(),
    };
    describe(prefix, &mut sink);
    let digest = Sha256::digest(sink.bytes());
    VoiceId(hex_id("h2v1_", digest.get(..12).unwrap_or_default()))
}
