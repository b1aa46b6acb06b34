//! All TLS fingerprints of one ClientHello at once, and the echo's TLS section.

use exitvoice_schema::{TlsEcho, VoiceId};
use serde::Serialize;

use super::ascii::{cut, Ascii};
use super::client_hello::ClientHello;
use super::ja3::write_ja3;
use super::ja4::write_ja4;
use super::survey::Survey;
use super::voice::{write_order_id, write_voice_id};

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

/// Scratch bytes on the stack: a Chrome hello's strings and voice description need ~1.5 KiB.
const SCRATCH: usize = 2048;

impl ClientHello<'_> {
    /// Computes JA3, JA3N, the JA4 family, the voice id and the order id.
    ///
    /// One survey pass collects the lists every fingerprint reads; all ten strings are written
    /// into one scratch buffer, checked as text once and cut out at their exact sizes.
    pub fn fingerprints(&self) -> TlsFingerprints {
        let survey = Survey::new(self);
        let mut stack = [0u8; SCRATCH];
        let mut out = Ascii::new(&mut stack);
        let ja3 = write_ja3(self, &survey, &mut out);
        let ja4 = write_ja4(self, &survey, &mut out);
        let voice = write_voice_id(self, &survey, &mut out);
        let order = write_order_id(&survey, &mut out);
        let text = out.text().unwrap_or_default();
        TlsFingerprints {
            ja3: cut(text, ja3.ja3),
            ja3_hash: cut(text, ja3.ja3_hash),
            ja3n: cut(text, ja3.ja3n),
            ja3n_hash: cut(text, ja3.ja3n_hash),
            ja4: cut(text, ja4.ja4),
            ja4_r: cut(text, ja4.ja4_r),
            ja4_o: cut(text, ja4.ja4_o),
            ja4_ro: cut(text, ja4.ja4_ro),
            voice_id: VoiceId(cut(text, voice)),
            order_id: cut(text, order),
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
