//! WINDOW_UPDATE (RFC 9113 section 6.9).

use serde::Serialize;

use crate::codec::Reader;
use crate::h2::error::H2ErrorKind;

/// A WINDOW_UPDATE frame (stream 0 = the connection window).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct WindowUpdate {
    /// Window Size Increment. Recorded even when 0 (a PROTOCOL_ERROR, but an observer reports
    /// what it saw).
    pub increment: u32,
}

impl WindowUpdate {
    pub(crate) fn read(r: &mut Reader<'_>, length: u32) -> Result<Self, H2ErrorKind> {
        // A length other than 4 is a FRAME_SIZE_ERROR (section 6.9).
        let bad = H2ErrorKind::BadLength {
            frame: "WINDOW_UPDATE",
        };
        if length != 4 {
            return Err(bad);
        }
        // "The most significant bit ... is reserved and MUST be ignored when received."
        Ok(Self {
            increment: r.u32().ok_or(bad)? & 0x7fff_ffff,
        })
    }
}
