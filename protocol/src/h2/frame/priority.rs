//! PRIORITY (RFC 9113 section 6.3; RFC 7540 section 5.3 for the meaning) and the same priority
//! fields carried by HEADERS.

use serde::Serialize;

use crate::codec::Reader;
use crate::h2::error::H2ErrorKind;

/// Exclusive bit, stream dependency and weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct PriorityFields {
    /// The E bit.
    pub exclusive: bool,
    /// The stream this one depends on (31 bits).
    pub dependency: u32,
    /// The weight byte as sent (0..=255).
    pub weight_byte: u8,
    /// The real weight, `weight_byte + 1` (1..=256; RFC 7540 section 5.3.2: "Add one to the
    /// value to obtain a weight between 1 and 256").
    pub weight: u16,
}

impl PriorityFields {
    pub(crate) fn read(r: &mut Reader<'_>) -> Option<Self> {
        let dep = r.u32()?;
        let weight_byte = r.u8()?;
        Some(Self {
            exclusive: dep & 0x8000_0000 != 0,
            dependency: dep & 0x7fff_ffff,
            weight_byte,
            weight: u16::from(weight_byte) + 1,
        })
    }
}

/// A PRIORITY frame (the stream it prioritises is the frame's stream id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Priority {
    /// The priority fields.
    #[serde(flatten)]
    pub fields: PriorityFields,
}

impl Priority {
    pub(crate) fn read(r: &mut Reader<'_>, length: u32) -> Result<Self, H2ErrorKind> {
        // A length other than 5 is a FRAME_SIZE_ERROR (section 6.3).
        if length != 5 {
            return Err(H2ErrorKind::BadLength { frame: "PRIORITY" });
        }
        let fields = PriorityFields::read(r).ok_or(H2ErrorKind::BadLength { frame: "PRIORITY" })?;
        Ok(Self { fields })
    }
}
