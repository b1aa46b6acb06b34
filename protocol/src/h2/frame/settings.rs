//! SETTINGS (RFC 9113 section 6.5): every id/value pair in wire order, unknown and GREASE ids
//! and duplicates included.

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use super::FLAG_ACK;
use crate::codec::Reader;
use crate::h2::error::H2ErrorKind;

/// One setting as sent. Serialized as `{"id": n, "value": n, "name": "…"}`, like the TLS code
/// points: `name` is the registry name, `GREASE` for a reserved GREASE id, omitted when unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Setting {
    /// The identifier on the wire (RFC 9113 section 6.5.2; RFC 8441; RFC 9218; or unknown).
    pub id: u16,
    /// The value.
    pub value: u32,
}

impl Setting {
    /// SETTINGS_HEADER_TABLE_SIZE.
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH.
    pub const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_FRAME_SIZE.
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441 section 3).
    pub const ENABLE_CONNECT_PROTOCOL: u16 = 0x8;
    /// SETTINGS_NO_RFC7540_PRIORITIES (RFC 9218 section 2.1).
    pub const NO_RFC7540_PRIORITIES: u16 = 0x9;

    /// Whether the id is a reserved GREASE setting, `0x?a?a` (draft-bishop-httpbis-grease
    /// section 2.2).
    pub fn is_grease(&self) -> bool {
        self.id & 0x0f0f == 0x0a0a
    }

    /// The name of the id in the HTTP/2 settings registry (without the `SETTINGS_` prefix),
    /// `GREASE` for a GREASE id, `None` when unknown.
    pub fn name(&self) -> Option<&'static str> {
        match self.id {
            Self::HEADER_TABLE_SIZE => Some("HEADER_TABLE_SIZE"),
            Self::ENABLE_PUSH => Some("ENABLE_PUSH"),
            Self::MAX_CONCURRENT_STREAMS => Some("MAX_CONCURRENT_STREAMS"),
            Self::INITIAL_WINDOW_SIZE => Some("INITIAL_WINDOW_SIZE"),
            Self::MAX_FRAME_SIZE => Some("MAX_FRAME_SIZE"),
            Self::MAX_HEADER_LIST_SIZE => Some("MAX_HEADER_LIST_SIZE"),
            Self::ENABLE_CONNECT_PROTOCOL => Some("ENABLE_CONNECT_PROTOCOL"),
            Self::NO_RFC7540_PRIORITIES => Some("NO_RFC7540_PRIORITIES"),
            _ if self.is_grease() => Some("GREASE"),
            _ => None,
        }
    }
}

impl Serialize for Setting {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let name = self.name();
        let mut s = serializer.serialize_struct("Setting", if name.is_some() { 3 } else { 2 })?;
        s.serialize_field("id", &self.id)?;
        s.serialize_field("value", &self.value)?;
        if let Some(name) = name {
            s.serialize_field("name", name)?;
        }
        s.end()
    }
}

/// A SETTINGS frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Settings {
    /// ACK flag: acknowledges the server's SETTINGS and carries nothing.
    pub ack: bool,
    /// The settings, wire order.
    pub entries: Vec<Setting>,
}

impl Settings {
    pub(crate) fn read(r: &mut Reader<'_>, flags: u8, length: u32) -> Result<Self, H2ErrorKind> {
        let ack = flags & FLAG_ACK != 0;
        // "A SETTINGS frame with a length other than a multiple of 6 octets MUST be treated as a
        // connection error of type FRAME_SIZE_ERROR"; an ACK with a payload likewise
        // (section 6.5).
        if !length.is_multiple_of(6) || (ack && length != 0) {
            return Err(H2ErrorKind::BadLength { frame: "SETTINGS" });
        }
        let mut entries = Vec::with_capacity(length as usize / 6);
        while !r.is_empty() {
            let (Some(id), Some(value)) = (r.u16(), r.u32()) else {
                return Err(H2ErrorKind::BadLength { frame: "SETTINGS" });
            };
            entries.push(Setting { id, value });
        }
        Ok(Self { ack, entries })
    }
}

#[cfg(test)]
mod tests {
    use super::Setting;

    #[test]
    fn settings_serialize_with_their_registry_name() {
        let json = |id, value| serde_json::to_string(&Setting { id, value }).expect("json");
        assert_eq!(
            json(0x4, 6_291_456),
            r#"{"id":4,"value":6291456,"name":"INITIAL_WINDOW_SIZE"}"#
        );
        assert_eq!(
            json(0x9, 1),
            r#"{"id":9,"value":1,"name":"NO_RFC7540_PRIORITIES"}"#
        );
        assert_eq!(json(0x1a1a, 0), r#"{"id":6682,"value":0,"name":"GREASE"}"#);
        assert_eq!(json(0x77, 5), r#"{"id":119,"value":5}"#);
    }
}
