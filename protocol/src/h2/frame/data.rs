//! DATA (RFC 9113 section 6.1): only lengths are recorded, never the body.

use serde::Serialize;

use super::{FLAG_END_STREAM, FLAG_PADDED};
use crate::codec::Reader;
use crate::h2::error::H2ErrorKind;

/// A DATA frame's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Data {
    /// Pad Length field, when the PADDED flag is set.
    pub pad_length: Option<u8>,
    /// Length of the data itself (payload minus padding fields).
    pub data_length: u32,
    /// END_STREAM flag.
    pub end_stream: bool,
}

impl Data {
    pub(crate) fn read(r: &mut Reader<'_>, flags: u8, length: u32) -> Result<Self, H2ErrorKind> {
        let pad_length = if flags & FLAG_PADDED != 0 {
            Some(r.u8().ok_or(H2ErrorKind::BadPadding)?)
        } else {
            None
        };
        let overhead = pad_length.map_or(0, |p| u32::from(p) + 1);
        // Padding that exceeds the payload is a PROTOCOL_ERROR (section 6.1).
        let data_length = length
            .checked_sub(overhead)
            .ok_or(H2ErrorKind::BadPadding)?;
        Ok(Self {
            pad_length,
            data_length,
            end_stream: flags & FLAG_END_STREAM != 0,
        })
    }
}
