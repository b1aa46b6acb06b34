//! The Salesforce JA3 Zeek suite: the JA3 of the ClientHello read from each trace is the one in
//! Zeek's baseline `ssl.log` (last column), read from the copied baseline files
//! (`data/ja3-salesforce/SOURCE.md`).

use std::path::Path;

use exitvoice_protocol::pcap;
use exitvoice_protocol::tls::parse_client_hello;

const DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/ja3-salesforce/testing"
);

/// The `ja3` column of the single connection in a Zeek `ssl.log`.
fn zeek_ja3(test: &str) -> String {
    let log = std::fs::read_to_string(Path::new(DIR).join("Baseline").join(test).join("ssl.log"))
        .expect("baseline in the repo");
    let fields: Vec<&str> = log
        .lines()
        .find(|l| l.starts_with("#fields"))
        .expect("a #fields line")
        .split('\t')
        .skip(1)
        .collect();
    let column = fields
        .iter()
        .position(|f| *f == "ja3")
        .expect("a ja3 column");
    let rows: Vec<&str> = log.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 1, "one connection in {test}");
    rows[0]
        .split('\t')
        .nth(column)
        .expect("the ja3 field")
        .to_owned()
}

fn ja3_of_trace(trace: &str) -> Vec<String> {
    let file = std::fs::read(Path::new(DIR).join("Traces").join(trace)).expect("trace in the repo");
    pcap::connections(&file, None)
        .expect("a capture")
        .iter()
        .flat_map(|c| c.client_hellos.iter())
        .map(|h| {
            parse_client_hello(h)
                .expect("the hello parses")
                .fingerprints()
                .ja3_hash()
                .to_owned()
        })
        .collect()
}

#[test]
fn chrome_trace_gives_zeeks_ja3() {
    let want = zeek_ja3("ja3-tests.chrome_test1");
    assert_eq!(want, "14eff09463c9d6dc6e14e954eba239c2");
    assert_eq!(ja3_of_trace("ssl-chrome.pcap"), vec![want]);
}

#[test]
fn curl_trace_gives_zeeks_ja3() {
    let want = zeek_ja3("ja3-tests.curl_test1");
    assert_eq!(want, "2a26b1a62e40d25d4de3babc9d532f30");
    assert_eq!(ja3_of_trace("ssl-curl.pcap"), vec![want]);
}
