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

/// TEMPORARY refactoring guard for the performance work (removed before the branch is
/// reported): pins the output of the pre-change code on the Chrome bench hello.
#[cfg(test)]
mod perf_guard {
    #[test]
    fn chrome_bench_hello_unchanged() {
        let line = include_str!("../../tests/data/ja4/clienthellos.jsonl")
            .lines()
            .find(|l| {
                l.contains("\"pcap/tls-handshake.pcapng\"")
                    && l.contains("\"ja4_spec\": \"t13d1516h2_8daaf6152771_e5627efa2ab1\"")
            })
            .unwrap();
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        let message = hex::decode(value["client_hello_hex"].as_str().unwrap()).unwrap();
        let mut records = vec![22, 3, 1];
        records.extend_from_slice(&u16::try_from(message.len()).unwrap().to_be_bytes());
        records.extend_from_slice(&message);
        let fp = super::super::parse_client_hello(&records)
            .unwrap()
            .fingerprints();
        assert_eq!(format!("{fp:?}"), EXPECTED);
    }
    const EXPECTED: &str = r#"TlsFingerprints { ja3: "771,4865-4866-4867-49195-49199-49196-49200-52393-52392-49171-49172-156-157-47-53,65281-51-45-5-17513-13-16-35-27-43-0-18-10-23-11-21,29-23-24,0", ja3_hash: "1c258ebef8eee2dfa3df6d8d07285af9", ja3n: "771,4865-4866-4867-49195-49199-49196-49200-52393-52392-49171-49172-156-157-47-53,0-5-10-11-13-16-18-21-23-27-35-43-45-51-17513-65281,29-23-24,0", ja3n_hash: "aa56c057ad164ec4fdcb7a5a283be9fc", ja4: "t13d1516h2_8daaf6152771_e5627efa2ab1", ja4_r: "t13d1516h2_002f,0035,009c,009d,1301,1302,1303,c013,c014,c02b,c02c,c02f,c030,cca8,cca9_0005,000a,000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01_0403,0804,0401,0503,0805,0501,0806,0601", ja4_o: "t13d1516h2_acb858a92679_8fc3c02244b2", ja4_ro: "t13d1516h2_1301,1302,1303,c02b,c02f,c02c,c030,cca9,cca8,c013,c014,009c,009d,002f,0035_ff01,0033,002d,0005,4469,000d,0010,0023,001b,002b,0000,0012,000a,0017,000b,0015_0403,0804,0401,0503,0805,0501,0806,0601", voice_id: VoiceId("tlsv1_3cfe3bd598188b97e8c7b925"), order_id: "tlso1_8250e3c1e5b4d0a87ba53569" }"#;
}
