//! The FoxIO JA4 capture suite through `pcap::read`: every TCP ClientHello that tshark found in
//! each capture (`data/ja4/pcap/expected-clienthellos.jsonl`, see `data/ja4/SOURCE-pcap.md`)
//! is found again, byte for byte, and nothing else is; and the JA3 and JA4 of the hellos read
//! from each capture are the expected ones (JA4 per the written spec, see the manifest's
//! divergence notes for `tls-non-ascii-alpn.pcapng`).

use std::collections::BTreeMap;
use std::path::Path;

use exitvoice_protocol::pcap::{self, PcapConnection};
use exitvoice_protocol::tls::parse_client_hello;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ja4/pcap");

/// One expectation line.
#[derive(serde::Deserialize)]
struct Expected {
    pcap: String,
    client_hello_hex: String,
    ja3: String,
    ja4_spec: String,
}

fn expected_lines() -> Vec<Expected> {
    let text = std::fs::read_to_string(Path::new(DIR).join("expected-clienthellos.jsonl"))
        .expect("expectations are in the repo");
    text.lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

fn expected() -> BTreeMap<String, Vec<String>> {
    let mut by_pcap: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in expected_lines() {
        by_pcap.entry(e.pcap).or_default().push(e.client_hello_hex);
    }
    by_pcap
}

/// The handshake message carried by raw records: record bodies concatenated.
fn handshake_message(records: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = records;
    while let Some((header, tail)) = rest.split_at_checked(5) {
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        let (body, tail) = tail.split_at_checked(len).expect("whole records");
        out.extend_from_slice(body);
        rest = tail;
    }
    out
}

fn captures() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(DIR)
        .expect("the capture folder")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".pcap") || n.ends_with(".pcapng") || n.ends_with(".cap"))
        .collect();
    names.sort();
    names
}

fn hellos(conns: &[PcapConnection]) -> Vec<String> {
    conns
        .iter()
        .flat_map(|c| {
            c.client_hellos
                .iter()
                .map(|h| hex::encode(handshake_message(h)))
        })
        .collect()
}

#[test]
fn every_tcp_client_hello_of_the_foxio_captures_is_found() {
    let expected = expected();
    let names = captures();
    assert_eq!(names.len(), 25, "all FoxIO captures are in the repo");
    let mut failures = Vec::new();
    let mut total = 0;
    for name in &names {
        let file = std::fs::read(Path::new(DIR).join(name)).expect("readable capture");
        let capture = pcap::read(&file, None).expect("a capture");
        assert_eq!(capture.stopped, None, "{name} reads to the end");
        let mut got = hellos(&capture.connections);
        got.sort();
        let mut want = expected.get(name).cloned().unwrap_or_default();
        want.sort();
        total += got.len();
        if got != want {
            failures.push(format!(
                "{name}: got {} ClientHellos, want {}",
                got.len(),
                want.len()
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(total, 156);
}

#[test]
fn ja3_and_ja4_of_every_capture_match_the_references() {
    let mut want: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for e in expected_lines() {
        want.entry(e.pcap).or_default().push((e.ja3, e.ja4_spec));
    }
    let mut failures = Vec::new();
    for name in captures() {
        let file = std::fs::read(Path::new(DIR).join(&name)).expect("readable capture");
        let conns = pcap::connections(&file, None).expect("a capture");
        let mut got: Vec<(String, String)> = conns
            .iter()
            .flat_map(|c| c.client_hellos.iter())
            .map(|records| {
                let hello = parse_client_hello(records).expect("the hello parses");
                let fp = hello.fingerprints();
                (fp.ja3_hash().to_owned(), fp.ja4().to_owned())
            })
            .collect();
        got.sort();
        let mut expected = want.remove(&name).unwrap_or_default();
        expected.sort();
        if got != expected {
            failures.push(format!("{name}: got {got:?}, want {expected:?}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The ALPN protocol each server chose, as tshark reads it from the ServerHello or (with the
/// embedded keys) the EncryptedExtensions (`tshark-server-alpn.txt`).
#[test]
fn server_alpn_matches_tshark() {
    let text = std::fs::read_to_string(Path::new(DIR).join("tshark-server-alpn.txt"))
        .expect("tshark output in the repo");
    let mut checked = 0;
    for line in text.lines() {
        let (name, list) = line.split_once(' ').expect("capture and list");
        let mut want: Vec<&str> = list.split(',').filter(|s| !s.is_empty()).collect();
        want.sort_unstable();
        let file = std::fs::read(Path::new(DIR).join(name)).expect("readable capture");
        let conns = pcap::connections(&file, None).expect("a capture");
        let mut got: Vec<String> = conns
            .iter()
            .filter_map(|c| c.server_hello.as_ref()?.alpn.as_deref())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        got.sort_unstable();
        assert_eq!(got, want, "{name}");
        checked += want.len();
    }
    assert_eq!(checked, 13);
}
