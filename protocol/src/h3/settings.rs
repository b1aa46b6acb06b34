//! The SETTINGS frame's payload (RFC 9114 section 7.2.4): `identifier varint, value varint`
//! pairs, kept in wire order with GREASE and unknown identifiers, duplicates included.

use serde::Serialize;

use super::H3Error;
use crate::codec::Reader;

/// One setting as sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Setting {
    /// The identifier.
    pub id: u64,
    /// Its registered name, when we know it.
    pub name: Option<&'static str>,
    /// A reserved identifier of the form `0x1f * N + 0x21` (RFC 9114 section 7.2.4.1).
    pub grease: bool,
    /// The value.
    pub value: u64,
}

/// Names from the IANA "HTTP/3 Settings" registry that clients send.
fn name(id: u64) -> Option<&'static str> {
    Some(match id {
        0x01 => "SETTINGS_QPACK_MAX_TABLE_CAPACITY", // RFC 9204
        0x06 => "SETTINGS_MAX_FIELD_SECTION_SIZE",   // RFC 9114
        0x07 => "SETTINGS_QPACK_BLOCKED_STREAMS",    // RFC 9204
        0x08 => "SETTINGS_ENABLE_CONNECT_PROTOCOL",  // RFC 9220
        0x33 => "SETTINGS_H3_DATAGRAM",              // RFC 9297
        0xffd277 => "H3_DATAGRAM_DRAFT",             // draft-ietf-masque-h3-datagram
        _ => return None,
    })
}

/// Whether `id` is a reserved (GREASE) setting identifier (RFC 9114 section 7.2.4.1).
pub fn is_grease_setting(id: u64) -> bool {
    id >= 0x21 && (id - 0x21).is_multiple_of(0x1f)
}

/// Decodes a SETTINGS payload.
///
/// # Errors
/// [`H3Error::Truncated`] when an identifier or value runs past the end.
pub fn decode_settings(payload: &[u8]) -> Result<Vec<Setting>, H3Error> {
    let mut r = Reader::new(payload);
    let mut out = Vec::new();
    while !r.is_empty() {
        let id = r.varint().ok_or(H3Error::Truncated {
            field: "setting identifier",
        })?;
        let value = r.varint().ok_or(H3Error::Truncated {
            field: "setting value",
        })?;
        out.push(Setting {
            id,
            name: name(id),
            grease: is_grease_setting(id),
            value,
        });
    }
    Ok(out)
}

/// Chrome's SETTINGS payload as published captures of Chrome 152 show it
/// (docs/quic.md, "Reference values"): 1:65536, 6:262144, 7:100,
/// 51:1, then GREASE 0x1f*3+0x21 = 0x7e with value 5.
#[cfg(test)]
pub(crate) const CHROME_SETTINGS: [u8; 18] = [
    0x01, 0x80, 0x01, 0x00, 0x00, 0x06, 0x80, 0x04, 0x00, 0x00, 0x07, 0x40, 0x64, 0x33, 0x01, 0x40,
    0x7e, 0x05,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_order_and_grease_are_kept() {
        let payload = CHROME_SETTINGS;
        let settings = decode_settings(&payload).expect("settings");
        let ids: Vec<u64> = settings.iter().map(|s| s.id).collect();
        assert_eq!(ids, [1, 6, 7, 0x33, 0x7e]);
        assert_eq!(settings[1].value, 262_144);
        assert!(settings[4].grease && !settings[3].grease);
        assert!(decode_settings(&payload[..payload.len() - 1]).is_err());
    }
}
