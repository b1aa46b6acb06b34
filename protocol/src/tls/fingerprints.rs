//! All TLS fingerprints of one ClientHello at once, and the echo's TLS section.

use exitvoice_schema::{RawJson, TlsEcho, VoiceId};
use serde::Serialize;

use super::client_hello::ClientHello;
use super::ja3::ja3;
use super::ja4::ja4;
use super::voice::{order_id, voice_id};

/// The TLS fingerprints of a ClientHello, read through the accessors. Serializes as a map of
/// the ten strings, in the accessors' order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TlsFingerprints {
    ja3: String,
    ja3_hash: String,
    ja3n: String,
    ja3n_hash: String,
    ja4: String,
    ja4_r: String,
    ja4_o: String,
    ja4_ro: String,
    voice_id: String,
    order_id: String,
}

impl TlsFingerprints {
    /// JA3 string.
    pub fn ja3(&self) -> &str {
        &self.ja3
    }

    /// md5 of [`Self::ja3`], lowercase hex.
    pub fn ja3_hash(&self) -> &str {
        &self.ja3_hash
    }

    /// JA3N string (JA3 with the extension list sorted ascending).
    pub fn ja3n(&self) -> &str {
        &self.ja3n
    }

    /// md5 of [`Self::ja3n`], lowercase hex.
    pub fn ja3n_hash(&self) -> &str {
        &self.ja3n_hash
    }

    /// JA4.
    pub fn ja4(&self) -> &str {
        &self.ja4
    }

    /// JA4, raw (unhashed).
    pub fn ja4_r(&self) -> &str {
        &self.ja4_r
    }

    /// JA4, original (wire) order, hashed.
    pub fn ja4_o(&self) -> &str {
        &self.ja4_o
    }

    /// JA4, raw and original order.
    pub fn ja4_ro(&self) -> &str {
        &self.ja4_ro
    }

    /// The normalized TLS voice (`tlsv2_…`).
    pub fn voice_id(&self) -> &str {
        &self.voice_id
    }

    /// Hash of the raw non-GREASE extension order (`tlso2_…`).
    pub fn order_id(&self) -> &str {
        &self.order_id
    }
}

impl ClientHello<'_> {
    /// Computes JA3, JA3N, the JA4 family, the voice id and the order id.
    pub fn fingerprints(&self) -> TlsFingerprints {
        let ja3 = ja3(self);
        let ja4 = ja4(self);
        TlsFingerprints {
            ja3: ja3.ja3,
            ja3_hash: ja3.ja3_hash,
            ja3n: ja3.ja3n,
            ja3n_hash: ja3.ja3n_hash,
            ja4: ja4.ja4,
            ja4_r: ja4.ja4_r,
            ja4_o: ja4.ja4_o,
            ja4_ro: ja4.ja4_ro,
            voice_id: voice_id(self),
            order_id: order_id(self),
        }
    }
}

/// The echo's TLS section for `hello`: every fingerprint and `resumed`; the parsed hello itself
/// (`detail`) is written only when an answer or a reader needs it ([`detail`]).
pub fn echo(hello: &ClientHello<'_>) -> TlsEcho {
    let fp = hello.fingerprints();
    TlsEcho {
        ja3: fp.ja3,
        ja3_hash: fp.ja3_hash,
        ja3n: fp.ja3n,
        ja3n_hash: fp.ja3n_hash,
        ja4: fp.ja4,
        ja4_r: fp.ja4_r,
        ja4_o: fp.ja4_o,
        ja4_ro: fp.ja4_ro,
        voice_id: VoiceId(fp.voice_id),
        order_id: fp.order_id,
        resumed: hello.resumed(),
        detail: RawJson::null(),
    }
}

/// The parsed hello as the echo's `tls.detail`, written straight from the parser's model.
pub fn detail(hello: &ClientHello<'_>) -> RawJson {
    RawJson::of(hello)
}
