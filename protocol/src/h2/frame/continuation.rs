//! CONTINUATION (RFC 9113 section 6.10): more of the header block a HEADERS frame started.

use serde::Serialize;

use super::FLAG_END_HEADERS;

/// A CONTINUATION frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Continuation {
    /// END_HEADERS flag.
    pub end_headers: bool,
}

impl Continuation {
    pub(crate) fn new(flags: u8) -> Self {
        Self {
            end_headers: flags & FLAG_END_HEADERS != 0,
        }
    }
}
