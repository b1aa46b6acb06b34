//! Typed errors for everything that can go wrong between raw bytes and a parsed ClientHello.
//!
//! Every failure on untrusted input is one of these variants; nothing in `tls/` panics on bytes.

use thiserror::Error;

/// Why bytes could not be read as a TLS ClientHello.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The input was empty.
    #[error("empty input")]
    Empty,
    /// The first bytes are neither a TLS record header nor a handshake message.
    #[error("not TLS: first byte {first:#04x}")]
    NotTls {
        /// The first byte seen.
        first: u8,
    },
    /// An SSLv2-format ClientHello (high bit of the first byte set, message type 1).
    #[error("SSLv2-format ClientHello (not fingerprintable)")]
    Sslv2Hello,
    /// A TLS record of another content type than handshake (22) where the ClientHello belongs.
    #[error("record of content type {content_type} where a handshake record (22) was expected")]
    NotHandshakeRecord {
        /// The record's content type byte.
        content_type: u8,
    },
    /// A record whose protocol version major byte is not 3 (RFC 8446 section 5.1).
    #[error("record version {version:#06x} is not TLS")]
    BadRecordVersion {
        /// The record-layer version field.
        version: u16,
    },
    /// A record longer than 2^14 + 256 bytes (RFC 8446 section 5.1 / 5.2).
    #[error("record length {len} exceeds 2^14 + 256")]
    RecordTooLong {
        /// The record length field.
        len: usize,
    },
    /// A zero-length handshake record, which RFC 8446 section 5.1 forbids.
    #[error("zero-length handshake record")]
    EmptyRecord,
    /// The handshake message is not a ClientHello (type 1).
    #[error("handshake message type {handshake_type} is not ClientHello (1)")]
    NotClientHello {
        /// The handshake type byte.
        handshake_type: u8,
    },
    /// The handshake message length exceeds the caller's cap.
    #[error("handshake message of {len} bytes exceeds the cap of {cap}")]
    HandshakeTooLong {
        /// The handshake length field.
        len: usize,
        /// The cap in force.
        cap: usize,
    },
    /// The bytes ended inside a field.
    #[error("truncated: input ends inside {field}")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// Bytes were left over after a length-prefixed field or after the message.
    #[error("{len} trailing bytes after {field}")]
    TrailingData {
        /// The field (or message) they followed.
        field: &'static str,
        /// How many bytes were left.
        len: usize,
    },
    /// A field holds a value its format does not allow (e.g. an unknown ECH type).
    #[error("{field} has the unsupported value {value}")]
    BadValue {
        /// The field.
        field: &'static str,
        /// The value seen.
        value: u32,
    },
    /// A list whose length cannot hold whole items (e.g. an odd cipher-suite list length).
    #[error("{field} length {len} is not a multiple of {item}")]
    BadListLength {
        /// The list being read.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The item size in bytes.
        item: usize,
    },
}
