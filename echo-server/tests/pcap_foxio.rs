//! The FoxIO JA4 capture suite through `pcap::read`: every TCP ClientHello that tshark found in
//! each capture (`data/ja4/pcap/expected-clienthellos.jsonl`, see `data/ja4/SOURCE-pcap.md`)
//! is found again, byte for byte, and nothing else is.

use std::collections::BTreeMap;
use std::path::Path;

use exitvoice_echo::pcap::{self, PcapConnection};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ja4/pcap");

/// One expectation line.
#[derive(serde::Deserialize)]
struct Expected {
    pcap: String,
    client_hello_hex: String,
}

fn expected() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(Path::new(DIR).join("expected-clienthellos.jsonl"))
        .expect("expectations are in the repo");
    let mut by_pcap: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let e: Expected = serde_json::from_str(line).expect("a JSON line");
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
