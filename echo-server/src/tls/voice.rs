//! The TLS voice: a hash of the ClientHello with everything that changes between connections of
//! the same stack normalized away, and the order id, a hash of the raw extension order.
//!
//! docs/voice-tls.md gives the treatment of every field and the reasons. In short, the canonical
//! description is a binary encoding (no text formatting on the hot path) of tagged fields, each
//! `tag(u8) count(u16) items…`, fed to sha256; the id is `tlsv1_` + the first 12 digest bytes in
//! lowercase hex. Changing what goes in means bumping the `v1`.

use sha2::{Digest, Sha256};

use super::client_hello::ClientHello;
use super::enums::ExtensionType;
use super::extension::{EchBody, ExtensionBody};
use super::grease::is_grease;

/// Prefix of a TLS voice id; the `1` is the normalization version.
pub const VOICE_PREFIX: &str = "tlsv1_";
/// Prefix of an extension-order id.
pub const ORDER_PREFIX: &str = "tlso1_";

/// Domain separators, so a voice digest can never equal an order digest.
const VOICE_DOMAIN: &[u8] = b"exitvoice tls voice v1\0";
const ORDER_DOMAIN: &[u8] = b"exitvoice tls order v1\0";

/// Every GREASE value is written as this one placeholder (its position is kept).
const GREASE_PLACEHOLDER: u16 = 0x0a0a;

/// Extensions left out of the voice's extension set: they come and go with resumption or with
/// the hello's size, not with the stack.
const VOLATILE: [ExtensionType; 3] = [
    ExtensionType::PADDING,
    ExtensionType::PRE_SHARED_KEY,
    ExtensionType::EARLY_DATA,
];

/// Field tags of the canonical description (docs/voice-tls.md has the table).
mod tag {
    pub(super) const EXTENSION_BLOCK: u8 = 0x01;
    pub(super) const LEGACY_VERSION: u8 = 0x02;
    pub(super) const CIPHER_SUITES: u8 = 0x03;
    pub(super) const COMPRESSION: u8 = 0x04;
    pub(super) const EXTENSION_SET: u8 = 0x05;
    pub(super) const GREASE_EXTENSIONS: u8 = 0x06;
    pub(super) const MALFORMED: u8 = 0x07;
    pub(super) const CONTENT: u8 = 0x08;
}

/// Buffers small writes and feeds them to sha256 in blocks.
struct Feed {
    hasher: Sha256,
    buf: [u8; 256],
    len: usize,
}

impl Feed {
    fn new(domain: &[u8]) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(domain);
        Self {
            hasher,
            buf: [0; 256],
            len: 0,
        }
    }

    fn bytes(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        match self.buf.get_mut(self.len..end) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len = end;
            }
            None => {
                self.flush();
                self.hasher.update(bytes);
            }
        }
    }

    fn flush(&mut self) {
        self.hasher
            .update(self.buf.get(..self.len).unwrap_or_default());
        self.len = 0;
    }

    fn u8(&mut self, v: u8) {
        self.bytes(&[v]);
    }

    fn u16(&mut self, v: u16) {
        self.bytes(&v.to_be_bytes());
    }

    /// A count; lists longer than u16 can't occur inside a ClientHello, saturate anyway.
    fn count(&mut self, n: usize) {
        self.u16(u16::try_from(n).unwrap_or(u16::MAX));
    }

    /// `tag count items` for a list of two-byte values, GREASE folded to the placeholder.
    fn u16_list(&mut self, tag: u8, values: impl Iterator<Item = u16> + Clone) {
        self.u8(tag);
        self.count(values.clone().count());
        for v in values {
            self.u16(if is_grease(v) { GREASE_PLACEHOLDER } else { v });
        }
    }

    /// First 12 digest bytes as lowercase hex after `prefix`.
    fn finish(mut self, prefix: &str) -> String {
        self.flush();
        let digest = self.hasher.finalize();
        let mut out = String::with_capacity(prefix.len() + 24);
        out.push_str(prefix);
        out.push_str(&hex::encode(digest.get(..12).unwrap_or_default()));
        out
    }
}

/// Whether an extension type belongs in the voice's extension set.
fn in_set(kind: ExtensionType) -> bool {
    !is_grease(kind.0) && !VOLATILE.contains(&kind)
}

/// The content tag of an extension type: its code point, so the content of each extension is
/// bound to its type.
fn content(feed: &mut Feed, kind: ExtensionType) {
    feed.u8(tag::CONTENT);
    feed.u16(kind.0);
}

/// Writes `count` names, each `len(u8) bytes`.
fn names<'n>(feed: &mut Feed, list: impl Iterator<Item = &'n [u8]> + Clone) {
    feed.count(list.clone().count());
    for name in list {
        feed.u8(u8::try_from(name.len()).unwrap_or(u8::MAX));
        feed.bytes(name);
    }
}

/// The TLS voice id of `hello`. `scratch` is reused for sorting.
pub(crate) fn voice_id(hello: &ClientHello<'_>, scratch: &mut Vec<u16>) -> String {
    let mut feed = Feed::new(VOICE_DOMAIN);
    feed.u8(tag::EXTENSION_BLOCK);
    feed.u8(u8::from(hello.extensions.is_some()));
    feed.u8(tag::LEGACY_VERSION);
    feed.u16(hello.legacy_version.0);
    feed.u16_list(tag::CIPHER_SUITES, hello.cipher_suites.values());
    feed.u8(tag::COMPRESSION);
    feed.count(hello.compression_methods.len());
    for m in hello.compression_methods.values() {
        feed.u8(m);
    }

    let exts = hello.extensions();
    scratch.clear();
    scratch.extend(
        exts.iter()
            .map(|e| e.kind)
            .filter(|k| in_set(*k))
            .map(|k| k.0),
    );
    scratch.sort_unstable();
    feed.u16_list(tag::EXTENSION_SET, scratch.iter().copied());
    feed.u8(tag::GREASE_EXTENSIONS);
    feed.count(exts.iter().filter(|e| is_grease(e.kind.0)).count());
    scratch.clear();
    scratch.extend(
        exts.iter()
            .filter(|e| matches!(e.body, ExtensionBody::Malformed { .. }))
            .map(|e| e.kind.0),
    );
    scratch.sort_unstable();
    feed.u16_list(tag::MALFORMED, scratch.iter().copied());

    // Contents, in ascending type order so permutation can't move them; duplicates of one type
    // in wire order. `scratch` holds the distinct types that carry voiced content.
    scratch.clear();
    scratch.extend(exts.iter().map(|e| e.kind.0));
    scratch.sort_unstable();
    scratch.dedup();
    for kind in scratch.iter().copied().map(ExtensionType) {
        for ext in exts.iter().filter(|e| e.kind == kind) {
            voice_content(&mut feed, kind, &ext.body);
        }
    }
    feed.finish(VOICE_PREFIX)
}

/// Feeds the voiced content of one extension (nothing for presence-only ones).
fn voice_content(feed: &mut Feed, kind: ExtensionType, body: &ExtensionBody<'_>) {
    use ExtensionBody as B;
    match body {
        B::SupportedGroups(list) => {
            content(feed, kind);
            feed.u16_list(0, list.values());
        }
        B::EcPointFormats(list) => {
            content(feed, kind);
            feed.u16_list(0, list.values().map(u16::from));
        }
        B::SignatureAlgorithms(list)
        | B::SignatureAlgorithmsCert(list)
        | B::DelegatedCredentials(list) => {
            content(feed, kind);
            feed.u16_list(0, list.values());
        }
        B::SupportedVersions(list) => {
            content(feed, kind);
            feed.u16_list(0, list.values());
        }
        B::CompressCertificate(list) => {
            content(feed, kind);
            feed.u16_list(0, list.values());
        }
        B::PskKeyExchangeModes(list) => {
            content(feed, kind);
            feed.u16_list(0, list.values().map(u16::from));
        }
        B::KeyShare(shares) => {
            content(feed, kind);
            feed.u16_list(0, shares.iter().map(|(group, _)| group.0));
        }
        B::Alpn(list) | B::ApplicationSettings(list) => {
            content(feed, kind);
            names(feed, list.iter());
        }
        B::RecordSizeLimit(limit) => {
            content(feed, kind);
            feed.u16(*limit);
        }
        B::StatusRequest {
            status_type,
            responder_ids_len,
            request_extensions_len,
        } => {
            content(feed, kind);
            feed.u8(*status_type);
            feed.count(*responder_ids_len);
            feed.count(*request_extensions_len);
        }
        B::EncryptedClientHello(EchBody::Outer {
            kdf_id,
            aead_id,
            enc_len,
            ..
        }) => {
            content(feed, kind);
            feed.u8(0);
            feed.u16(*kdf_id);
            feed.u16(*aead_id);
            feed.count(*enc_len);
        }
        B::EncryptedClientHello(EchBody::Inner) => {
            content(feed, kind);
            feed.u8(1);
        }
        B::RenegotiationInfo { len } => {
            content(feed, kind);
            feed.count(*len);
        }
        // Presence-only (already in the extension set) or left out on purpose; see the doc.
        B::ServerName(_)
        | B::SignedCertificateTimestamp
        | B::Padding { .. }
        | B::ExtendedMasterSecret
        | B::SessionTicket { .. }
        | B::PreSharedKey { .. }
        | B::EarlyData
        | B::Cookie { .. }
        | B::PostHandshakeAuth
        | B::QuicTransportParameters(_)
        | B::Grease(_)
        | B::Unknown(_)
        | B::Malformed { .. } => {}
    }
}

/// The order id: the raw non-GREASE extension types in wire order (duplicates kept).
pub(crate) fn order_id(hello: &ClientHello<'_>) -> String {
    let mut feed = Feed::new(ORDER_DOMAIN);
    let types = hello
        .extensions()
        .iter()
        .map(|e| e.kind.0)
        .filter(|v| !is_grease(*v));
    feed.u16_list(0, types);
    feed.finish(ORDER_PREFIX)
}
