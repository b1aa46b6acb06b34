//! Decryption of what the client sent, with secrets from a key log.
//!
//! TLS 1.3 (RFC 8446): the client's encrypted handshake records are opened with
//! `CLIENT_HANDSHAKE_TRAFFIC_SECRET` until its Finished, then application data with
//! `CLIENT_TRAFFIC_SECRET_0` (and the secrets that follow it after a KeyUpdate, section 7.2).
//! Traffic keys come from HKDF-Expand-Label (section 7.1, 7.3), each record's nonce is the IV
//! XORed with the record sequence number (section 5.3), and the inner plaintext ends with its real
//! content type after zero padding (section 5.2). Without the handshake secret, the Finished
//! record is skipped and application data is still read.
//!
//! TLS 1.2 (RFC 5246): the key block is expanded from the `CLIENT_RANDOM` master secret with the
//! suite's PRF (section 5, 6.3); AES-GCM records carry an 8-byte explicit nonce (RFC 5288
//! section 3) and ChaCha20-Poly1305 records none (RFC 7905 section 2).
//!
//! Only AEAD suites are supported; CBC suites and early data (0-RTT) are not decrypted.

use aws_lc_rs::{aead, hmac};

use super::handshake::{
    Record, ServerHello, ALERT, APPLICATION_DATA, CHANGE_CIPHER_SPEC, HANDSHAKE,
};
use super::keylog::ClientSecrets;

/// Length of an AEAD tag for every suite here.
const TAG_LEN: usize = 16;
/// Handshake message types used to follow the flights (RFC 8446 section 4).
const ENCRYPTED_EXTENSIONS: u8 = 8;
const FINISHED: u8 = 20;
const KEY_UPDATE: u8 = 24;

/// Why the client's encrypted bytes could not be read.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecryptError {
    /// No ServerHello was captured, so the version and cipher suite are unknown.
    #[error("no ServerHello captured: version and cipher suite unknown")]
    NoServerHello,
    /// The key log has no client secret for this connection's ClientHello random.
    #[error("no key log entry for this connection")]
    NoKeys,
    /// The negotiated version is neither TLS 1.2 nor TLS 1.3.
    #[error("cannot decrypt protocol version {0:#06x}")]
    UnsupportedVersion(u16),
    /// The cipher suite is not an AEAD suite this decrypter knows.
    #[error("cannot decrypt cipher suite {0:#06x}")]
    UnsupportedSuite(u16),
    /// No application data opened with the logged secrets: wrong secrets or a damaged stream.
    #[error(
        "no client application data decrypted with the logged secrets ({records} records tried)"
    )]
    NothingDecrypted {
        /// Encrypted records tried.
        records: usize,
    },
}

/// An AEAD cipher suite: the AEAD, the hash of its key schedule, and its key and IV lengths.
struct Suite {
    aead: &'static aead::Algorithm,
    hash: hmac::Algorithm,
    /// Hash output length.
    hash_len: usize,
    /// TLS 1.2 fixed IV length (4 for AES-GCM, 12 for ChaCha20-Poly1305).
    tls12_iv_len: usize,
}

const AES_128_GCM_SHA256: Suite = Suite {
    aead: &aead::AES_128_GCM,
    hash: hmac::HMAC_SHA256,
    hash_len: 32,
    tls12_iv_len: 4,
};
const AES_256_GCM_SHA384: Suite = Suite {
    aead: &aead::AES_256_GCM,
    hash: hmac::HMAC_SHA384,
    hash_len: 48,
    tls12_iv_len: 4,
};
const CHACHA20_POLY1305_SHA256: Suite = Suite {
    aead: &aead::CHACHA20_POLY1305,
    hash: hmac::HMAC_SHA256,
    hash_len: 32,
    tls12_iv_len: 12,
};

/// TLS 1.3 suites (RFC 8446 appendix B.4).
fn tls13_suite(id: u16) -> Option<&'static Suite> {
    match id {
        0x1301 => Some(&AES_128_GCM_SHA256),
        0x1302 => Some(&AES_256_GCM_SHA384),
        0x1303 => Some(&CHACHA20_POLY1305_SHA256),
        _ => None,
    }
}

/// TLS 1.2 AEAD suites: RFC 5288 (RSA, DHE), RFC 5289 (ECDHE), RFC 7905 (ChaCha20-Poly1305).
fn tls12_suite(id: u16) -> Option<&'static Suite> {
    match id {
        0x009c | 0x009e | 0xc02b | 0xc02f => Some(&AES_128_GCM_SHA256),
        0x009d | 0x009f | 0xc02c | 0xc030 => Some(&AES_256_GCM_SHA384),
        0xcca8..=0xccaa => Some(&CHACHA20_POLY1305_SHA256),
        _ => None,
    }
}

/// The client's application data, decrypted, up to `cap` bytes.
///
/// `after` are the client's records after its last ClientHello; `client_random` is the random of
/// its first ClientHello.
pub(crate) fn client_application_data(
    after: &[Record<'_>],
    server: &ServerHello,
    client_random: &[u8; 32],
    secrets: &ClientSecrets,
    cap: usize,
) -> Result<Vec<u8>, DecryptError> {
    match server.version {
        0x0304 => {
            let suite = tls13_suite(server.cipher_suite)
                .ok_or(DecryptError::UnsupportedSuite(server.cipher_suite))?;
            tls13(after, suite, secrets, cap)
        }
        0x0303 => {
            let suite = tls12_suite(server.cipher_suite)
                .ok_or(DecryptError::UnsupportedSuite(server.cipher_suite))?;
            let master = secrets.master.as_deref().ok_or(DecryptError::NoKeys)?;
            tls12(after, suite, master, client_random, &server.random, cap)
        }
        other => Err(DecryptError::UnsupportedVersion(other)),
    }
}

/// The ALPN protocol in a TLS 1.3 server's EncryptedExtensions (RFC 8446 section 4.3.1, RFC 7301
/// section 3.1), read with `SERVER_HANDSHAKE_TRAFFIC_SECRET` from the server's records after its
/// ServerHello. `None` when the secret, the message or the extension is missing.
pub(crate) fn server_alpn(
    after: &[Record<'_>],
    server: &ServerHello,
    secrets: &ClientSecrets,
) -> Option<Vec<u8>> {
    if server.version != 0x0304 {
        return None;
    }
    let suite = tls13_suite(server.cipher_suite)?;
    let mut key = RecordKey::tls13(suite, secrets.server_handshake.as_deref()?)?;
    // EncryptedExtensions is the server's first encrypted handshake message: the first
    // application_data record holds at least its start.
    let record = after
        .iter()
        .find(|r| r.content_type() == APPLICATION_DATA)?;
    let (content_type, content) = key.open13(record)?;
    if content_type != HANDSHAKE {
        return None;
    }
    let mut r = crate::codec::Reader::new(&content);
    if r.u8()? != ENCRYPTED_EXTENSIONS {
        return None;
    }
    let len = usize::try_from(r.u24()?).ok()?;
    let mut body = r.sub(len)?;
    let mut extensions = body.sub_u16()?;
    while !extensions.is_empty() {
        let kind = extensions.u16()?;
        let mut data = extensions.sub_u16()?;
        if kind == 0x0010 {
            let mut name = data.sub_u16()?.sub_u8()?;
            return Some(name.rest().to_vec());
        }
    }
    None
}

/// HMAC-based HKDF-Expand (RFC 5869 section 2.3).
fn hkdf_expand(hash: hmac::Algorithm, prk: &[u8], info: &[u8], out: &mut [u8]) {
    let key = hmac::Key::new(hash, prk);
    let mut previous: Vec<u8> = Vec::new();
    let mut counter = 1u8;
    for chunk in out.chunks_mut(hash.digest_algorithm().output_len) {
        let mut ctx = hmac::Context::with_key(&key);
        ctx.update(&previous);
        ctx.update(info);
        ctx.update(&[counter]);
        let tag = ctx.sign();
        let block = tag.as_ref();
        chunk.copy_from_slice(block.get(..chunk.len()).unwrap_or_default());
        previous = block.to_vec();
        counter = counter.wrapping_add(1);
    }
}

/// HKDF-Expand-Label with an empty context (RFC 8446 section 7.1).
fn expand_label(suite: &Suite, secret: &[u8], label: &[u8], len: usize) -> Vec<u8> {
    let full_label_len = 6 + label.len();
    let mut info = Vec::with_capacity(4 + full_label_len);
    info.extend_from_slice(&u16::try_from(len).unwrap_or(0).to_be_bytes());
    info.push(u8::try_from(full_label_len).unwrap_or(0));
    info.extend_from_slice(b"tls13 ");
    info.extend_from_slice(label);
    info.push(0); // empty context
    let mut out = vec![0u8; len];
    hkdf_expand(suite.hash, secret, &info, &mut out);
    out
}

/// An AEAD key with its IV and record sequence number for one direction.
struct RecordKey {
    key: aead::LessSafeKey,
    iv: [u8; 12],
    seq: u64,
}

impl RecordKey {
    fn new(suite: &Suite, key: &[u8], iv: [u8; 12]) -> Option<Self> {
        let key = aead::UnboundKey::new(suite.aead, key).ok()?;
        Some(Self {
            key: aead::LessSafeKey::new(key),
            iv,
            seq: 0,
        })
    }

    /// Traffic key and IV from a TLS 1.3 traffic secret (RFC 8446 section 7.3).
    fn tls13(suite: &Suite, secret: &[u8]) -> Option<Self> {
        let key = expand_label(suite, secret, b"key", suite.aead.key_len());
        let iv: [u8; 12] = expand_label(suite, secret, b"iv", 12).try_into().ok()?;
        Self::new(suite, &key, iv)
    }

    /// The per-record nonce: the IV XORed with the sequence number (RFC 8446 section 5.3,
    /// RFC 7905 section 2).
    fn nonce(&self) -> aead::Nonce {
        let mut nonce = self.iv;
        for (n, s) in nonce.iter_mut().skip(4).zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        aead::Nonce::assume_unique_for_key(nonce)
    }

    /// Opens a TLS 1.3 record: (inner content type, content). The sequence number advances only
    /// when the record authenticates.
    fn open13(&mut self, record: &Record<'_>) -> Option<(u8, Vec<u8>)> {
        let mut buf = record.body.to_vec();
        let plain = self
            .key
            .open_in_place(self.nonce(), aead::Aad::from(record.header), &mut buf)
            .ok()?;
        self.seq = self.seq.wrapping_add(1);
        // TLSInnerPlaintext: content, content type, zero padding (RFC 8446 section 5.2).
        let end = plain.iter().rposition(|&b| b != 0)?;
        let content_type = *plain.get(end)?;
        Some((content_type, plain.get(..end)?.to_vec()))
    }
}

/// Whether the handshake bytes so far hold a complete Finished message.
fn has_finished(handshake: &[u8]) -> bool {
    let mut r = crate::codec::Reader::new(handshake);
    while let (Some(kind), Some(len)) = (r.u8(), r.u24()) {
        if r.take(usize::try_from(len).unwrap_or(usize::MAX)).is_none() {
            return false;
        }
        if kind == FINISHED {
            return true;
        }
    }
    false
}

fn tls13(
    after: &[Record<'_>],
    suite: &Suite,
    secrets: &ClientSecrets,
    cap: usize,
) -> Result<Vec<u8>, DecryptError> {
    if secrets.handshake.is_none() && secrets.traffic.is_none() {
        return Err(DecryptError::NoKeys);
    }
    let mut handshake_key = secrets
        .handshake
        .as_deref()
        .and_then(|s| RecordKey::tls13(suite, s));
    let mut app_secret = secrets.traffic.clone();
    let mut app_key = app_secret
        .as_deref()
        .and_then(|s| RecordKey::tls13(suite, s));
    let mut in_application = false;
    let mut handshake_bytes = Vec::new();
    let mut out = Vec::new();
    let mut tried = 0usize;
    let mut failed = 0usize;
    for record in after {
        if record.content_type() != APPLICATION_DATA {
            continue; // middlebox-compatibility ChangeCipherSpec (RFC 8446 section 5)
        }
        tried += 1;
        if !in_application {
            if let Some(key) = handshake_key.as_mut() {
                if let Some((content_type, content)) = key.open13(record) {
                    if content_type == HANDSHAKE {
                        handshake_bytes.extend_from_slice(&content);
                        if has_finished(&handshake_bytes) {
                            in_application = true;
                        }
                    }
                    continue;
                }
            }
        }
        let Some(key) = app_key.as_mut() else {
            continue;
        };
        let Some((content_type, content)) = key.open13(record) else {
            failed += 1;
            if in_application {
                break; // a damaged stream or a wrong secret: keep what was read
            }
            continue; // early data or a handshake record we have no key for
        };
        in_application = true;
        match content_type {
            APPLICATION_DATA => {
                let room = cap.saturating_sub(out.len());
                out.extend_from_slice(content.get(..room.min(content.len())).unwrap_or_default());
                if out.len() >= cap {
                    break;
                }
            }
            HANDSHAKE if content.first() == Some(&KEY_UPDATE) => {
                // application_traffic_secret_N+1 (RFC 8446 section 7.2).
                let Some(secret) = app_secret.as_deref() else {
                    break;
                };
                let next = expand_label(suite, secret, b"traffic upd", suite.hash_len);
                app_key = RecordKey::tls13(suite, &next);
                app_secret = Some(next);
            }
            ALERT => break,
            _ => {}
        }
    }
    if out.is_empty() && failed > 0 {
        return Err(DecryptError::NothingDecrypted { records: tried });
    }
    Ok(out)
}

/// P_hash of the TLS 1.2 PRF (RFC 5246 section 5).
fn prf(hash: hmac::Algorithm, secret: &[u8], label: &[u8], seed: &[u8], out: &mut [u8]) {
    let key = hmac::Key::new(hash, secret);
    let mut label_seed = label.to_vec();
    label_seed.extend_from_slice(seed);
    let mut a = hmac::sign(&key, &label_seed).as_ref().to_vec();
    for chunk in out.chunks_mut(hash.digest_algorithm().output_len) {
        let mut ctx = hmac::Context::with_key(&key);
        ctx.update(&a);
        ctx.update(&label_seed);
        let block = ctx.sign();
        chunk.copy_from_slice(block.as_ref().get(..chunk.len()).unwrap_or_default());
        a = hmac::sign(&key, &a).as_ref().to_vec();
    }
}

fn tls12(
    after: &[Record<'_>],
    suite: &Suite,
    master: &[u8],
    client_random: &[u8; 32],
    server_random: &[u8; 32],
    cap: usize,
) -> Result<Vec<u8>, DecryptError> {
    // key_block = client_write_key, server_write_key, client_write_IV, server_write_IV
    // (RFC 5246 section 6.3; AEAD suites have no MAC keys).
    let key_len = suite.aead.key_len();
    let mut key_block = vec![0u8; 2 * key_len + 2 * suite.tls12_iv_len];
    let mut seed = server_random.to_vec();
    seed.extend_from_slice(client_random);
    prf(suite.hash, master, b"key expansion", &seed, &mut key_block);
    let client_key = key_block.get(..key_len).unwrap_or_default();
    let fixed_iv = key_block
        .get(2 * key_len..2 * key_len + suite.tls12_iv_len)
        .unwrap_or_default();
    let mut iv = [0u8; 12];
    if let Some(dst) = iv.get_mut(..fixed_iv.len()) {
        dst.copy_from_slice(fixed_iv);
    }
    let explicit_nonce = suite.tls12_iv_len == 4;
    let Some(mut key) = RecordKey::new(suite, client_key, iv) else {
        return Err(DecryptError::UnsupportedSuite(0));
    };
    let mut encrypted = false;
    let mut out = Vec::new();
    let mut tried = 0usize;
    let mut failed = false;
    for record in after {
        if record.content_type() == CHANGE_CIPHER_SPEC {
            encrypted = true;
            continue;
        }
        if !encrypted {
            continue; // ClientKeyExchange and friends, in the clear
        }
        tried += 1;
        let (nonce, body) = if explicit_nonce {
            // nonce = salt (fixed IV) || explicit part from the record (RFC 5288 section 3).
            let Some((explicit, body)) = record.body.split_at_checked(8) else {
                break;
            };
            let mut nonce = iv;
            if let Some(dst) = nonce.get_mut(4..) {
                dst.copy_from_slice(explicit);
            }
            (aead::Nonce::assume_unique_for_key(nonce), body)
        } else {
            (key.nonce(), record.body)
        };
        let Some(plain_len) = body.len().checked_sub(TAG_LEN) else {
            break;
        };
        // additional_data = seq_num + type + version + length (RFC 5246 section 6.2.3.3).
        let mut aad = key.seq.to_be_bytes().to_vec();
        aad.extend_from_slice(record.header.get(..3).unwrap_or_default());
        aad.extend_from_slice(&u16::try_from(plain_len).unwrap_or(0).to_be_bytes());
        let mut buf = body.to_vec();
        let Ok(plain) = key.key.open_in_place(nonce, aead::Aad::from(aad), &mut buf) else {
            failed = true;
            break;
        };
        key.seq = key.seq.wrapping_add(1);
        match record.content_type() {
            APPLICATION_DATA => {
                let room = cap.saturating_sub(out.len());
                out.extend_from_slice(plain.get(..room.min(plain.len())).unwrap_or_default());
                if out.len() >= cap {
                    break;
                }
            }
            ALERT => break,
            _ => {}
        }
    }
    if out.is_empty() && failed {
        return Err(DecryptError::NothingDecrypted { records: tried });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8448 section 3 (simple 1-RTT handshake), client handshake traffic secret
    /// `{client}  derive secret "tls13 c hs"` and the key and IV derived from it.
    #[test]
    fn rfc8448_client_handshake_key_and_iv() {
        let secret =
            hex::decode("b3eddb126e067f35a780b3abf45e2d8f3b1a950738f52e9600746a0e27a55a21")
                .unwrap_or_default();
        let key = expand_label(&AES_128_GCM_SHA256, &secret, b"key", 16);
        let iv = expand_label(&AES_128_GCM_SHA256, &secret, b"iv", 12);
        assert_eq!(hex::encode(key), "dbfaa693d1762c5b666af5d950258d01");
        assert_eq!(hex::encode(iv), "5bd3c71b836e0b76bb73265f");
    }

    /// RFC 8448 section 3: the client's Finished record, protected with the handshake key.
    #[test]
    fn rfc8448_client_finished_record_opens() {
        let secret =
            hex::decode("b3eddb126e067f35a780b3abf45e2d8f3b1a950738f52e9600746a0e27a55a21")
                .unwrap_or_default();
        let wire = hex::decode(
            "170303003575ec4dc238cce60b298044a71e219c56cc77b0517fe9b93c7a4bfc44d87f38\
             f80338ac98fc46deb384bd1caeacab6867d726c40546",
        )
        .unwrap_or_default();
        let header: [u8; 5] = wire
            .get(..5)
            .and_then(|h| h.try_into().ok())
            .unwrap_or_default();
        let record = Record {
            header,
            body: wire.get(5..).unwrap_or_default(),
        };
        let mut key = RecordKey::tls13(&AES_128_GCM_SHA256, &secret).expect("a key");
        let (content_type, content) = key.open13(&record).expect("the record authenticates");
        assert_eq!(content_type, HANDSHAKE);
        assert_eq!(
            hex::encode(&content),
            "14000020a8ec436d677634ae525ac1fcebe11a039ec17694fac6e98527b642f2edd5ce61"
        );
        assert!(has_finished(&content));
        assert_eq!(key.seq, 1);
    }
}
