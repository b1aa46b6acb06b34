//! PING (RFC 9113 section 6.7).

use serde::Serialize;

use super::FLAG_ACK;
use crate::codec::Reader;
use crate::h2::error::H2ErrorKind;

/// A PING frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Ping {
    /// ACK flag.
    pub ack: bool,
    /// The 8 opaque octets, as a big-endian number.
    pub opaque: u64,
}

impl Ping {
    pub(crate) fn read(r: &mut Reader<'_>, flags: u8, length: u32) -> Result<Self, H2ErrorKind> {
        // A length other than 8 is a FRAME_SIZE_ERROR (section 6.7).
        let bad = H2ErrorKind::BadLength { frame: "PING" };
        if length != 8 {
            return Err(bad);
        }
        let hi = r.u32().ok_or(bad)?;
        let lo = r.u32().ok_or(bad)?;
        Ok(Self {
            ack: flags & FLAG_ACK != 0,
            opaque: u64::from(hi) << 32 | u64::from(lo),
        })
    }
}
