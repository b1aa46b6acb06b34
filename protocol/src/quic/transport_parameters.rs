//! The `quic_transport_parameters` extension of a ClientHello (extension 0x39, RFC 9001
//! section 8.2; parameters RFC 9000 section 18), decoded in wire order with every id kept:
//! GREASE ids (RFC 9000 section 18.1), duplicates (an error for a QUIC stack, RFC 9000
//! section 7.4, but a trait for a fingerprinter) and ids we have no name for.

use serde::Serialize;

use super::QuicError;
use crate::codec::Reader;
use crate::tls::{ClientHello, ExtensionType};

/// One transport parameter as sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TransportParameter {
    /// The parameter id.
    pub id: u64,
    /// Its registered name, when we know it.
    pub name: Option<&'static str>,
    /// A reserved id of the form `31 * N + 27` (RFC 9000 section 18.1).
    pub grease: bool,
    /// The value.
    pub value: ParameterValue,
}

/// A transport parameter's value: an integer for integer parameters holding exactly one
/// variable-length integer, the bytes otherwise.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ParameterValue {
    /// An integer parameter.
    Integer(u64),
    /// Any other value, as lowercase hex.
    Bytes(String),
}

/// Names of the parameter ids in the IANA "QUIC Transport Parameters" registry that clients
/// send, with the one integer/bytes flag that decides how the value is shown.
fn known(id: u64) -> Option<(&'static str, bool)> {
    Some(match id {
        0x00 => ("original_destination_connection_id", false), // RFC 9000
        0x01 => ("max_idle_timeout", true),                    // RFC 9000
        0x02 => ("stateless_reset_token", false),              // RFC 9000
        0x03 => ("max_udp_payload_size", true),                // RFC 9000
        0x04 => ("initial_max_data", true),                    // RFC 9000
        0x05 => ("initial_max_stream_data_bidi_local", true),  // RFC 9000
        0x06 => ("initial_max_stream_data_bidi_remote", true), // RFC 9000
        0x07 => ("initial_max_stream_data_uni", true),         // RFC 9000
        0x08 => ("initial_max_streams_bidi", true),            // RFC 9000
        0x09 => ("initial_max_streams_uni", true),             // RFC 9000
        0x0a => ("ack_delay_exponent", true),                  // RFC 9000
        0x0b => ("max_ack_delay", true),                       // RFC 9000
        0x0c => ("disable_active_migration", false),           // RFC 9000
        0x0d => ("preferred_address", false),                  // RFC 9000
        0x0e => ("active_connection_id_limit", true),          // RFC 9000
        0x0f => ("initial_source_connection_id", false),       // RFC 9000
        0x10 => ("retry_source_connection_id", false),         // RFC 9000
        0x11 => ("version_information", false),                // RFC 9368
        0x20 => ("max_datagram_frame_size", true),             // RFC 9221
        0x2ab2 => ("grease_quic_bit", false),                  // RFC 9287
        0x3127 => ("google_initial_rtt", true),                // Google QUICHE
        0x3128 => ("google_connection_options", false),        // Google QUICHE
        0x4752 => ("google_version", false),                   // Google QUICHE
        0xff73db => ("version_information_draft", false), // draft-ietf-quic-version-negotiation
        _ => return None,
    })
}

/// Whether `id` is a reserved (GREASE) transport parameter id (RFC 9000 section 18.1).
pub fn is_grease_parameter(id: u64) -> bool {
    id >= 27 && (id - 27).is_multiple_of(31)
}

/// Decodes a `quic_transport_parameters` extension body.
///
/// # Errors
/// [`QuicError::Truncated`] when an id, length or value runs past the end.
pub fn decode(body: &[u8]) -> Result<Vec<TransportParameter>, QuicError> {
    let mut r = Reader::new(body);
    let mut out = Vec::new();
    while !r.is_empty() {
        let id = r.varint().ok_or(QuicError::Truncated {
            field: "transport parameter id",
        })?;
        let value = r
            .varint()
            .and_then(|len| usize::try_from(len).ok())
            .and_then(|len| r.take(len))
            .ok_or(QuicError::Truncated {
                field: "transport parameter value",
            })?;
        let name = known(id);
        let integer = name.is_some_and(|(_, integer)| integer).then(|| {
            let mut v = Reader::new(value);
            v.varint().filter(|_| v.is_empty())
        });
        out.push(TransportParameter {
            id,
            name: name.map(|(name, _)| name),
            grease: is_grease_parameter(id),
            value: match integer.flatten() {
                Some(n) => ParameterValue::Integer(n),
                None => ParameterValue::Bytes(hex::encode(value)),
            },
        });
    }
    Ok(out)
}

/// The transport parameters of `hello`, `None` when it carries no extension 0x39.
///
/// # Errors
/// As [`decode`].
pub fn of_client_hello(
    hello: &ClientHello<'_>,
) -> Option<Result<Vec<TransportParameter>, QuicError>> {
    hello
        .first_extension(ExtensionType::QUIC_TRANSPORT_PARAMETERS)
        .map(|extension| decode(extension.data()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grease_ids_are_31n_plus_27() {
        for id in [27, 58, 0x3a3a_3a3a_3a3a_3a3a_u64 % 31 * 31 + 27] {
            assert!(is_grease_parameter(id), "{id}");
        }
        for id in [0, 26, 28, 0x39, 0x2ab2] {
            assert!(!is_grease_parameter(id), "{id}");
        }
    }

    #[test]
    fn truncated_values_are_typed_errors() {
        assert_eq!(
            decode(&[0x01, 0x04, 0x80]),
            Err(QuicError::Truncated {
                field: "transport parameter value"
            })
        );
        assert_eq!(
            decode(&[0x40]),
            Err(QuicError::Truncated {
                field: "transport parameter id"
            })
        );
    }

    #[test]
    fn an_integer_parameter_with_extra_bytes_is_shown_as_bytes() {
        let params = decode(&[0x01, 0x03, 0x01, 0x02, 0x03]).expect("well formed");
        assert_eq!(params[0].value, ParameterValue::Bytes("010203".into()));
    }
}
