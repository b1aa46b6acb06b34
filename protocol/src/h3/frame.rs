//! HTTP/3 frames (RFC 9114 section 7.1): `type varint, length varint, payload`; and the
//! unidirectional stream types (section 6.2).

use super::H3Error;
use crate::codec::Reader;

/// An HTTP/3 frame type, kept as its wire number (unknown and GREASE types included).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameType(pub u64);

impl FrameType {
    /// DATA (RFC 9114 section 7.2.1).
    pub const DATA: Self = Self(0x00);
    /// HEADERS (section 7.2.2).
    pub const HEADERS: Self = Self(0x01);
    /// SETTINGS (section 7.2.4).
    pub const SETTINGS: Self = Self(0x04);
    /// GOAWAY (section 7.2.6).
    pub const GOAWAY: Self = Self(0x07);
}

/// A unidirectional stream type (RFC 9114 section 6.2; RFC 9204 section 4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamType(pub u64);

impl StreamType {
    /// The control stream, which opens with SETTINGS (RFC 9114 section 6.2.1).
    pub const CONTROL: Self = Self(0x00);
    /// A push stream (section 6.2.2), server to client only.
    pub const PUSH: Self = Self(0x01);
    /// The QPACK encoder stream (RFC 9204 section 4.2).
    pub const QPACK_ENCODER: Self = Self(0x02);
    /// The QPACK decoder stream (RFC 9204 section 4.2).
    pub const QPACK_DECODER: Self = Self(0x03);
}

/// A frame's header and where its payload lies in the buffer it was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// The frame type.
    pub kind: FrameType,
    /// Offset of the payload in the buffer.
    pub payload_start: usize,
    /// Length of the payload.
    pub payload_len: usize,
}

impl FrameHeader {
    /// Offset just past the frame.
    pub fn end(&self) -> usize {
        self.payload_start + self.payload_len
    }
}

/// Reads the frame starting at the beginning of `buf`. `Ok(None)` when `buf` holds only part of
/// the frame (more bytes may come from the stream).
///
/// # Errors
/// [`H3Error::FrameTooLong`] when the frame's Length is over `cap`.
pub fn read_frame(buf: &[u8], cap: usize) -> Result<Option<FrameHeader>, H3Error> {
    let mut r = Reader::new(buf);
    let (Some(kind), Some(length)) = (r.varint(), r.varint()) else {
        return Ok(None);
    };
    let payload_len = usize::try_from(length)
        .ok()
        .filter(|&len| len <= cap)
        .ok_or(H3Error::FrameTooLong { length, cap })?;
    let payload_start = r.offset();
    if buf.len() - payload_start < payload_len {
        return Ok(None);
    }
    Ok(Some(FrameHeader {
        kind: FrameType(kind),
        payload_start,
        payload_len,
    }))
}

/// The QUIC variable-length integer (RFC 9000 section 16) that `buf` starts with, and its
/// length; `None` while `buf` holds only part of it.
pub fn get_varint(buf: &[u8]) -> Option<(u64, usize)> {
    let mut r = Reader::new(buf);
    let value = r.varint()?;
    Some((value, r.offset()))
}

/// Appends a QUIC variable-length integer (RFC 9000 section 16), in its shortest form.
pub fn put_varint(out: &mut Vec<u8>, v: u64) {
    if v < 1 << 6 {
        out.push(v as u8);
    } else if v < 1 << 14 {
        out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes());
    } else if v < 1 << 30 {
        out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes());
    } else {
        out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
    }
}

/// Appends one frame.
pub fn encode_frame(out: &mut Vec<u8>, kind: FrameType, payload: &[u8]) {
    put_varint(out, kind.0);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_partial_frames_wait() {
        let mut buf = Vec::new();
        encode_frame(&mut buf, FrameType::HEADERS, &[7; 300]);
        let header = read_frame(&buf, 1024).expect("ok").expect("whole");
        assert_eq!(header.kind, FrameType::HEADERS);
        assert_eq!((header.payload_start, header.payload_len), (3, 300));
        assert_eq!(read_frame(&buf[..100], 1024), Ok(None));
        assert_eq!(read_frame(&buf[..1], 1024), Ok(None));
        assert!(matches!(
            read_frame(&buf, 10),
            Err(H3Error::FrameTooLong { length: 300, .. })
        ));
    }

    #[test]
    fn varints_take_their_shortest_form() {
        // RFC 9000 Appendix A.1 examples.
        for (v, wire) in [
            (37_u64, &[0x25_u8][..]),
            (15_293, &[0x7b, 0xbd]),
            (494_878_333, &[0x9d, 0x7f, 0x3e, 0x7d]),
            (
                151_288_809_941_952_652,
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
            ),
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out, wire);
            assert_eq!(Reader::new(wire).varint(), Some(v));
        }
    }
}
