//! All TLS fingerprints of one ClientHello at once, and the echo's TLS section.

use std::fmt;
use std::ops::Range;

use exitvoice_schema::{TlsEcho, VoiceId};
use serde::ser::{Serialize, SerializeStruct, Serializer};

use super::ascii::Ascii;
use super::client_hello::ClientHello;
use super::ja3::write_ja3;
use super::ja4::write_ja4;
use super::survey::Survey;
use super::voice::{write_order_id, write_voice_id};

/// The TLS fingerprints of a ClientHello: the ten strings in one buffer (one allocation), read
/// through the accessors. Serializes as a map of the ten strings, in the accessors' order.
#[derive(Clone)]
pub struct TlsFingerprints {
    /// Every string back to back, in the order they are written (JA3, JA3N, their hashes,
    /// JA4_r, JA4, JA4_ro, JA4_o, voice id, order id).
    text: String,
    /// Where each string sits in `text`, in [`Self::NAMES`] order.
    spans: [(usize, usize); 10],
}

impl TlsFingerprints {
    /// The field names of the serialized form, in order; [`Self::values`] follows it.
    const NAMES: [&'static str; 10] = [
        "ja3",
        "ja3_hash",
        "ja3n",
        "ja3n_hash",
        "ja4",
        "ja4_r",
        "ja4_o",
        "ja4_ro",
        "voice_id",
        "order_id",
    ];

    fn get(&self, i: usize) -> &str {
        match self.spans.get(i) {
            Some(&(start, end)) => self.text.get(start..end).unwrap_or_default(),
            None => "",
        }
    }

    /// The ten strings in [`Self::NAMES`] order.
    fn values(&self) -> [&str; 10] {
        std::array::from_fn(|i| self.get(i))
    }

    /// JA3 string.
    pub fn ja3(&self) -> &str {
        self.get(0)
    }

    /// md5 of [`Self::ja3`], lowercase hex.
    pub fn ja3_hash(&self) -> &str {
        self.get(1)
    }

    /// JA3N string (JA3 with the extension list sorted ascending).
    pub fn ja3n(&self) -> &str {
        self.get(2)
    }

    /// md5 of [`Self::ja3n`], lowercase hex.
    pub fn ja3n_hash(&self) -> &str {
        self.get(3)
    }

    /// JA4.
    pub fn ja4(&self) -> &str {
        self.get(4)
    }

    /// JA4, raw (unhashed).
    pub fn ja4_r(&self) -> &str {
        self.get(5)
    }

    /// JA4, original (wire) order, hashed.
    pub fn ja4_o(&self) -> &str {
        self.get(6)
    }

    /// JA4, raw and original order.
    pub fn ja4_ro(&self) -> &str {
        self.get(7)
    }

    /// The normalized TLS voice (`tlsv2_…`).
    pub fn voice_id(&self) -> &str {
        self.get(8)
    }

    /// Hash of the raw non-GREASE extension order (`tlso2_…`).
    pub fn order_id(&self) -> &str {
        self.get(9)
    }
}

/// Equal when all ten strings are.
impl PartialEq for TlsFingerprints {
    fn eq(&self, other: &Self) -> bool {
        self.values() == other.values()
    }
}

impl Eq for TlsFingerprints {}

/// The ten strings by name, as the serialized form shows them.
impl fmt::Debug for TlsFingerprints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("TlsFingerprints");
        for (name, value) in Self::NAMES.iter().zip(self.values()) {
            s.field(name, &value);
        }
        s.finish()
    }
}

/// A struct of ten string fields, named as the accessors (the form the echo and `inspect` show).
impl Serialize for TlsFingerprints {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("TlsFingerprints", Self::NAMES.len())?;
        for (name, value) in Self::NAMES.iter().zip(self.values()) {
            s.serialize_field(name, value)?;
        }
        s.end()
    }
}

/// Scratch bytes on the stack: a Chrome hello's strings and voice description need ~1.5 KiB.
const SCRATCH: usize = 2048;

impl ClientHello<'_> {
    /// Computes JA3, JA3N, the JA4 family, the voice id and the order id.
    ///
    /// One survey pass collects the lists every fingerprint reads; all ten strings are written
    /// into one scratch buffer (descriptions that are hashed are rewound, so the text is the ten
    /// strings back to back), checked as text once and copied out in one exact-size `String`.
    pub fn fingerprints(&self) -> TlsFingerprints {
        let survey = Survey::new(self);
        let mut stack = [0u8; SCRATCH];
        let mut out = Ascii::new(&mut stack);
        let ja3 = write_ja3(self, &survey, &mut out);
        let ja4 = write_ja4(self, &survey, &mut out);
        let voice = write_voice_id(self, &survey, &mut out);
        let order = write_order_id(&survey, &mut out);
        let span = |r: Range<usize>| (r.start, r.end);
        TlsFingerprints {
            text: out.text().unwrap_or_default().to_owned(),
            spans: [
                span(ja3.ja3),
                span(ja3.ja3_hash),
                span(ja3.ja3n),
                span(ja3.ja3n_hash),
                span(ja4.ja4),
                span(ja4.ja4_r),
                span(ja4.ja4_o),
                span(ja4.ja4_ro),
                span(voice),
                span(order),
            ],
        }
    }
}

/// The echo's TLS section for `hello`: every fingerprint, `resumed`, and the parsed hello as
/// `detail`.
pub fn echo(hello: &ClientHello<'_>) -> TlsEcho {
    let fp = hello.fingerprints();
    TlsEcho {
        ja3: fp.ja3().to_owned(),
        ja3_hash: fp.ja3_hash().to_owned(),
        ja3n: fp.ja3n().to_owned(),
        ja3n_hash: fp.ja3n_hash().to_owned(),
        ja4: fp.ja4().to_owned(),
        ja4_r: fp.ja4_r().to_owned(),
        ja4_o: fp.ja4_o().to_owned(),
        ja4_ro: fp.ja4_ro().to_owned(),
        voice_id: VoiceId(fp.voice_id().to_owned()),
        order_id: fp.order_id().to_owned(),
        resumed: hello.resumed(),
        // Serializing the model cannot fail (no non-string map keys); Null is the fallback.
        detail: serde_json::to_value(hello).unwrap_or(serde_json::Value::Null),
    }
}
