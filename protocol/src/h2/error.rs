//! Typed errors of the HTTP/2 prefix parser.
//!
//! An error never loses what was parsed before it: [`H2Error::partial`] holds the prefix up to
//! the frame that failed (the server keeps that capture; the fingerprints of a connection whose
//! fourth frame is malformed are still computable from the first three).

use serde::Serialize;

use super::hpack::HpackError;
use super::H2Prefix;

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
#[non_exhaustive]
pub enum H2ErrorKind {
    /// The bytes do not start with the client connection preface (RFC 9113 section 3.4).
    #[error("not the HTTP/2 client preface")]
    BadPreface,
    /// A frame length above [`super::frame::MAX_FRAME_LEN`] (RFC 9113 section 4.2).
    #[error("frame length {length} above SETTINGS_MAX_FRAME_SIZE")]
    FrameTooLarge {
        /// The length field.
        length: u32,
    },
    /// A frame whose length is wrong for its type (FRAME_SIZE_ERROR).
    #[error("{frame} frame with an invalid length")]
    BadLength {
        /// Frame type name.
        frame: &'static str,
    },
    /// Padding longer than the payload (RFC 9113 sections 6.1 and 6.2).
    #[error("padding longer than the frame payload")]
    BadPadding,
    /// CONTINUATION without an open header block (RFC 9113 section 6.10).
    #[error("CONTINUATION without a preceding HEADERS")]
    UnexpectedContinuation,
    /// A frame other than CONTINUATION for the same stream while a header block is open
    /// (RFC 9113 section 6.10).
    #[error("header block interrupted by another frame")]
    ContinuationExpected,
    /// A header block did not decode.
    #[error("HPACK: {0}")]
    Hpack(HpackError),
    /// Internal marker: a required field was cut by the end of the capture. Never returned.
    #[error("cut by the end of the capture")]
    Cut,
}

/// A parse error, with where it happened and everything parsed before it.
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
