//! HTTP/2 frames as the client sent them (RFC 9113 section 4 and 6), one file per frame type.
//!
//! Every frame keeps its raw type byte, raw flags byte, stream id and length; the payload is
//! decoded for the types a fingerprint needs. Unknown types (including GREASE types of the form
//! `0x0b + 0x1f * N`, draft-bishop-httpbis-grease) are kept with their number.

mod continuation;
mod data;
mod goaway;
mod headers;
mod ping;
mod priority;
mod rst_stream;
mod settings;
mod window_update;

use serde::Serialize;

pub use continuation::Continuation;
pub use data::Data;
pub use goaway::GoAway;
pub use headers::Headers;
pub use ping::Ping;
pub use priority::{Priority, PriorityFields};
pub use rst_stream::RstStream;
pub use settings::{Setting, Settings};
pub use window_update::WindowUpdate;

use super::error::H2ErrorKind;
use crate::codec::Reader;

/// Size of the frame header (RFC 9113 section 4.1).
pub const FRAME_HEADER_LEN: usize = 9;

/// Largest frame payload accepted: the initial SETTINGS_MAX_FRAME_SIZE (RFC 9113 section 6.5.2).
/// A client MUST NOT send more until the server announced a larger value (section 4.2), and the
/// echo server does not. (The field itself can say up to 16 MiB - 1.)
pub const MAX_FRAME_LEN: u32 = 16_384;

/// An HTTP/2 frame type (RFC 9113 section 6; IANA "HTTP/2 Frame Type" registry). Any byte is a
/// valid value; unknown types are kept as numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct FrameType(pub u8);

impl FrameType {
    /// DATA (section 6.1).
    pub const DATA: Self = Self(0x0);
    /// HEADERS (section 6.2).
    pub const HEADERS: Self = Self(0x1);
    /// PRIORITY (section 6.3, deprecated but still sent).
    pub const PRIORITY: Self = Self(0x2);
    /// RST_STREAM (section 6.4).
    pub const RST_STREAM: Self = Self(0x3);
    /// SETTINGS (section 6.5).
    pub const SETTINGS: Self = Self(0x4);
    /// PUSH_PROMISE (section 6.6; a client never sends it legitimately).
    pub const PUSH_PROMISE: Self = Self(0x5);
    /// PING (section 6.7).
    pub const PING: Self = Self(0x6);
    /// GOAWAY (section 6.8).
    pub const GOAWAY: Self = Self(0x7);
    /// WINDOW_UPDATE (section 6.9).
    pub const WINDOW_UPDATE: Self = Self(0x8);
    /// CONTINUATION (section 6.10).
    pub const CONTINUATION: Self = Self(0x9);
    /// PRIORITY_UPDATE (RFC 9218 section 7.1).
    pub const PRIORITY_UPDATE: Self = Self(0x10);

    /// Whether this is a GREASE frame type, `0x0b + 0x1f * N` (draft-bishop-httpbis-grease
    /// section 2.1).
    pub fn is_grease(self) -> bool {
        self.0 >= 0x0b && (self.0 - 0x0b).is_multiple_of(0x1f)
    }
}

/// The 9-byte frame header (RFC 9113 section 4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FrameHeader {
    /// Payload length from the header (not what was captured; see [`Frame::truncated`]).
    pub length: u32,
    /// Frame type byte.
    #[serde(rename = "type")]
    pub kind: FrameType,
    /// Raw flags byte, unmasked.
    pub flags: u8,
    /// Stream identifier with the reserved bit cleared ("MUST be ignored when receiving",
    /// section 4.1).
    pub stream_id: u32,
}

impl FrameHeader {
    fn read(r: &mut Reader<'_>) -> Option<Self> {
        let length = r.u24()?;
        let kind = FrameType(r.u8()?);
        let flags = r.u8()?;
        let stream_id = r.u32()? & 0x7fff_ffff;
        Some(Self {
            length,
            kind,
            flags,
            stream_id,
        })
    }
}

/// The decoded payload of a frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "frame", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Payload {
    /// DATA.
    Data(Data),
    /// HEADERS.
    Headers(Headers),
    /// PRIORITY.
    Priority(Priority),
    /// RST_STREAM.
    RstStream(RstStream),
    /// SETTINGS.
    Settings(Settings),
    /// PING.
    Ping(Ping),
    /// GOAWAY.
    #[serde(rename = "goaway")]
    GoAway(GoAway),
    /// WINDOW_UPDATE.
    WindowUpdate(WindowUpdate),
    /// CONTINUATION.
    Continuation(Continuation),
    /// PUSH_PROMISE, unknown or GREASE types, and any frame whose payload was cut by the end of
    /// the capture: only the header is kept.
    Other,
}

/// One frame of the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Frame {
    /// The frame header.
    #[serde(flatten)]
    pub header: FrameHeader,
    /// The decoded payload.
    #[serde(flatten)]
    pub payload: Payload,
    /// The capture ended inside this frame's payload.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// One frame read from the wire: the record plus the header block fragment it carries, if any.
pub(crate) struct Read<'a> {
    pub(crate) frame: Frame,
    pub(crate) fragment: Option<&'a [u8]>,
}

/// What reading the next frame gave.
pub(crate) enum Next<'a> {
    /// A frame (possibly cut by the end of the capture).
    Frame(Read<'a>),
    /// The capture ended inside a frame header.
    CutHeader,
}

/// Read the next frame. `r` must not be empty.
pub(crate) fn read<'a>(r: &mut Reader<'a>) -> Result<Next<'a>, H2ErrorKind> {
    let Some(header) = FrameHeader::read(r) else {
        return Ok(Next::CutHeader);
    };
    if header.length > MAX_FRAME_LEN {
        return Err(H2ErrorKind::FrameTooLarge {
            length: header.length,
        });
    }
    let len = header.length as usize;
    let (body, truncated) = match r.take(len) {
        Some(b) => (b, false),
        None => (r.rest(), true),
    };
    let mut p = Reader::new(body);
    let flags = header.flags;
    let kind = header.kind;
    let mut fragment = None;
    let payload = if truncated && kind != FrameType::HEADERS && kind != FrameType::CONTINUATION {
        Payload::Other
    } else {
        match kind {
            FrameType::DATA => Payload::Data(Data::read(&mut p, flags, header.length)?),
            FrameType::HEADERS => match Headers::read(&mut p, flags, truncated) {
                Ok((h, frag)) => {
                    fragment = Some(frag);
                    Payload::Headers(h)
                }
                // The capture ended inside the padding or priority fields.
                Err(H2ErrorKind::Cut) => Payload::Other,
                Err(e) => return Err(e),
            },
            FrameType::PRIORITY => Payload::Priority(Priority::read(&mut p, header.length)?),
            FrameType::RST_STREAM => Payload::RstStream(RstStream::read(&mut p, header.length)?),
            FrameType::SETTINGS => Payload::Settings(Settings::read(&mut p, flags, header.length)?),
            FrameType::PING => Payload::Ping(Ping::read(&mut p, flags, header.length)?),
            FrameType::GOAWAY => Payload::GoAway(GoAway::read(&mut p, header.length)?),
            FrameType::WINDOW_UPDATE => {
                Payload::WindowUpdate(WindowUpdate::read(&mut p, header.length)?)
            }
            FrameType::CONTINUATION => {
                let c = Continuation::new(flags);
                fragment = Some(p.rest());
                Payload::Continuation(c)
            }
            _ => Payload::Other,
        }
    };
    Ok(Next::Frame(Read {
        frame: Frame {
            header,
            payload,
            truncated,
        },
        fragment,
    }))
}

/// END_STREAM flag (DATA, HEADERS).
pub(crate) const FLAG_END_STREAM: u8 = 0x1;
/// ACK flag (SETTINGS, PING).
pub(crate) const FLAG_ACK: u8 = 0x1;
/// END_HEADERS flag (HEADERS, CONTINUATION).
pub(crate) const FLAG_END_HEADERS: u8 = 0x4;
/// PADDED flag (DATA, HEADERS).
pub(crate) const FLAG_PADDED: u8 = 0x8;
/// PRIORITY flag (HEADERS).
pub(crate) const FLAG_PRIORITY: u8 = 0x20;
