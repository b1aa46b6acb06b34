//! Following one connection's requests as they arrive: each call reads only the capture bytes
//! that arrived since the last one, decodes the header blocks in them with the connection's one
//! HPACK decoder (RFC 7541 section 2.2: the dynamic table is the connection's), and hands out the
//! head of each new request. A request on a long connection so costs its own frames, not the
//! connection's history.

use std::collections::VecDeque;

use super::error::H2ErrorKind;
use super::frame::{self, Next, Payload};
use super::hpack;
use super::preface::PREFACE;
use crate::codec::Reader;

/// Heads decoded but not yet asked for; older ones are forgotten (a request that never reached
/// an echo route, e.g. one refused for a bad token or by hyper's header-list limit, never asks
/// for its head).
const MAX_WAITING: usize = 16;
/// Header names kept per head; an HPACK bomb's thousands of fields must not be held as names
/// (the same cap as an HTTP/1 head's, [`crate::h1::MAX_HEADERS`]).
const MAX_NAMES: usize = crate::h1::MAX_HEADERS;

/// What a request's HEADERS said about the request itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHead {
    /// Stream id of its HEADERS frame.
    pub stream_id: u32,
    /// Pseudo-header names, wire order.
    pub pseudo_header_order: Vec<String>,
    /// Regular header names, wire order.
    pub header_order: Vec<String>,
}

/// The follower's state on one connection.
#[derive(Debug)]
pub struct HeaderFollower {
    /// Capture bytes consumed so far (the preface included): always at a frame boundary.
    offset: usize,
    decoder: hpack::Decoder,
    /// A header block whose END_HEADERS has not arrived: its stream and fragments so far.
    open: Option<(u32, Vec<u8>)>,
    /// Highest stream a HEADERS opened: client stream ids only grow (RFC 9113 section 5.1.1), so
    /// a HEADERS on a stream at or below it is trailers, not a request.
    max_opened: u32,
    /// Requests opened so far.
    opened: u32,
    /// Decoded heads not asked for yet, by request index.
    waiting: VecDeque<(u32, RequestHead)>,
    /// A frame or header block failed to parse: the HPACK state is lost, nothing more is read.
    failed: bool,
}

impl Default for HeaderFollower {
    fn default() -> Self {
        Self {
            offset: PREFACE.len(),
            decoder: hpack::Decoder::new(),
            open: None,
            max_opened: 0,
            opened: 0,
            waiting: VecDeque::new(),
            failed: false,
        }
    }
}

impl HeaderFollower {
    /// The stream offset the next call reads from (a frame boundary).
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The head of request `index` (1 for the first opened stream), reading `capture` (the
    /// connection's decrypted client bytes from stream offset `base` on, the preface at offset
    /// 0) past what earlier calls read. `Ok(None)` when that request's HEADERS are not there
    /// (not arrived, or no longer kept).
    ///
    /// # Errors
    /// The first time a frame or header block fails to parse; `Ok(None)` for every call after.
    pub fn head(
        &mut self,
        capture: &[u8],
        base: usize,
        index: u32,
    ) -> Result<Option<RequestHead>, H2ErrorKind> {
        if !self.failed {
            if let Err(kind) = self.read(capture, base) {
                self.failed = true;
                return Err(kind);
            }
        }
        let at = self.waiting.iter().position(|(i, _)| *i == index);
        Ok(at
            .and_then(|at| self.waiting.remove(at))
            .map(|(_, head)| head))
    }

    /// Reads every whole frame that arrived since the last call.
    fn read(&mut self, capture: &[u8], base: usize) -> Result<(), H2ErrorKind> {
        let Some(new) = self
            .offset
            .checked_sub(base)
            .and_then(|at| capture.get(at..))
        else {
            return Ok(());
        };
        let mut r = Reader::new(new);
        while !r.is_empty() {
            let start = r.offset();
            let read = match frame::read(&mut r)? {
                Next::Frame(read) if !read.frame.truncated => read,
                // Not all of it here yet: read it whole next time.
                Next::Frame(_) | Next::CutHeader => {
                    self.offset += start;
                    return Ok(());
                }
            };
            let stream_id = read.frame.header.stream_id;
            match (&read.frame.payload, read.fragment) {
                (Payload::Headers(h), Some(fragment)) => {
                    if self.open.is_some() {
                        return Err(H2ErrorKind::ContinuationExpected);
                    }
                    self.open = Some((stream_id, fragment.to_vec()));
                    if h.end_headers {
                        self.finish()?;
                    }
                }
                (Payload::Continuation(c), Some(fragment)) => match &mut self.open {
                    Some((open_stream, block)) if *open_stream == stream_id => {
                        block.extend_from_slice(fragment);
                        if c.end_headers {
                            self.finish()?;
                        }
                    }
                    _ => return Err(H2ErrorKind::UnexpectedContinuation),
                },
                _ if self.open.is_some() => return Err(H2ErrorKind::ContinuationExpected),
                _ => {}
            }
        }
        self.offset += new.len();
        Ok(())
    }

    /// Decodes the open block; a new stream's block is a request's head.
    fn finish(&mut self) -> Result<(), H2ErrorKind> {
        let Some((stream_id, block)) = self.open.take() else {
            return Ok(());
        };
        let decoded = self.decoder.decode(&block).map_err(H2ErrorKind::Hpack)?;
        if stream_id <= self.max_opened {
            return Ok(());
        }
        self.max_opened = stream_id;
        self.opened += 1;
        let lossy = |name: &[u8]| String::from_utf8_lossy(name).into_owned();
        let (pseudo, regular): (Vec<_>, Vec<_>) = decoded.fields().partition(|f| f.is_pseudo());
        if self.waiting.len() >= MAX_WAITING {
            self.waiting.pop_front();
        }
        self.waiting.push_back((
            self.opened,
            RequestHead {
                stream_id,
                pseudo_header_order: pseudo
                    .iter()
                    .take(MAX_NAMES)
                    .map(|f| lossy(f.name))
                    .collect(),
                header_order: regular
                    .iter()
                    .take(MAX_NAMES)
                    .map(|f| lossy(f.name))
                    .collect(),
            },
        ));
        Ok(())
    }
}
