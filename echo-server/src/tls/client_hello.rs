//! The ClientHello message (RFC 8446 section 4.1.2; RFC 5246 section 7.4.1.2 for the optional
//! extension block) parsed into a borrowing, typed model.

use serde::Serialize;

use super::enums::{CipherSuite, CompressionMethod, ExtensionType, ProtocolVersion};
use super::error::TlsError;
use super::extension::{Extension, ExtensionBody};
use super::list::{Raw, U16List, U8List};
use super::record::handshake_message;
use crate::codec::Reader;

/// A parsed ClientHello. Borrows from the input when the hello sat in one record (or was given
/// as a bare handshake message); owns its bytes when it had to be reassembled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClientHello<'a> {
    /// Length of the handshake message body (without the 4-byte handshake header).
    pub message_len: usize,
    /// `legacy_version` (0x0303 for TLS 1.2 and 1.3 hellos).
    pub legacy_version: ProtocolVersion,
    /// The 32 random bytes.
    pub random: Raw<'a>,
    /// `legacy_session_id` (0 to 32 bytes; more is kept as seen).
    pub session_id: Raw<'a>,
    /// Cipher suites, wire order, GREASE and SCSVs kept.
    pub cipher_suites: U16List<'a, CipherSuite>,
    /// Legacy compression methods, wire order.
    pub compression_methods: U8List<'a, CompressionMethod>,
    /// Extensions in wire order, duplicates kept; `None` when the hello has no extension block at
    /// all (SSLv3-era hellos), `Some(vec![])` for an empty block.
    pub extensions: Option<Vec<Extension<'a>>>,
}

/// Room for this many extensions up front: browsers send 15–20. The vector stays within 1 KiB,
/// which glibc serves from its per-thread cache (up to 1,032 bytes; a larger block takes the slower
/// path on every hello).
const EXTENSIONS_CAPACITY: usize = 1024 / std::mem::size_of::<Extension<'static>>();

/// Parses a ClientHello from TLS records (first byte 0x16, one or several records, reassembled)
/// or from a bare handshake message (first byte 0x01).
///
/// Strict about lengths: every length-prefixed field must hold exactly its items, the message
/// must end right after the extension block, and the input must end right after the hello (see
/// [`scan`](super::scan) for cutting socket bytes). A known extension with a malformed body is
/// kept as [`ExtensionBody::Malformed`] rather than failing the hello.
pub fn parse_client_hello(input: &[u8]) -> Result<ClientHello<'_>, TlsError> {
    match handshake_message(input)? {
        std::borrow::Cow::Borrowed(message) => parse_message(message),
        std::borrow::Cow::Owned(message) => parse_message(&message).map(ClientHello::into_owned),
    }
}

/// Parses a complete handshake message (header included, type already checked).
fn parse_message(message: &[u8]) -> Result<ClientHello<'_>, TlsError> {
    let mut r = Reader::new(message);
    let (Some(_), Some(len)) = (r.u8(), r.u24()) else {
        return Err(TlsError::Truncated {
            field: "handshake header",
        });
    };
    let message_len = usize::try_from(len).unwrap_or(usize::MAX);
    let truncated = |field| TlsError::Truncated { field };
    let mut body = r.sub(message_len).ok_or(truncated("handshake message"))?;
    if !r.is_empty() {
        return Err(TlsError::TrailingData {
            field: "handshake message",
            len: r.remaining(),
        });
    }
    let legacy_version = ProtocolVersion(body.u16().ok_or(truncated("legacy_version"))?);
    let random = Raw::borrowed(body.take(32).ok_or(truncated("random"))?);
    let session_id = Raw::borrowed(body.sub_u8().ok_or(truncated("session_id"))?.rest());
    let cipher_suites = U16List::read(
        body.sub_u16().ok_or(truncated("cipher_suites"))?,
        "cipher_suites",
    )?;
    let compression_methods = U8List::read(body.sub_u8().ok_or(truncated("compression_methods"))?);
    let extensions = if body.is_empty() {
        None
    } else {
        let mut block = body.sub_u16().ok_or(truncated("extensions"))?;
        if !body.is_empty() {
            return Err(TlsError::TrailingData {
                field: "extensions",
                len: body.remaining(),
            });
        }
        let mut extensions = Vec::with_capacity(EXTENSIONS_CAPACITY);
        while !block.is_empty() {
            let kind = block.u16().ok_or(truncated("extension type"))?;
            let mut data = block.sub_u16().ok_or(truncated("extension data"))?;
            extensions.push(Extension::decode(kind, data.rest()));
        }
        Some(extensions)
    };
    Ok(ClientHello {
        message_len,
        legacy_version,
        random,
        session_id,
        cipher_suites,
        compression_methods,
        extensions,
    })
}

impl<'a> ClientHello<'a> {
    /// The extensions in wire order (empty when there was no extension block).
    pub fn extensions(&self) -> &[Extension<'a>] {
        self.extensions.as_deref().unwrap_or_default()
    }

    /// The body of the first extension of type `kind`, if present.
    pub fn extension(&self, kind: ExtensionType) -> Option<&ExtensionBody<'a>> {
        self.extensions()
            .iter()
            .find(|e| e.kind == kind)
            .map(|e| &e.body)
    }

    /// The first host_name of the server_name extension, if it is valid UTF-8.
    pub fn server_name(&self) -> Option<&str> {
        let Some(ExtensionBody::ServerName(names)) = self.extension(ExtensionType::SERVER_NAME)
        else {
            return None;
        };
        names
            .iter()
            .find(|(kind, _)| *kind == 0)
            .and_then(|(_, name)| std::str::from_utf8(name).ok())
    }

    /// ALPN protocol names offered, wire order, lossy UTF-8.
    pub fn alpn_protocols(&self) -> Vec<String> {
        match self.extension(ExtensionType::APPLICATION_LAYER_PROTOCOL_NEGOTIATION) {
            Some(ExtensionBody::Alpn(names)) => names
                .iter()
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether the hello tries to resume: a pre_shared_key extension, or a non-empty
    /// session_ticket.
    pub fn resumed(&self) -> bool {
        self.extensions().iter().any(|e| match &e.body {
            ExtensionBody::SessionTicket { len } => *len > 0,
            _ => e.kind == ExtensionType::PRE_SHARED_KEY,
        })
    }

    /// Converts into an owning hello.
    pub fn into_owned(self) -> ClientHello<'static> {
        ClientHello {
            message_len: self.message_len,
            legacy_version: self.legacy_version,
            random: self.random.into_owned(),
            session_id: self.session_id.into_owned(),
            cipher_suites: self.cipher_suites.into_owned(),
            compression_methods: self.compression_methods.into_owned(),
            extensions: self
                .extensions
                .map(|v| v.into_iter().map(Extension::into_owned).collect()),
        }
    }
}
