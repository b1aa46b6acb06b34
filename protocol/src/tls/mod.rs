//! TLS ClientHello parsing (records or a bare handshake message), GREASE, JA3/JA3N, the JA4
//! family, and the TLS voice.
//!
//! Everything here is a pure function over bytes; only `capture` touches sockets. The flow is
//! [`scan`] (socket bytes → where the hello's records end) → [`parse_client_hello`] (records →
//! [`ClientHello`]) → [`ClientHello::fingerprints`] / [`echo`].

mod client_hello;
mod enums;
mod error;
mod extension;
mod fingerprints;
mod grease;
mod ja3;
mod ja4;
mod list;
mod record;
mod voice;

pub use client_hello::{parse_client_hello, ClientHello};
pub use enums::{
    CertificateCompressionAlgorithm, CipherSuite, CompressionMethod, EcPointFormat, ExtensionType,
    NamedGroup, ProtocolVersion, PskKeyExchangeMode, SignatureScheme,
};
pub use error::TlsError;
pub use extension::{EchBody, Extension, ExtensionBody};
pub use fingerprints::{detail, echo, TlsFingerprints};
pub use grease::{is_grease, GREASE_VALUES};
pub use ja4::alpn_chars;
pub use list::{
    CodeList, CodePoint, KeyShares, ProtocolNames, QuicParameters, Raw, ServerNames, U16List,
    U8List,
};
pub use record::{scan, scan_capped, HelloScan, DEFAULT_MAX_HELLO_LEN, MAX_RECORD_LEN};
pub use voice::{ORDER_PREFIX, VOICE_PREFIX};
