//! HTTP/2 client prefix parsing: preface, frame log, HPACK (decoded fields and their
//! representations), the Akamai fingerprint and the HTTP/2 voice.
//!
//! Input is the decrypted client→server bytes of one connection, from the preface on, as a
//! capped capture: a frame cut by the end of the capture is not an error (`truncated`). Output is
//! an [`H2Prefix`]: every frame in order (up to [`MAX_FRAMES`]), and every header block decoded
//! with one HPACK decoder for the whole connection (up to [`MAX_HEADER_BLOCKS`]).
//!
//! Errors carry the partial result: see [`H2Error::partial`].

mod akamai;
mod echo;
mod error;
mod follow;
pub mod frame;
pub mod hpack;
mod preface;
mod voice;

use serde::Serialize;

pub(crate) use akamai::pseudo_letter;
pub use akamai::{akamai_fingerprint, akamai_fingerprint_hash, akamai_variant, AkamaiVariant};
pub use echo::{connection, detail, echo};
pub use error::H2ErrorKind;
pub use follow::{HeaderFollower, RequestHead};
pub use frame::{Frame, FrameHeader, FrameType, Payload, PriorityFields, Setting, Settings};
pub use hpack::{Field, FieldKind, HeaderBlock, Representation, TableSizeUpdate};
pub use preface::PREFACE;
pub(crate) use voice::PER_REQUEST_HEADERS;
pub use voice::{voice_description, voice_id};

use crate::codec::Reader;
use frame::Next;
use preface::PrefaceMatch;

/// Frames recorded per connection; later frames are not parsed ([`H2Prefix::frames_capped`]).
pub const MAX_FRAMES: usize = 256;
/// Header blocks decoded per connection ([`H2Prefix::header_blocks_capped`]). Later blocks are
/// still logged as frames but not decoded (the HPACK state would be wrong after a skipped one).
pub const MAX_HEADER_BLOCKS: usize = 4;
/// PRIORITY frames recorded per connection; later ones are skipped and counted in
/// [`H2Prefix::priority_capped`] (a flood of them must not crowd the HEADERS out of the log).
pub const MAX_PRIORITY_FRAMES: usize = 64;

/// What one connection's client sent, as parsed.
#[derive(Clone, Debug, Default, Serialize)]
pub struct H2Prefix {
    /// Frames in wire order (PRIORITY frames past [`MAX_PRIORITY_FRAMES`] left out).
    pub frames: Vec<Frame>,
    /// One entry per header block (HEADERS plus its CONTINUATIONs), wire order.
    pub requests: Vec<Request>,
    /// The capture ended inside the preface, a frame or a header block.
    pub truncated: bool,
    /// More than [`MAX_FRAMES`] frames: parsing stopped there.
    pub frames_capped: bool,
    /// More than [`MAX_HEADER_BLOCKS`] header blocks: later ones were not decoded.
    pub header_blocks_capped: bool,
    /// More than [`MAX_PRIORITY_FRAMES`] PRIORITY frames: later ones were not recorded.
    pub priority_capped: bool,
}

/// One decoded header block: a request (or trailers) on one stream.
#[derive(Clone, Debug, Serialize)]
pub struct Request {
    /// Stream id of the HEADERS frame.
    pub stream_id: u32,
    /// The HEADERS frame's priority fields, when its PRIORITY flag was set.
    pub priority: Option<PriorityFields>,
    /// END_STREAM on the HEADERS frame.
    pub end_stream: bool,
    /// Whether the whole block arrived and decoded (false: cut by the end of the capture, or an
    /// HPACK error; the fields decoded before it are kept).
    pub complete: bool,
    /// The decoded fields with their representations.
    #[serde(flatten)]
    pub block: HeaderBlock,
}

impl Request {
    /// Pseudo-header names (`:method`, …) in wire order.
    pub fn pseudo_header_order(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.block
            .fields()
            .filter(|f| f.is_pseudo())
            .map(|f| f.name)
    }

    /// Regular header names in wire order.
    pub fn header_names(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.block
            .fields()
            .filter(|f| !f.is_pseudo())
            .map(|f| f.name)
    }
}

impl H2Prefix {
    /// Index in [`Self::frames`] of the first HEADERS frame.
    fn first_headers(&self) -> usize {
        self.frames
            .iter()
            .position(|f| f.header.kind == FrameType::HEADERS)
            .unwrap_or(self.frames.len())
    }

    /// The client's first SETTINGS frame that is not an ACK, on stream 0.
    pub fn settings(&self) -> Option<&Settings> {
        self.frames.iter().find_map(|f| match &f.payload {
            Payload::Settings(s) if !s.ack && f.header.stream_id == 0 => Some(s),
            _ => None,
        })
    }

    /// Increment of the first connection-level (stream 0) WINDOW_UPDATE before the first
    /// HEADERS.
    pub fn connection_window_update(&self) -> Option<u32> {
        self.frames
            .get(..self.first_headers())
            .unwrap_or_default()
            .iter()
            .find_map(|f| match &f.payload {
                Payload::WindowUpdate(w) if f.header.stream_id == 0 => Some(w.increment),
                _ => None,
            })
    }

    /// PRIORITY frames before the first HEADERS, as (stream id, fields).
    pub fn priority_frames(&self) -> impl Iterator<Item = (u32, PriorityFields)> + '_ {
        self.frames
            .get(..self.first_headers())
            .unwrap_or_default()
            .iter()
            .filter_map(|f| match &f.payload {
                Payload::Priority(p) => Some((f.header.stream_id, p.fields)),
                _ => None,
            })
    }

    /// The first decoded request.
    pub fn first_request(&self) -> Option<&Request> {
        self.requests.first()
    }
}

/// A parse error, with where it happened and everything parsed before it. An error never loses
/// what was parsed before it: [`H2Error::partial`] holds the prefix up to the frame that failed
/// (the server keeps that capture; the fingerprints of a connection whose fourth frame is
/// malformed are still computable from the first three).
#[derive(Debug, thiserror::Error)]
#[error("HTTP/2 prefix: {kind} at byte {offset}")]
pub struct H2Error {
    /// What went wrong.
    pub kind: H2ErrorKind,
    /// Offset of the frame (or preface) that failed.
    pub offset: usize,
    /// The prefix as parsed up to that frame.
    pub partial: Box<H2Prefix>,
}

/// A header block whose HEADERS has arrived but not its END_HEADERS.
struct OpenBlock<'a> {
    stream_id: u32,
    priority: Option<PriorityFields>,
    end_stream: bool,
    first: &'a [u8],
    /// Only used once a CONTINUATION arrives: the fragments concatenated.
    joined: Vec<u8>,
}

impl OpenBlock<'_> {
    fn bytes(&self) -> &[u8] {
        if self.joined.is_empty() {
            self.first
        } else {
            &self.joined
        }
    }
}

/// Parse the decrypted client bytes of one connection, from the preface on.
///
/// # Errors
///
/// [`H2Error`] for a wrong preface, a frame over [`frame::MAX_FRAME_LEN`], a frame of the wrong
/// size for its type, bad padding, a CONTINUATION out of place, or a header block that does not
/// decode. The error's `partial` holds everything parsed before the failing frame (including
/// that frame when the failure is in its header block). A capture that simply ends is not an
/// error: the result has `truncated` set.
pub fn parse_prefix(bytes: &[u8]) -> Result<H2Prefix, H2Error> {
    let mut p = H2Prefix {
        frames: Vec::with_capacity(8),
        requests: Vec::with_capacity(2),
        ..H2Prefix::default()
    };
    match preface::check(bytes) {
        PrefaceMatch::Complete => {}
        PrefaceMatch::Partial => {
            p.truncated = true;
            return Ok(p);
        }
        PrefaceMatch::Mismatch => return Err(fail(H2ErrorKind::BadPreface, 0, p)),
    }
    let mut r = Reader::new(bytes.get(PREFACE.len()..).unwrap_or_default());
    let mut decoder = hpack::Decoder::new();
    let mut open: Option<OpenBlock<'_>> = None;
    let mut priority_seen = 0usize;
    while !r.is_empty() {
        if p.frames.len() >= MAX_FRAMES {
            p.frames_capped = true;
            break;
        }
        let offset = PREFACE.len() + r.offset();
        let read = match frame::read(&mut r) {
            Ok(Next::Frame(read)) => read,
            Ok(Next::CutHeader) => {
                p.truncated = true;
                break;
            }
            Err(kind) => return Err(fail(kind, offset, p)),
        };
        let frame::Read { frame, fragment } = read;
        p.truncated |= frame.truncated;
        let kind = frame.header.kind;
        match &open {
            Some(o) if kind != FrameType::CONTINUATION || frame.header.stream_id != o.stream_id => {
                return Err(fail(H2ErrorKind::ContinuationExpected, offset, p));
            }
            None if kind == FrameType::CONTINUATION => {
                return Err(fail(H2ErrorKind::UnexpectedContinuation, offset, p));
            }
            _ => {}
        }
        if kind == FrameType::PRIORITY {
            priority_seen += 1;
            if priority_seen > MAX_PRIORITY_FRAMES {
                p.priority_capped = true;
                continue;
            }
        }
        let mut finished = None;
        match (&frame.payload, fragment) {
            (Payload::Headers(h), Some(frag)) => {
                let block = OpenBlock {
                    stream_id: frame.header.stream_id,
                    priority: h.priority,
                    end_stream: h.end_stream,
                    first: frag,
                    joined: Vec::new(),
                };
                if h.end_headers || frame.truncated {
                    finished = Some((block, h.end_headers && !frame.truncated));
                } else {
                    open = Some(block);
                }
            }
            (Payload::Continuation(c), Some(frag)) => {
                if let Some(mut block) = open.take() {
                    if block.joined.is_empty() {
                        block.joined.extend_from_slice(block.first);
                    }
                    block.joined.extend_from_slice(frag);
                    if c.end_headers || frame.truncated {
                        finished = Some((block, c.end_headers && !frame.truncated));
                    } else {
                        open = Some(block);
                    }
                }
            }
            _ => {}
        }
        p.frames.push(frame);
        if let Some((block, complete)) = finished {
            if let Err(e) = finish_block(&mut p, &mut decoder, &block, complete) {
                return Err(fail(H2ErrorKind::Hpack(e), offset, p));
            }
        }
    }
    if let Some(block) = open.take() {
        // The capture ended between a HEADERS and its END_HEADERS.
        p.truncated = true;
        let _ = finish_block(&mut p, &mut decoder, &block, false);
    }
    Ok(p)
}

/// Decode one header block into a [`Request`]. An incomplete block (cut capture) is decoded as
/// far as it goes and never fails.
fn finish_block(
    p: &mut H2Prefix,
    decoder: &mut hpack::Decoder,
    block: &OpenBlock<'_>,
    complete: bool,
) -> Result<(), hpack::HpackError> {
    if p.requests.len() >= MAX_HEADER_BLOCKS {
        p.header_blocks_capped = true;
        return Ok(());
    }
    let mut out = HeaderBlock::with_capacity(block.bytes().len());
    let result = decoder.decode_into(block.bytes(), &mut out);
    p.requests.push(Request {
        stream_id: block.stream_id,
        priority: block.priority,
        end_stream: block.end_stream,
        complete: complete && result.is_ok(),
        block: out,
    });
    if complete {
        result
    } else {
        Ok(())
    }
}

fn fail(kind: H2ErrorKind, offset: usize, partial: H2Prefix) -> H2Error {
    H2Error {
        kind,
        offset,
        partial: Box::new(partial),
    }
}
