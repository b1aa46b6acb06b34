//! All TLS fingerprints of one ClientHello at once, and the echo's TLS section.

use exitvoice_schema::{TlsEcho, VoiceId};
use serde::Serialize;

use super::client_hello::ClientHello;
use super::grease::is_grease;
use super::ja3::ja3_set;
use super::ja4::ja4_set;
use super::voice::{order_id, voice_id};

/// The TLS fingerprints of a ClientHello.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TlsFingerprints {
    /// JA3 string.
    pub ja3: String,
    /// md5 of `ja3`, lowercase hex.
    pub ja3_hash: String,
    /// JA3N string (JA3 with the extension list sorted ascending).
    pub ja3n: String,
    /// md5 of `ja3n`.
    pub ja3n_hash: String,
    /// JA4.
    pub ja4: String,
    /// JA4, raw (unhashed).
    pub ja4_r: String,
    /// JA4, original (wire) order, hashed.
    pub ja4_o: String,
    /// JA4, raw and original order.
    pub ja4_ro: String,
    /// The normalized TLS voice (`tlsv1_…`).
    pub voice_id: VoiceId,
    /// Hash of the raw non-GREASE extension order (`tlso1_…`).
    pub order_id: String,
}

/// Collects `items` into `stack` when they fit, else into `heap`; answers the filled part.
/// Keeps the hot path free of allocation for ordinary hellos.
pub(crate) fn collect_into<'b, T: Copy>(
    stack: &'b mut [T],
    heap: &'b mut Vec<T>,
    items: impl Iterator<Item = T> + Clone,
) -> &'b mut [T] {
    let mut len = 0;
    for item in items.clone() {
        match stack.get_mut(len) {
            Some(slot) => *slot = item,
            None => {
                heap.clear();
                heap.extend(items);
                return heap.as_mut_slice();
            }
        }
        len += 1;
    }
    stack.get_mut(..len).unwrap_or_default()
}

impl ClientHello<'_> {
    /// Computes JA3, JA3N, the JA4 family, the voice id and the order id.
    pub fn fingerprints(&self) -> TlsFingerprints {
        let (mut cipher_stack, mut cipher_heap) = ([0u16; 96], Vec::new());
        let ciphers = collect_into(
            &mut cipher_stack,
            &mut cipher_heap,
            self.cipher_suites.values().filter(|v| !is_grease(*v)),
        );
        ciphers.sort_unstable();
        let (mut type_stack, mut type_heap) = ([0u16; 64], Vec::new());
        let types = collect_into(
            &mut type_stack,
            &mut type_heap,
            self.extensions()
                .iter()
                .map(|e| e.kind.0)
                .filter(|v| !is_grease(*v)),
        );
        types.sort_unstable();
        let ja3 = ja3_set(self, types);
        let ja4 = ja4_set(self, ciphers, types);
        let voice = voice_id(self, types);
        TlsFingerprints {
            ja3: ja3.ja3,
            ja3_hash: ja3.ja3_hash,
            ja3n: ja3.ja3n,
            ja3n_hash: ja3.ja3n_hash,
            ja4: ja4.ja4,
            ja4_r: ja4.ja4_r,
            ja4_o: ja4.ja4_o,
            ja4_ro: ja4.ja4_ro,
            voice_id: VoiceId(voice),
            order_id: order_id(self),
        }
    }
}

/// The echo's TLS section for `hello`: every fingerprint, `resumed`, and the parsed hello as
/// `detail`.
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
        voice_id: fp.voice_id,
        order_id: fp.order_id,
        resumed: hello.resumed(),
        // Serializing the model cannot fail (no non-string map keys); Null is the fallback.
        detail: serde_json::to_value(hello).unwrap_or(serde_json::Value::Null),
    }
}
