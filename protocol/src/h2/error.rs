//! What can go wrong in the HTTP/2 prefix parser, by kind. The error itself, which carries the
//! prefix parsed before it, is [`super::H2Error`], beside the parser.

use serde::Serialize;

use super::hpack::HpackError;

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
