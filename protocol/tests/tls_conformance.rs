//! Conformance over the 172 public ClientHello vectors in `tests/data/ja4/clienthellos.jsonl`
//! (FoxIO-LLC/ja4 captures; expected JA3 from tshark, JA4 family from the written spec; see
//! `tests/data/ja4/SOURCE.md`).
//!
//! Every vector is parsed three ways (bare handshake message, one record, many small records),
//! and JA3, the JA3 string, JA3N, JA4, JA4_r, JA4_o and JA4_ro must equal the expected values.
//! Voice relationships are asserted only where the vectors' own independent values prove them.

use std::collections::{BTreeMap, BTreeSet};

use exitvoice_protocol::tls::{echo, parse_client_hello, scan, HelloScan, TlsFingerprints};
use serde::Deserialize;

#[derive(Deserialize)]
struct Vector {
    pcap: String,
    frame: u64,
    transport: String,
    client_hello_hex: String,
    ja3: String,
    ja3_full: String,
    ja3n: String,
    ja4_spec: String,
    ja4_r_spec: String,
    ja4_o_spec: String,
    ja4_ro_spec: String,
}

fn vectors() -> Vec<Vector> {
    let text = include_str!("data/ja4/clienthellos.jsonl");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("vector line is JSON"))
        .collect()
}

/// Wraps a handshake message into records of at most `size` bytes.
fn records(message: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in message.chunks(size) {
        out.extend_from_slice(&[22, 3, 1]);
        out.extend_from_slice(&u16::try_from(chunk.len()).unwrap().to_be_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

fn fingerprints(bytes: &[u8], what: &str) -> TlsFingerprints {
    parse_client_hello(bytes)
        .unwrap_or_else(|e| panic!("{what}: {e}"))
        .fingerprints()
}

#[test]
fn all_172_vectors_match_expected_fingerprints() {
    let vectors = vectors();
    assert_eq!(vectors.len(), 172);
    let mut quic = 0;
    for v in &vectors {
        let what = format!("{} frame {}", v.pcap, v.frame);
        let message = hex::decode(&v.client_hello_hex).expect("hex");
        let fp = fingerprints(&message, &what);
        assert_eq!(fp.ja3(), v.ja3_full, "{what}: JA3 string");
        assert_eq!(fp.ja3_hash(), v.ja3, "{what}: JA3");
        assert_eq!(fp.ja3n_hash(), v.ja3n, "{what}: JA3N");
        assert_eq!(fp.ja4(), v.ja4_spec, "{what}: JA4");
        assert_eq!(fp.ja4_r(), v.ja4_r_spec, "{what}: JA4_r");
        assert_eq!(fp.ja4_o(), v.ja4_o_spec, "{what}: JA4_o");
        assert_eq!(fp.ja4_ro(), v.ja4_ro_spec, "{what}: JA4_ro");
        assert!(fp.voice_id().starts_with("tlsv2_") && fp.voice_id().len() == 30);
        assert!(fp.order_id().starts_with("tlso2_") && fp.order_id().len() == 30);
        if v.transport == "quic" {
            quic += 1;
        }

        // The same message in one record and in many small records: identical results, and
        // `scan` finds exactly the records.
        for size in [16_384, 97, 1] {
            let wrapped = records(&message, size);
            assert_eq!(
                scan(&wrapped),
                HelloScan::Complete { len: wrapped.len() },
                "{what}: scan, records of {size}"
            );
            assert_eq!(
                fingerprints(&wrapped, &what),
                fp,
                "{what}: records of {size}"
            );
        }
    }
    assert_eq!(quic, 16);
}

/// The JA3 string without the extensions that the voice leaves out on purpose (padding 21,
/// pre_shared_key 41, early_data 42) and with the extension field sorted.
fn ja3_without_volatile(ja3_full: &str) -> String {
    let mut fields: Vec<String> = ja3_full.split(',').map(str::to_owned).collect();
    let mut exts: Vec<u32> = fields[2]
        .split('-')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .filter(|e| ![21, 41, 42].contains(e))
        .collect();
    exts.sort_unstable();
    fields[2] = exts
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join("-");
    fields.join(",")
}

/// Chrome permutes its extension order per connection. Within one capture, hellos whose
/// independent JA3N and JA4_r agree but whose JA3 differs are the same stack with another
/// permutation (and other GREASE values, randoms, key shares): one voice, different order ids.
#[test]
fn permuted_chrome_hellos_share_one_voice() {
    let mut groups: BTreeMap<(String, String, String), Vec<(String, TlsFingerprints)>> =
        BTreeMap::new();
    for v in vectors() {
        let message = hex::decode(&v.client_hello_hex).unwrap();
        let fp = fingerprints(&message, &v.pcap);
        groups
            .entry((v.pcap.clone(), v.ja3n.clone(), v.ja4_r_spec.clone()))
            .or_default()
            .push((v.ja3.clone(), fp));
    }
    let mut permuted_groups = 0;
    let mut permuted_hellos = 0;
    for ((pcap, _, ja4_r), members) in &groups {
        let ja3s: BTreeSet<&String> = members.iter().map(|(ja3, _)| ja3).collect();
        if ja3s.len() < 2 {
            continue;
        }
        permuted_groups += 1;
        permuted_hellos += members.len();
        let voices: BTreeSet<&str> = members.iter().map(|(_, fp)| fp.voice_id()).collect();
        assert_eq!(
            voices.len(),
            1,
            "{pcap} {ja4_r}: one voice across permutations"
        );
        let orders: BTreeSet<&str> = members.iter().map(|(_, fp)| fp.order_id()).collect();
        assert_eq!(
            orders.len(),
            ja3s.len(),
            "{pcap} {ja4_r}: order id follows the wire order"
        );
    }
    // tls-handshake, tls-sni and tls3 each hold a permuting Chrome.
    assert!(
        permuted_groups >= 3,
        "found {permuted_groups} permuted groups"
    );
    assert!(
        permuted_hellos >= 100,
        "found {permuted_hellos} permuted hellos"
    );
}

/// Hellos that differ in anything the voice keeps (ciphers, extension set apart from padding /
/// PSK / early data, groups, point formats: all visible in the JA3 string) never share a voice.
#[test]
fn different_stacks_have_different_voices() {
    let mut by_voice: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for v in vectors() {
        let message = hex::decode(&v.client_hello_hex).unwrap();
        let fp = fingerprints(&message, &v.pcap);
        by_voice
            .entry(fp.voice_id().to_owned())
            .or_default()
            .insert(ja3_without_volatile(&v.ja3_full));
    }
    for (voice, ja3s) in &by_voice {
        assert_eq!(ja3s.len(), 1, "{voice} covers {ja3s:?}");
    }
    assert!(by_voice.len() >= 10, "{} voices", by_voice.len());
}

/// JA4_r without its a-part and without 0x0015 (padding) and 0x0029 (pre_shared_key).
fn without_padding_and_psk(ja4_r: &str) -> String {
    let (_, rest) = ja4_r.split_once('_').unwrap();
    rest.split('_')
        .map(|part| {
            part.split(',')
                .filter(|v| *v != "0015" && *v != "0029")
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join("_")
}

/// A PSK (resumption) hello and a fresh hello of the same Chrome share a voice: `latest.pcapng`
/// and `tls3.pcapng` hold both (`…_9b887d9acb53` has pre_shared_key, `…_e5627efa2ab1` not;
/// same JA4_r apart from 0x0029 replacing the padding 0x0015).
#[test]
fn resumption_keeps_the_voice() {
    let mut checked = 0;
    let vectors = vectors();
    for psk in vectors
        .iter()
        .filter(|v| v.ja4_spec.ends_with("_9b887d9acb53"))
    {
        let psk_hello_bytes = hex::decode(&psk.client_hello_hex).unwrap();
        let psk_hello = parse_client_hello(&psk_hello_bytes).unwrap();
        assert!(psk_hello.resumed(), "{} frame {}", psk.pcap, psk.frame);
        let psk_voice = psk_hello.fingerprints().voice_id().to_owned();
        let fresh: Vec<&Vector> = vectors
            .iter()
            .filter(|v| {
                v.pcap == psk.pcap
                    && !v.ja4_r_spec.contains(",0029")
                    && without_padding_and_psk(&v.ja4_r_spec)
                        == without_padding_and_psk(&psk.ja4_r_spec)
            })
            .collect();
        for f in fresh {
            let bytes = hex::decode(&f.client_hello_hex).unwrap();
            let hello = parse_client_hello(&bytes).unwrap();
            assert!(!hello.resumed());
            assert_eq!(hello.fingerprints().voice_id(), psk_voice, "{}", f.pcap);
            checked += 1;
        }
    }
    assert!(checked >= 2, "checked {checked}");
}

/// The serialized form (what `inspect` prints) is the ten strings under their names, in order;
/// equality, `Debug` and the echo see the same strings.
#[test]
fn serialized_form_is_the_ten_named_strings() {
    let all = vectors();
    let (v, w) = (&all[0], &all[1]);
    let fp = fingerprints(&hex::decode(&v.client_hello_hex).unwrap(), "first vector");
    let json = serde_json::to_string(&fp).unwrap();
    let expected = format!(
        r#"{{"ja3":"{}","ja3_hash":"{}","ja3n":"{}","ja3n_hash":"{}","ja4":"{}","ja4_r":"{}","ja4_o":"{}","ja4_ro":"{}","voice_id":"{}","order_id":"{}"}}"#,
        v.ja3_full,
        v.ja3,
        fp.ja3n(),
        v.ja3n,
        v.ja4_spec,
        v.ja4_r_spec,
        v.ja4_o_spec,
        v.ja4_ro_spec,
        fp.voice_id(),
        fp.order_id()
    );
    assert_eq!(json, expected);
    assert!(format!("{fp:?}").contains(&format!("ja4_ro: {:?}", v.ja4_ro_spec)));

    let e = echo(&parse_client_hello(&hex::decode(&v.client_hello_hex).unwrap()).unwrap());
    assert_eq!(
        [
            &e.ja3,
            &e.ja3_hash,
            &e.ja3n,
            &e.ja3n_hash,
            &e.ja4,
            &e.ja4_r,
            &e.ja4_o,
            &e.ja4_ro
        ],
        [
            fp.ja3(),
            fp.ja3_hash(),
            fp.ja3n(),
            fp.ja3n_hash(),
            fp.ja4(),
            fp.ja4_r(),
            fp.ja4_o(),
            fp.ja4_ro()
        ]
    );
    assert_eq!(
        (e.voice_id.0.as_str(), e.order_id.as_str()),
        (fp.voice_id(), fp.order_id())
    );

    let other = fingerprints(&hex::decode(&w.client_hello_hex).unwrap(), "second vector");
    assert_eq!(fp.clone(), fp);
    assert_eq!(
        v.ja3_full != w.ja3_full,
        fp != other,
        "JA3 {} vs {}",
        v.ja3_full,
        w.ja3_full
    );
}

#[test]
fn echo_fills_every_field() {
    let v = &vectors()[0];
    let message = hex::decode(&v.client_hello_hex).unwrap();
    let hello = parse_client_hello(&message).unwrap();
    let e = echo(&hello);
    assert_eq!(e.ja3_hash, v.ja3);
    assert_eq!(e.ja4, v.ja4_spec);
    assert!(!e.resumed);
    assert!(e.detail.is_null(), "the detail is written on demand");
    let detail = &exitvoice_protocol::tls::detail(&hello).to_value();
    assert_eq!(detail["legacy_version"]["value"], 0x0303);
    assert_eq!(detail["legacy_version"]["name"], "TLSv1.2");
    assert_eq!(detail["cipher_suites"][0]["name"], "GREASE");
    assert_eq!(detail["cipher_suites"][1]["value"], 0x1301);
    let exts = detail["extensions"].as_array().unwrap();
    assert_eq!(exts.len(), 17);
    assert_eq!(exts[1]["type"]["name"], "server_name");
    assert_eq!(exts[1]["body"]["value"][0]["name"], "bad.curveballtest.com");
    assert_eq!(hello.server_name(), Some("bad.curveballtest.com"));
    assert_eq!(hello.alpn_protocols(), ["h2", "http/1.1"]);
}
