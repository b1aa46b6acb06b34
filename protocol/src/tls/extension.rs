//! ClientHello extensions: one typed body per known extension, raw bytes for the rest.
//!
//! **Malformed known extensions are kept, not fatal.** If a known extension's body does not
//! parse (a list length past its end, leftover bytes after the list, an odd length for a list of
//! two-byte values, …), the extension stays in the list as [`ExtensionBody::Malformed`] with the
//! typed error and its raw bytes. The extension *block* itself must be well-formed: a bad
//! extension header or length is a hard [`TlsError`](super::TlsError) from the ClientHello
//! parser, so the extension list is never silently truncated. Fingerprints treat a malformed
//! extension as present with no decoded content (its type is counted; its list fields, e.g. the
//! JA3 curves, are empty).

use std::fmt;

use serde::ser::SerializeStruct;
use serde::Serialize;

use super::enums::{
    CertificateCompressionAlgorithm, EcPointFormat, ExtensionType, NamedGroup, PskKeyExchangeMode,
    SignatureScheme,
};
use super::error::TlsError;
use super::grease::is_grease;
use super::list::{KeyShares, ProtocolNames, QuicParameters, Raw, ServerNames, U16List, U8List};
use crate::codec::Reader;

/// One extension, as it appeared on the wire: its type and a view of its bytes in the hello.
/// The body is decoded on demand ([`Self::body`]): the fingerprints read only some bodies, and a
/// parse that built every typed body up front spent more time moving them into the list than
/// decoding them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Extension<'a> {
    /// The extension type.
    pub kind: ExtensionType,
    data: &'a [u8],
}

/// The encrypted_client_hello (0xfe0d) body of a ClientHello (draft-ietf-tls-esni section 5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EchBody {
    /// The outer ClientHello's extension: HPKE suite, config id and lengths (the contents are
    /// ciphertext or, for GREASE ECH, random).
    Outer {
        /// HPKE KDF id.
        kdf_id: u16,
        /// HPKE AEAD id.
        aead_id: u16,
        /// ECHConfig id.
        config_id: u8,
        /// Length of the HPKE encapsulated key.
        enc_len: usize,
        /// Length of the encrypted payload.
        payload_len: usize,
    },
    /// The inner marker (type 1, empty).
    Inner,
}

/// The decoded body of an [`Extension`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExtensionBody<'a> {
    /// server_name (0): the server name list.
    ServerName(ServerNames<'a>),
    /// status_request (5), OCSP form (status_type 1): lengths of the responder id list and the
    /// request extensions; other status types keep their bytes.
    StatusRequest {
        /// CertificateStatusType.
        status_type: u8,
        /// Length of `responder_id_list` (OCSP only).
        responder_ids_len: usize,
        /// Length of `request_extensions` (OCSP only).
        request_extensions_len: usize,
    },
    /// supported_groups (10).
    SupportedGroups(U16List<'a, NamedGroup>),
    /// ec_point_formats (11).
    EcPointFormats(U8List<'a, EcPointFormat>),
    /// signature_algorithms (13).
    SignatureAlgorithms(U16List<'a, SignatureScheme>),
    /// application_layer_protocol_negotiation (16).
    Alpn(ProtocolNames<'a>),
    /// signed_certificate_timestamp (18), empty in a ClientHello.
    SignedCertificateTimestamp,
    /// padding (21): its length (not a stack trait: it depends on the hello size).
    Padding {
        /// Padding length in bytes.
        len: usize,
        /// Whether every byte is zero, as RFC 7685 section 3 requires.
        all_zero: bool,
    },
    /// extended_master_secret (23), empty.
    ExtendedMasterSecret,
    /// compress_certificate (27): algorithms.
    CompressCertificate(U16List<'a, CertificateCompressionAlgorithm>),
    /// record_size_limit (28).
    RecordSizeLimit(u16),
    /// delegated_credential (34): signature schemes.
    DelegatedCredentials(U16List<'a, SignatureScheme>),
    /// session_ticket (35): ticket length only (0 = asking for a new one).
    SessionTicket {
        /// Ticket length in bytes.
        len: usize,
    },
    /// pre_shared_key (41): counts only.
    PreSharedKey {
        /// Number of PSK identities offered.
        identities: usize,
        /// Number of binders.
        binders: usize,
    },
    /// early_data (42), empty in a ClientHello.
    EarlyData,
    /// supported_versions (43).
    SupportedVersions(U16List<'a, super::enums::ProtocolVersion>),
    /// cookie (44): length only.
    Cookie {
        /// Cookie length in bytes.
        len: usize,
    },
    /// psk_key_exchange_modes (45).
    PskKeyExchangeModes(U8List<'a, PskKeyExchangeMode>),
    /// post_handshake_auth (49), empty.
    PostHandshakeAuth,
    /// signature_algorithms_cert (50).
    SignatureAlgorithmsCert(U16List<'a, SignatureScheme>),
    /// key_share (51): groups and key lengths.
    KeyShare(KeyShares<'a>),
    /// quic_transport_parameters (57): parameter ids.
    QuicTransportParameters(QuicParameters<'a>),
    /// application_settings (ALPS, 0x4469 old / 0x44cd new code point): protocols.
    ApplicationSettings(ProtocolNames<'a>),
    /// encrypted_client_hello (0xfe0d).
    EncryptedClientHello(EchBody),
    /// renegotiation_info (0xff01): length of `renegotiated_connection` (0 on a first handshake).
    RenegotiationInfo {
        /// Length of `renegotiated_connection`.
        len: usize,
    },
    /// A GREASE extension (RFC 8701): its bytes.
    Grease(Raw<'a>),
    /// Any other extension: its bytes.
    Unknown(Raw<'a>),
    /// A known extension whose body did not parse: the error and the bytes.
    Malformed {
        /// Why it did not parse (boxed: rare, and it would double the size of every body).
        #[serde(serialize_with = "display")]
        error: Box<TlsError>,
        /// The extension data.
        data: Raw<'a>,
    },
}

/// Serializes a value through its `Display`.
fn display<S: serde::Serializer>(value: &TlsError, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

/// Fails with `TrailingData` unless `r` is used up.
fn finish(r: &Reader<'_>, field: &'static str) -> Result<(), TlsError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(TlsError::TrailingData {
            field,
            len: r.remaining(),
        })
    }
}

/// Opens the u8- or u16-length-prefixed list that must fill the whole extension body.
fn whole_u16<'a>(r: &mut Reader<'a>, field: &'static str) -> Result<Reader<'a>, TlsError> {
    let list = r.sub_u16().ok_or(TlsError::Truncated { field })?;
    finish(r, field)?;
    Ok(list)
}

fn whole_u8<'a>(r: &mut Reader<'a>, field: &'static str) -> Result<Reader<'a>, TlsError> {
    let list = r.sub_u8().ok_or(TlsError::Truncated { field })?;
    finish(r, field)?;
    Ok(list)
}

/// A u16-length list of two-byte values filling the body.
fn long_list<'a, T: From<u16> + 'a>(
    mut r: Reader<'a>,
    field: &'static str,
) -> Result<U16List<'a, T>, TlsError> {
    U16List::read(whole_u16(&mut r, field)?, field)
}

/// A u8-length list of two-byte values filling the body.
fn short_list<'a, T: From<u16> + 'a>(
    mut r: Reader<'a>,
    field: &'static str,
) -> Result<U16List<'a, T>, TlsError> {
    U16List::read(whole_u8(&mut r, field)?, field)
}

/// A u8-length list of one-byte values filling the body.
fn byte_list<'a, T: From<u8> + 'a>(
    mut r: Reader<'a>,
    field: &'static str,
) -> Result<U8List<'a, T>, TlsError> {
    U8List::read(whole_u8(&mut r, field)?, field)
}

/// A u16-length `ProtocolName` list filling the body.
fn names<'a>(mut r: Reader<'a>, field: &'static str) -> Result<ProtocolNames<'a>, TlsError> {
    ProtocolNames::read(whole_u16(&mut r, field)?)
}

/// Fails unless the body is empty.
fn empty<'a>(
    r: &Reader<'a>,
    field: &'static str,
    body: ExtensionBody<'a>,
) -> Result<ExtensionBody<'a>, TlsError> {
    finish(r, field).map(|()| body)
}

impl<'a> Extension<'a> {
    /// The decoded body, `Err` for a malformed known body (the voice lists those by type).
    pub(crate) fn decode(&self) -> Result<ExtensionBody<'a>, TlsError> {
        decode_body(self.kind.0, Reader::new(self.data))
    }

    /// The body of an extension made of a u16-length list of two-byte values
    /// (supported_groups, signature_algorithms, signature_algorithms_cert,
    /// delegated_credential), `None` when malformed. The fingerprints read lists through these
    /// readers, the same ones [`Self::body`] uses.
    pub(crate) fn long_list<T: From<u16> + 'a>(&self) -> Option<U16List<'a, T>> {
        long_list(Reader::new(self.data), "").ok()
    }

    /// The body of a u8-length list of two-byte values (supported_versions,
    /// compress_certificate), `None` when malformed.
    pub(crate) fn short_list<T: From<u16> + 'a>(&self) -> Option<U16List<'a, T>> {
        short_list(Reader::new(self.data), "").ok()
    }

    /// The body of a u8-length list of one-byte values (ec_point_formats,
    /// psk_key_exchange_modes), `None` when malformed.
    pub(crate) fn byte_list<T: From<u8> + 'a>(&self) -> Option<U8List<'a, T>> {
        byte_list(Reader::new(self.data), "").ok()
    }

    /// The body of a `ProtocolName` list (ALPN, ALPS), `None` when malformed.
    pub(crate) fn names(&self) -> Option<ProtocolNames<'a>> {
        names(Reader::new(self.data), "").ok()
    }

    pub(crate) fn new(kind: u16, data: &'a [u8]) -> Self {
        Self {
            kind: ExtensionType(kind),
            data,
        }
    }

    /// Length of the extension data in bytes.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the extension data is empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The extension data.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// The decoded body; a malformed known body is [`ExtensionBody::Malformed`].
    pub fn body(&self) -> ExtensionBody<'a> {
        match self.decode() {
            Ok(body) => body,
            Err(error) => ExtensionBody::Malformed {
                error: Box::new(error),
                data: Raw::borrowed(self.data),
            },
        }
    }
}

/// Type, length and decoded body.
impl fmt::Debug for Extension<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extension")
            .field("kind", &self.kind)
            .field("len", &self.len())
            .field("body", &self.body())
            .finish()
    }
}

/// `{"type", "len", "body"}`, the body decoded.
impl Serialize for Extension<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Extension", 3)?;
        s.serialize_field("type", &self.kind)?;
        s.serialize_field("len", &self.len())?;
        s.serialize_field("body", &self.body())?;
        s.end()
    }
}

/// Decodes a known extension body; `Err` for a malformed one.
fn decode_body(kind: u16, mut r: Reader<'_>) -> Result<ExtensionBody<'_>, TlsError> {
    use ExtensionBody as B;
    Ok(match ExtensionType(kind) {
        ExtensionType::SERVER_NAME => {
            B::ServerName(ServerNames::read(whole_u16(&mut r, "server_name")?)?)
        }
        ExtensionType::STATUS_REQUEST => {
            let status_type = r.u8().ok_or(TlsError::Truncated {
                field: "status_request",
            })?;
            if status_type == 1 {
                let ids = r.sub_u16().ok_or(TlsError::Truncated {
                    field: "responder_id_list",
                })?;
                let exts = r.sub_u16().ok_or(TlsError::Truncated {
                    field: "request_extensions",
                })?;
                finish(&r, "status_request")?;
                B::StatusRequest {
                    status_type,
                    responder_ids_len: ids.remaining(),
                    request_extensions_len: exts.remaining(),
                }
            } else {
                B::StatusRequest {
                    status_type,
                    responder_ids_len: 0,
                    request_extensions_len: r.rest().len(),
                }
            }
        }
        ExtensionType::SUPPORTED_GROUPS => B::SupportedGroups(long_list(r, "supported_groups")?),
        ExtensionType::EC_POINT_FORMATS => B::EcPointFormats(byte_list(r, "ec_point_formats")?),
        ExtensionType::SIGNATURE_ALGORITHMS => {
            B::SignatureAlgorithms(long_list(r, "signature_algorithms")?)
        }
        ExtensionType::APPLICATION_LAYER_PROTOCOL_NEGOTIATION => B::Alpn(names(r, "alpn")?),
        ExtensionType::SIGNED_CERTIFICATE_TIMESTAMP => empty(
            &r,
            "signed_certificate_timestamp",
            B::SignedCertificateTimestamp,
        )?,
        ExtensionType::PADDING => {
            let bytes = r.rest();
            B::Padding {
                len: bytes.len(),
                // OR-ing every byte (no early exit) vectorizes; `all` went byte by byte.
                all_zero: bytes.iter().fold(0, |acc, b| acc | b) == 0,
            }
        }
        ExtensionType::EXTENDED_MASTER_SECRET => {
            empty(&r, "extended_master_secret", B::ExtendedMasterSecret)?
        }
        ExtensionType::COMPRESS_CERTIFICATE => {
            B::CompressCertificate(short_list(r, "compress_certificate")?)
        }
        ExtensionType::RECORD_SIZE_LIMIT => {
            let limit = r.u16().ok_or(TlsError::Truncated {
                field: "record_size_limit",
            })?;
            finish(&r, "record_size_limit")?;
            B::RecordSizeLimit(limit)
        }
        ExtensionType::DELEGATED_CREDENTIAL => {
            B::DelegatedCredentials(long_list(r, "delegated_credential")?)
        }
        ExtensionType::SESSION_TICKET => B::SessionTicket {
            len: r.rest().len(),
        },
        ExtensionType::PRE_SHARED_KEY => {
            let mut ids = r.sub_u16().ok_or(TlsError::Truncated {
                field: "psk identities",
            })?;
            let mut binders = r.sub_u16().ok_or(TlsError::Truncated {
                field: "psk binders",
            })?;
            finish(&r, "pre_shared_key")?;
            let mut identities = 0;
            while !ids.is_empty() {
                ids.sub_u16()
                    .and_then(|_| ids.u32())
                    .ok_or(TlsError::Truncated {
                        field: "psk identity",
                    })?;
                identities += 1;
            }
            let mut binder_count = 0;
            while !binders.is_empty() {
                binders.sub_u8().ok_or(TlsError::Truncated {
                    field: "psk binder",
                })?;
                binder_count += 1;
            }
            B::PreSharedKey {
                identities,
                binders: binder_count,
            }
        }
        ExtensionType::EARLY_DATA => empty(&r, "early_data", B::EarlyData)?,
        ExtensionType::SUPPORTED_VERSIONS => {
            B::SupportedVersions(short_list(r, "supported_versions")?)
        }
        ExtensionType::COOKIE => B::Cookie {
            len: whole_u16(&mut r, "cookie")?.remaining(),
        },
        ExtensionType::PSK_KEY_EXCHANGE_MODES => {
            B::PskKeyExchangeModes(byte_list(r, "psk_key_exchange_modes")?)
        }
        ExtensionType::POST_HANDSHAKE_AUTH => {
            empty(&r, "post_handshake_auth", B::PostHandshakeAuth)?
        }
        ExtensionType::SIGNATURE_ALGORITHMS_CERT => {
            B::SignatureAlgorithmsCert(long_list(r, "signature_algorithms_cert")?)
        }
        ExtensionType::KEY_SHARE => B::KeyShare(KeyShares::read(whole_u16(&mut r, "key_share")?)?),
        ExtensionType::QUIC_TRANSPORT_PARAMETERS => {
            B::QuicTransportParameters(QuicParameters::read(r)?)
        }
        ExtensionType::APPLICATION_SETTINGS | ExtensionType::APPLICATION_SETTINGS_NEW => {
            B::ApplicationSettings(names(r, "application_settings")?)
        }
        ExtensionType::ENCRYPTED_CLIENT_HELLO => B::EncryptedClientHello(ech(r)?),
        ExtensionType::RENEGOTIATION_INFO => B::RenegotiationInfo {
            len: whole_u8(&mut r, "renegotiation_info")?.remaining(),
        },
        _ if is_grease(kind) => B::Grease(Raw::borrowed(r.rest())),
        _ => B::Unknown(Raw::borrowed(r.rest())),
    })
}

/// Decodes an encrypted_client_hello body (ECHClientHello).
fn ech(mut r: Reader<'_>) -> Result<EchBody, TlsError> {
    let truncated = TlsError::Truncated {
        field: "encrypted_client_hello",
    };
    let body = match r.u8() {
        Some(0) => {
            let (Some(kdf_id), Some(aead_id), Some(config_id), Some(enc), Some(payload)) =
                (r.u16(), r.u16(), r.u8(), r.sub_u16(), r.sub_u16())
            else {
                return Err(truncated);
            };
            EchBody::Outer {
                kdf_id,
                aead_id,
                config_id,
                enc_len: enc.remaining(),
                payload_len: payload.remaining(),
            }
        }
        Some(1) => EchBody::Inner,
        Some(other) => {
            return Err(TlsError::BadValue {
                field: "encrypted_client_hello type",
                value: other.into(),
            })
        }
        None => return Err(truncated),
    };
    finish(&r, "encrypted_client_hello")?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn padding(data: &[u8]) -> ExtensionBody<'_> {
        decode_body(ExtensionType::PADDING.0, Reader::new(data)).unwrap()
    }

    /// RFC 7685 section 3: the padding is zero bytes; a non-zero byte anywhere is reported.
    #[test]
    fn padding_reports_whether_every_byte_is_zero() {
        let zeros = [0u8; 300];
        assert_eq!(
            padding(&zeros),
            ExtensionBody::Padding {
                len: 300,
                all_zero: true
            }
        );
        assert_eq!(
            padding(&[]),
            ExtensionBody::Padding {
                len: 0,
                all_zero: true
            }
        );
        for at in [0, 1, 15, 16, 17, 150, 299] {
            let mut data = zeros;
            data[at] = 0x80;
            assert_eq!(
                padding(&data),
                ExtensionBody::Padding {
                    len: 300,
                    all_zero: false
                },
                "non-zero byte at {at}"
            );
        }
    }
}
