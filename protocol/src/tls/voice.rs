//! The TLS voice: a hash of the ClientHello with everything that changes between connections of
//! the same stack normalized away, and the order id, a hash of the raw extension order.
//!
//! docs/voice-tls.md gives the treatment of every field and the reasons. In short, the canonical
//! description is a binary encoding of fields in a fixed order, lists as `count(u16) items…`,
//! fed to sha256; the id is `tlsv2_` + the first 12 digest bytes in lowercase hex. Changing what
//! goes in means bumping the `v2`.
//!
//! v2 is v1 without its tags and its 23-byte domain string (one domain byte instead): the fields
//! are positional, each extension content is led by its type. A Chrome description went from 224
//! bytes (four sha256 blocks) to 177 (three), and the order description from 58 (two) to 35
//! (one).

use sha2::{Digest as _, Sha256};

use super::client_hello::ClientHello;
use super::enums::ExtensionType;
use super::extension::{EchBody, Extension, ExtensionBody};
use super::grease::is_grease;
use super::list::U16List;
use crate::text::hex_id;

/// Prefix of a TLS voice id; the `2` is the normalization version.
pub const VOICE_PREFIX: &str = "tlsv2_";
/// Prefix of an extension-order id.
pub const ORDER_PREFIX: &str = "tlso2_";

/// Domain bytes, so a voice digest can never equal an order digest.
const VOICE_DOMAIN: &[u8] = b"v";
const ORDER_DOMAIN: &[u8] = b"o";

/// Every GREASE value is written as this one placeholder (its position is kept).
const GREASE_PLACEHOLDER: u16 = 0x0a0a;

/// Extensions left out of the voice's extension set: they come and go with resumption or with
/// the hello's size, not with the stack. session_ticket is among them because some stacks drop
/// it when they resume with a TLS 1.3 ticket (rustls sends it empty on a fresh hello and leaves
/// it out of the resuming one, RFC 8446 section 4.6.1 tickets being offered as pre_shared_key).
const VOLATILE: [ExtensionType; 4] = [
    ExtensionType::PADDING,
    ExtensionType::SESSION_TICKET,
    ExtensionType::PRE_SHARED_KEY,
    ExtensionType::EARLY_DATA,
];

/// A canonical description being written (it is hashed when done).
struct Feed(Vec<u8>);

impl Feed {
    /// An empty description with room for `len` bytes.
    fn with_capacity(len: usize) -> Self {
        Self(Vec::with_capacity(len))
    }

    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    /// A count; lists longer than u16 can't occur inside a ClientHello, saturate anyway.
    fn count(&mut self, n: usize) {
        self.u16(u16::try_from(n).unwrap_or(u16::MAX));
    }

    /// `count items` for a list of two-byte values, GREASE folded to the placeholder.
    fn u16_list(&mut self, values: impl Iterator<Item = u16> + Clone) {
        self.count(values.clone().count());
        for v in values {
            self.u16(if is_grease(v) { GREASE_PLACEHOLDER } else { v });
        }
    }

    /// [`Self::u16_list`] for a wire list of two-byte values.
    fn u16_wire(&mut self, bytes: &[u8]) {
        self.u16_list(
            bytes
                .as_chunks::<2>()
                .0
                .iter()
                .map(|p| u16::from_be_bytes(*p)),
        );
    }
}

/// `prefix` and the first 12 bytes of the sha256 of `parts` (hashed one after the other) in
/// lowercase hex.
fn id(prefix: &str, parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hex_id(prefix, hasher.finalize().get(..12).unwrap_or_default())
}

/// Whether an extension type belongs in the voice's extension set.
fn in_set(kind: ExtensionType) -> bool {
    !is_grease(kind.0) && !VOLATILE.contains(&kind)
}

/// What leads the content of an extension: its type's code point, so the content of each
/// extension is bound to its type.
fn content(feed: &mut Feed, kind: ExtensionType) {
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

/// The TLS voice id of `hello`.
pub(crate) fn voice_id(hello: &ClientHello<'_>) -> String {
    let mut head = Feed::with_capacity(hello.message_len());
    head.bytes(VOICE_DOMAIN);
    head.u8(u8::from(hello.has_extension_block()));
    head.u16(hello.legacy_version().0);
    head.u16_wire(hello.cipher_suites().as_bytes());
    head.count(hello.compression_methods().len());
    for m in hello.compression_methods().values() {
        head.u8(m);
    }

    // The extensions without GREASE, by type; duplicates of one type stay in wire order (a
    // stable sort), so permutation can't move the contents.
    let mut extensions: Vec<Extension<'_>> = Vec::with_capacity(hello.extensions().len());
    extensions.extend(hello.extensions().filter(|e| !is_grease(e.kind.0)));
    extensions.sort_by_key(|e| e.kind.0);
    let grease = hello.extensions().len() - extensions.len();
    head.u16_list(
        extensions
            .iter()
            .map(|e| e.kind)
            .filter(|kind| in_set(*kind))
            .map(|kind| kind.0),
    );
    head.count(grease);

    // The contents; the types with a malformed body, sorted, once each, go before them.
    let mut contents = Feed::with_capacity(hello.message_len());
    let mut malformed: Vec<u16> = Vec::new();
    for ext in &extensions {
        let kind = ext.kind;
        let well_formed = list_content(&mut contents, ext).unwrap_or_else(|| match &ext.decode() {
            Ok(body) => {
                voice_content(&mut contents, kind, body);
                true
            }
            Err(_) => false,
        });
        if !well_formed && malformed.last() != Some(&kind.0) {
            malformed.push(kind.0);
        }
    }
    let mut listed = Feed::with_capacity(2 + 2 * malformed.len());
    listed.u16_list(malformed.into_iter());
    id(VOICE_PREFIX, &[&head.0, &listed.0, &contents.0])
}

/// Feeds the content of an extension that is a plain list (its type, then the list), read
/// through the list readers rather than the whole body; whether it was well-formed. `None` for
/// the other extensions, which [`voice_content`] feeds from their decoded body.
fn list_content(feed: &mut Feed, ext: &Extension<'_>) -> Option<bool> {
    let kind = ext.kind;
    let mut wire = |list: Option<U16List<'_, u16>>| {
        list.map(|list| {
            content(feed, kind);
            feed.u16_wire(list.as_bytes());
        })
        .is_some()
    };
    Some(match kind {
        ExtensionType::SUPPORTED_GROUPS
        | ExtensionType::SIGNATURE_ALGORITHMS
        | ExtensionType::SIGNATURE_ALGORITHMS_CERT
        | ExtensionType::DELEGATED_CREDENTIAL => wire(ext.long_list()),
        ExtensionType::SUPPORTED_VERSIONS | ExtensionType::COMPRESS_CERTIFICATE => {
            wire(ext.short_list())
        }
        ExtensionType::EC_POINT_FORMATS | ExtensionType::PSK_KEY_EXCHANGE_MODES => ext
            .byte_list::<u8>()
            .map(|list| {
                content(feed, kind);
                feed.u16_list(list.values().map(u16::from));
            })
            .is_some(),
        ExtensionType::APPLICATION_LAYER_PROTOCOL_NEGOTIATION
        | ExtensionType::APPLICATION_SETTINGS
        | ExtensionType::APPLICATION_SETTINGS_NEW => ext
            .names()
            .map(|list| {
                content(feed, kind);
                names(feed, list.iter());
            })
            .is_some(),
        _ => return None,
    })
}

/// Feeds the voiced content of one extension that is not a plain list (nothing for
/// presence-only ones).
fn voice_content(feed: &mut Feed, kind: ExtensionType, body: &ExtensionBody<'_>) {
    use ExtensionBody as B;
    match body {
        B::KeyShare(shares) => {
            content(feed, kind);
            feed.u16_list(shares.iter().map(|(group, _)| group.0));
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
        B::EncryptedClientHello(EchBody::Outer { enc_len, .. }) => {
            // Only the `enc` length: the HPKE suite comes from the server's ECH config for real
            // ECH and is drawn per connection by Firefox's GREASE ECH; config id and payload
            // length are random in GREASE ECH.
            content(feed, kind);
            feed.u8(0);
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
        // Fed by `list_content`, which sees these extensions first.
        B::SupportedGroups(_)
        | B::EcPointFormats(_)
        | B::SignatureAlgorithms(_)
        | B::SignatureAlgorithmsCert(_)
        | B::DelegatedCredentials(_)
        | B::SupportedVersions(_)
        | B::CompressCertificate(_)
        | B::PskKeyExchangeModes(_)
        | B::Alpn(_)
        | B::ApplicationSettings(_) => {}
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
    let mut feed = Feed::with_capacity(3 + 2 * hello.extensions().len());
    feed.bytes(ORDER_DOMAIN);
    feed.u16_list(
        hello
            .extensions()
            .map(|e| e.kind.0)
            .filter(|v| !is_grease(*v)),
    );
    id(ORDER_PREFIX, &[&feed.0])
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use crate::tls::parse_client_hello;

    fn ext(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut out = kind.to_be_bytes().to_vec();
        out.extend_from_slice(&u16::try_from(data.len()).unwrap().to_be_bytes());
        out.extend_from_slice(data);
        out
    }

    /// A bare handshake message: TLS 1.2 legacy version, zero random, no session id, `ciphers`
    /// (wire bytes), null compression, then `extensions` (wire bytes) as its block.
    fn hello(ciphers: &[u8], extensions: &[u8]) -> Vec<u8> {
        let mut body = vec![0x03, 0x03];
        body.extend_from_slice(&[0; 32]);
        body.push(0);
        body.extend_from_slice(&u16::try_from(ciphers.len()).unwrap().to_be_bytes());
        body.extend_from_slice(ciphers);
        body.extend_from_slice(&[1, 0]);
        body.extend_from_slice(&u16::try_from(extensions.len()).unwrap().to_be_bytes());
        body.extend_from_slice(extensions);
        let mut message = vec![1, 0];
        message.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
        message.extend_from_slice(&body);
        message
    }

    fn id(prefix: &str, description: &[u8]) -> String {
        format!(
            "{prefix}{}",
            hex::encode(&Sha256::digest(description)[..12])
        )
    }

    /// The voice and order ids of a small hello against descriptions written out by hand from
    /// docs/voice-tls.md (not produced by the code under test): any change to the bytes hashed
    /// fails here.
    #[test]
    fn ids_hash_the_documented_description() {
        let extensions = [
            ext(0x1a1a, &[]),
            ext(0x000a, &[0, 6, 0x2a, 0x2a, 0x00, 0x1d, 0x00, 0x17]),
            ext(0x0000, &[0, 4, 0, 0, 1, b'a']),
            ext(0x0015, &[0, 0, 0]),
            ext(0x0010, b"\x00\x0c\x02h2\x08http/1.1"),
            ext(0x002b, &[6, 0x3a, 0x3a, 0x03, 0x04, 0x03, 0x03]),
            ext(0x000b, &[1, 0]),
            ext(
                0x0033,
                &[[0, 36, 0x00, 0x1d, 0, 32].as_slice(), &[9; 32]].concat(),
            ),
            ext(0xff01, &[0]),
        ]
        .concat();
        let message = hello(&[0x0a, 0x0a, 0x13, 0x01, 0xc0, 0x2b], &extensions);
        let fp = parse_client_hello(&message).unwrap().fingerprints();

        let voice = [
            b"v".as_slice(),
            // Extension block present, legacy_version.
            &[1, 0x03, 0x03],
            // Cipher suites, GREASE as the placeholder in its place.
            &[0, 3, 0x0a, 0x0a, 0x13, 0x01, 0xc0, 0x2b],
            // Compression methods.
            &[0, 1, 0],
            // The sorted set without GREASE and padding.
            &[
                0, 7, 0, 0, 0, 0x0a, 0, 0x0b, 0, 0x10, 0, 0x2b, 0, 0x33, 0xff, 0x01,
            ],
            // One GREASE extension, no malformed one.
            &[0, 1],
            &[0, 0],
            // Contents in type order, each led by its type: groups, point formats, ALPN,
            // versions, key-share groups, renegotiation_info.
            &[0, 0x0a, 0, 3, 0x0a, 0x0a, 0, 0x1d, 0, 0x17],
            &[0, 0x0b, 0, 1, 0, 0],
            b"\x00\x10\x00\x02\x02h2\x08http/1.1",
            &[0, 0x2b, 0, 3, 0x0a, 0x0a, 0x03, 0x04, 0x03, 0x03],
            &[0, 0x33, 0, 1, 0, 0x1d],
            &[0xff, 0x01, 0, 0],
        ]
        .concat();
        assert_eq!(fp.voice_id(), id("tlsv2_", &voice));

        let order = [
            b"o".as_slice(),
            &[0, 8],
            &[
                0, 0x0a, 0, 0, 0, 0x15, 0, 0x10, 0, 0x2b, 0, 0x0b, 0, 0x33, 0xff, 0x01,
            ],
        ]
        .concat();
        assert_eq!(fp.order_id(), id("tlso2_", &order));
    }

    /// Malformed known extensions (list extensions read through the list readers, and others
    /// through the whole body) go into the malformed field, sorted, and give no content; the
    /// description is written out by hand from docs/voice-tls.md.
    #[test]
    fn malformed_extensions_are_listed_without_content() {
        let extensions = [
            // key_share whose list length runs past its data.
            ext(0x0033, &[0, 2, 0]),
            // supported_groups: the same.
            ext(0x000a, &[0, 4, 0, 0x1d]),
            // A well-formed supported_versions.
            ext(0x002b, &[2, 0x03, 0x04]),
            // ALPN with a name longer than the list.
            ext(0x0010, &[0, 2, 5, b'h']),
            // extended_master_secret with a body.
            ext(0x0017, &[1]),
            // A second, well-formed supported_groups: its type is listed once.
            ext(0x000a, &[0, 2, 0, 0x1d]),
        ]
        .concat();
        let message = hello(&[0x13, 0x01], &extensions);
        let fp = parse_client_hello(&message).unwrap().fingerprints();
        let voice = [
            b"v".as_slice(),
            &[1, 0x03, 0x03],
            &[0, 1, 0x13, 0x01],
            &[0, 1, 0],
            // The set, sorted, duplicates kept.
            &[0, 6, 0, 0x0a, 0, 0x0a, 0, 0x10, 0, 0x17, 0, 0x2b, 0, 0x33],
            // No GREASE; the malformed types, sorted, once each.
            &[0, 0],
            &[0, 4, 0, 0x0a, 0, 0x10, 0, 0x17, 0, 0x33],
            // Contents: the second supported_groups, then supported_versions.
            &[0, 0x0a, 0, 1, 0, 0x1d],
            &[0, 0x2b, 0, 1, 0x03, 0x04],
        ]
        .concat();
        assert_eq!(fp.voice_id(), id("tlsv2_", &voice));
    }
}
