//! RST_STREAM (RFC 9113 section 6.4).

use serde::Serialize;

use crate::codec::Reader;
use crate::h2::error::H2ErrorKind;

/// A RST_STREAM frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RstStream {
    /// Error code (RFC 9113 section 7).
    pub error_code: u32,
}

impl RstStream {
    pub(crate) fn read(r: &mut Reader<'_>, length: u32) -> Result<Self, H2ErrorKind> {
        // A length other than 4 is a FRAME_SIZE_ERROR (section 6.4).
        let bad = H2ErrorKind::BadLength {
            frame: "RST_STREAM",
        };
        if length != 4 {
            return Err(bad);
        }
        Ok(Self {
            error_code: r.u32().ok_or(bad)?,
        })
    }
}
