//! The ClientHello message (RFC 8446 section 4.1.2; RFC 5246 section 7.4.1.2 for the optional
//! extension block) parsed into the places of its fields, read through typed views.

use std::borrow::Cow;
use std::fmt;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use super::enums::{CipherSuite, CompressionMethod, ExtensionType, ProtocolVersion};
use super::error::TlsError;
use super::extension::{Extension, ExtensionBody};
use super::list::{Raw, U16List, U8List};
use super::record::handshake_message;
use crate::codec::Reader;

/// A parsed ClientHello: the handshake message's bytes and where each field sits in them.
/// Borrows the input when the hello sat in one record (or was given as a bare handshake
/// message); owns the message when it had to be reassembled. The fields are views of those
/// bytes, made on demand, and extension bodies are decoded when read
/// ([`Extension::body`]), so parsing builds nothing but a list of places.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientHello<'a> {
    /// The handshake message, header included.
    message: Cow<'a, [u8]>,
    /// Where its fields sit.
    layout: Layout,
}

/// Where a field sits in the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
}

/// Where an extension sits in the message: its type, and its data as a span (an extension's
/// data is under 64 KiB, a message under 16 MiB: eight bytes in all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Place {
    kind: u16,
    len: u16,
    start: u32,
}

/// Where the 32 random bytes sit: after the 4-byte handshake header and legacy_version.
const RANDOM: Span = Span { start: 6, len: 32 };

/// Parses a ClientHello from TLS records (first byte 0x16, one or several records, reassembled)
/// or from a bare handshake message (first byte 0x01).
///
/// Strict about lengths: every length-prefixed field must hold exactly its items, the message
/// must end right after the extension block, and the input must end right after the hello (see
/// [`scan`](super::scan) for cutting socket bytes). A known extension with a malformed body is
/// kept, and reads as [`ExtensionBody::Malformed`], rather than failing the hello.
pub fn parse_client_hello(input: &[u8]) -> Result<ClientHello<'_>, TlsError> {
    let message = handshake_message(input)?;
    let layout = parse_message(&message)?;
    Ok(ClientHello { message, layout })
}

/// What [`parse_message`] finds: two plain fields and the places of the others.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Layout {
    /// Length of the handshake message body (without the 4-byte handshake header).
    message_len: usize,
    legacy_version: ProtocolVersion,
    session_id: Span,
    cipher_suites: Span,
    compression_methods: Span,
    /// `None` when the hello has no extension block at all (SSLv3-era hellos).
    extensions: Option<Vec<Place>>,
}

/// Parses a complete handshake message (header included, type already checked) into the places
/// of its fields.
fn parse_message(message: &[u8]) -> Result<Layout, TlsError> {
    // The body and every reader opened from it at its end run to the message's end, so a
    // reader's position in the message is the message length minus what it has left.
    let at = |r: &Reader<'_>| span_start(message.len() - r.remaining());
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
    body.take(32).ok_or(truncated("random"))?;
    // Each field's span ends where the body reader now stands.
    let span = |r: &Reader<'_>, len: usize| Span {
        start: at(r) - span_len(len),
        len: span_len(len),
    };
    let len = body.sub_u8().ok_or(truncated("session_id"))?.remaining();
    let session_id = span(&body, len);
    let len = body
        .sub_u16()
        .ok_or(truncated("cipher_suites"))?
        .remaining();
    if len % 2 != 0 {
        return Err(TlsError::BadListLength {
            field: "cipher_suites",
            len,
            item: 2,
        });
    }
    let cipher_suites = span(&body, len);
    let len = body
        .sub_u8()
        .ok_or(truncated("compression_methods"))?
        .remaining();
    let compression_methods = span(&body, len);
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
        // Each extension takes at least its 4-byte header.
        let mut extensions = Vec::with_capacity(block.remaining() / 4);
        while !block.is_empty() {
            let kind = block.u16().ok_or(truncated("extension type"))?;
            let len = block.u16().ok_or(truncated("extension data"))?;
            let start = at(&block);
            block
                .take(usize::from(len))
                .ok_or(truncated("extension data"))?;
            extensions.push(Place { kind, len, start });
        }
        Some(extensions)
    };
    Ok(Layout {
        message_len,
        legacy_version,
        session_id,
        cipher_suites,
        compression_methods,
        extensions,
    })
}

/// A position in a message (under 16 MiB: its length is a u24).
fn span_start(pos: usize) -> u32 {
    u32::try_from(pos).unwrap_or(u32::MAX)
}

/// A field length (a u8 or u16 length prefix).
fn span_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

impl<'a> ClientHello<'a> {
    /// The bytes of `span` (empty if it were ever outside the message).
    fn bytes(&self, span: Span) -> &[u8] {
        let start = span.start as usize;
        self.message
            .get(start..start + span.len as usize)
            .unwrap_or_default()
    }

    /// Length of the handshake message body (without the 4-byte handshake header).
    pub fn message_len(&self) -> usize {
        self.layout.message_len
    }

    /// `legacy_version` (0x0303 for TLS 1.2 and 1.3 hellos).
    pub fn legacy_version(&self) -> ProtocolVersion {
        self.layout.legacy_version
    }

    /// The 32 random bytes.
    pub fn random(&self) -> Raw<'_> {
        Raw::borrowed(self.bytes(RANDOM))
    }

    /// `legacy_session_id` (0 to 32 bytes; more is kept as seen).
    pub fn session_id(&self) -> Raw<'_> {
        Raw::borrowed(self.bytes(self.layout.session_id))
    }

    /// Cipher suites, wire order, GREASE and SCSVs kept.
    pub fn cipher_suites(&self) -> U16List<'_, CipherSuite> {
        U16List::wrap(self.bytes(self.layout.cipher_suites))
    }

    /// Legacy compression methods, wire order.
    pub fn compression_methods(&self) -> U8List<'_, CompressionMethod> {
        U8List::wrap(self.bytes(self.layout.compression_methods))
    }

    /// Whether the hello has an extension block at all (SSLv3-era hellos have none; an empty
    /// block counts).
    pub fn has_extension_block(&self) -> bool {
        self.layout.extensions.is_some()
    }

    /// The extensions in wire order, duplicates kept (none when there was no extension block).
    pub fn extensions(
        &self,
    ) -> impl ExactSizeIterator<Item = Extension<'_>> + DoubleEndedIterator + Clone + '_ {
        self.layout
            .extensions
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|place| self.view(place))
    }

    /// The extension at wire position `index`.
    pub fn extension_at(&self, index: usize) -> Option<Extension<'_>> {
        let place = self.layout.extensions.as_ref()?.get(index)?;
        Some(self.view(place))
    }

    fn view(&self, place: &Place) -> Extension<'_> {
        let span = Span {
            start: place.start,
            len: u32::from(place.len),
        };
        Extension::new(place.kind, self.bytes(span))
    }

    /// The decoded body of the first extension of type `kind`, if present.
    pub fn extension(&self, kind: ExtensionType) -> Option<ExtensionBody<'_>> {
        self.first_extension(kind).map(|e| e.body())
    }

    /// The first extension of type `kind` (the one that counts, malformed or not).
    pub(crate) fn first_extension(&self, kind: ExtensionType) -> Option<Extension<'_>> {
        self.extensions().find(|e| e.kind == kind)
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
        self.extensions().any(|e| match e.kind {
            ExtensionType::PRE_SHARED_KEY => true,
            ExtensionType::SESSION_TICKET => !e.is_empty(),
            _ => false,
        })
    }

    /// Converts into an owning hello.
    pub fn into_owned(self) -> ClientHello<'static> {
        ClientHello {
            message: Cow::Owned(self.message.into_owned()),
            layout: self.layout,
        }
    }
}

/// The fields by name, extensions with their decoded bodies.
impl fmt::Debug for ClientHello<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientHello")
            .field("message_len", &self.message_len())
            .field("legacy_version", &self.legacy_version())
            .field("random", &self.random())
            .field("session_id", &self.session_id())
            .field("cipher_suites", &self.cipher_suites())
            .field("compression_methods", &self.compression_methods())
            .field(
                "extensions",
                &self.has_extension_block().then_some(Listed(self)),
            )
            .finish()
    }
}

/// `message_len`, `legacy_version`, `random`, `session_id`, `cipher_suites`,
/// `compression_methods` and `extensions` (`null` without an extension block), each extension
/// with its decoded body.
impl Serialize for ClientHello<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("ClientHello", 7)?;
        s.serialize_field("message_len", &self.message_len())?;
        s.serialize_field("legacy_version", &self.legacy_version())?;
        s.serialize_field("random", &self.random())?;
        s.serialize_field("session_id", &self.session_id())?;
        s.serialize_field("cipher_suites", &self.cipher_suites())?;
        s.serialize_field("compression_methods", &self.compression_methods())?;
        s.serialize_field(
            "extensions",
            &self.has_extension_block().then_some(Listed(self)),
        )?;
        s.end()
    }
}

/// A hello's extensions, for `Debug` and `Serialize`.
struct Listed<'h, 'a>(&'h ClientHello<'a>);

impl fmt::Debug for Listed<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.extensions()).finish()
    }
}

impl Serialize for Listed<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.extensions())
    }
}
