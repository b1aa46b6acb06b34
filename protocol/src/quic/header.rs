//! The long header of an Initial packet, read before header protection is removed
//! (RFC 9000 sections 17.2 and 17.2.2).
//!
//! Only the fields that header protection leaves alone are read here: the packet number length
//! and the reserved bits are still masked, and the packet number's place is known only as an
//! offset.

use super::version::Version;
use super::QuicError;
use crate::codec::Reader;

/// Longest connection id in QUIC versions 1 and 2 (RFC 9000 section 17.2).
pub(crate) const MAX_CONNECTION_ID_LEN: usize = 20;

/// A long-header packet at the start of some bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LongHeader<'a> {
    /// The first byte, still protected.
    pub(crate) first: u8,
    /// The version field.
    pub(crate) version: Version,
    /// Destination Connection ID.
    pub(crate) dcid: &'a [u8],
    /// Source Connection ID.
    pub(crate) scid: &'a [u8],
    /// The token (Initial packets only).
    pub(crate) token: &'a [u8],
    /// Offset of the packet number field from the packet's first byte.
    pub(crate) pn_offset: usize,
    /// Length of the whole packet, header included: the Length field counts the packet number
    /// and the protected payload.
    pub(crate) packet_len: usize,
}

impl<'a> LongHeader<'a> {
    /// The long packet type bits (still meaning different types in v1 and v2).
    pub(crate) fn packet_type(&self) -> u8 {
        (self.first >> 4) & 0x03
    }

    /// Whether this is an Initial packet of a version we have keys for.
    pub(crate) fn is_initial(&self) -> bool {
        self.version.initial_type() == Some(self.packet_type())
    }

    /// Reads the long header at the start of `bytes`.
    ///
    /// Packets of versions without Initial keys end at the version field, as their layout is
    /// unknown ([`QuicError::UnsupportedVersion`]); so does a Retry, which has no Length field.
    ///
    /// # Errors
    /// A typed [`QuicError`] for every malformed or unsupported header.
    pub(crate) fn read(bytes: &'a [u8]) -> Result<Self, QuicError> {
        let mut r = Reader::new(bytes);
        let first = r.u8().ok_or(QuicError::Truncated {
            field: "first byte",
        })?;
        // Header Form and Fixed Bit both set (RFC 9000 section 17.2).
        if first & 0xc0 != 0xc0 {
            return Err(QuicError::NotLongHeader(first));
        }
        let version = Version(r.u32().ok_or(QuicError::Truncated { field: "version" })?);
        let Some(initial_type) = version.initial_type() else {
            return Err(QuicError::UnsupportedVersion(version.0));
        };
        let dcid = connection_id(&mut r, "destination connection id")?;
        let scid = connection_id(&mut r, "source connection id")?;
        let packet_type = (first >> 4) & 0x03;
        let token = if packet_type == initial_type {
            let len = r.varint().ok_or(QuicError::Truncated {
                field: "token length",
            })?;
            usize::try_from(len)
                .ok()
                .and_then(|len| r.take(len))
                .ok_or(QuicError::Truncated { field: "token" })?
        } else {
            // 0-RTT and Handshake have no token; a Retry has no Length field either, so it
            // cannot be stepped over.
            let retry = match version {
                Version::V2 => 0b00,
                _ => 0b11,
            };
            if packet_type == retry {
                return Err(QuicError::NotInitial(packet_type));
            }
            &[]
        };
        let length = r.varint().ok_or(QuicError::Truncated { field: "length" })?;
        let pn_offset = r.offset();
        let available = r.remaining();
        let packet_len = usize::try_from(length)
            .ok()
            .filter(|len| *len <= available)
            .ok_or(QuicError::LengthBeyondDatagram { length, available })?;
        Ok(Self {
            first,
            version,
            dcid,
            scid,
            token,
            pn_offset,
            packet_len: pn_offset + packet_len,
        })
    }
}

fn connection_id<'a>(r: &mut Reader<'a>, field: &'static str) -> Result<&'a [u8], QuicError> {
    let len = usize::from(r.u8().ok_or(QuicError::Truncated { field })?);
    if len > MAX_CONNECTION_ID_LEN {
        return Err(QuicError::ConnectionIdLength(len));
    }
    r.take(len).ok_or(QuicError::Truncated { field })
}
