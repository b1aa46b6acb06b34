//! GOAWAY (RFC 9113 section 6.8).

use serde::Serialize;

use crate::codec::Reader;
use crate::h2::error::H2ErrorKind;

/// A GOAWAY frame (the debug data is counted, not kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GoAway {
    /// Last-Stream-ID (reserved bit cleared).
    pub last_stream_id: u32,
    /// Error code.
    pub error_code: u32,
    /// Length of the additional debug data.
    pub debug_length: u32,
}

impl GoAway {
    pub(crate) fn read(r: &mut Reader<'_>, length: u32) -> Result<Self, H2ErrorKind> {
        let bad = H2ErrorKind::BadLength { frame: "GOAWAY" };
        let last = r.u32().ok_or(bad)?;
        let error_code = r.u32().ok_or(bad)?;
        Ok(Self {
            last_stream_id: last & 0x7fff_ffff,
            error_code,
            debug_length: length.saturating_sub(8),
        })
    }
}
