//! QUIC client Initials in the FoxIO JA4 captures: every QUIC ClientHello that FoxIO's own Rust
//! tool reports (`data/ja4/pcap/expected-quic.jsonl`, from its insta snapshots, see
//! `data/ja4/SOURCE-pcap.md`) is found by `pcap::read` in UDP, on the same client and server
//! addresses, with the same SNI and the same published JA4 `q…`, and nothing else is.

use std::collections::BTreeMap;
use std::path::Path;

use exitvoice_protocol::pcap;
use exitvoice_protocol::tls::parse_client_hello;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ja4/pcap");

/// One expectation line: a UDP stream of FoxIO's snapshot with a JA4.
#[derive(serde::Deserialize)]
struct Expected {
    pcap: String,
    client: String,
    server: String,
    sni: Option<String>,
    ja4: String,
}

/// (client, server, sni, ja4), sorted, for one capture.
type Rows = Vec<(String, String, Option<String>, String)>;

fn expected() -> BTreeMap<String, Rows> {
    let text = std::fs::read_to_string(Path::new(DIR).join("expected-quic.jsonl"))
        .expect("expectations are in the repo");
    let mut by_pcap: BTreeMap<String, Rows> = BTreeMap::new();
    for line in text.lines() {
        let e: Expected = serde_json::from_str(line).expect("a JSON line");
        by_pcap
            .entry(e.pcap)
            .or_default()
            .push((e.client, e.server, e.sni, e.ja4));
    }
    by_pcap
}

#[test]
fn every_quic_client_hello_of_the_foxio_captures_gets_foxios_ja4() {
    let expected = expected();
    assert_eq!(
        expected.values().map(Vec::len).sum::<usize>(),
        49,
        "49 QUIC hellos in six captures (docs/quic.md, \"Reference values\")"
    );
    for (name, mut want) in expected {
        let bytes = std::fs::read(Path::new(DIR).join(&name)).expect("capture in the repo");
        let capture = pcap::read(&bytes, None).expect("readable");
        let mut got: Rows = Vec::new();
        for conn in &capture.quic {
            assert_eq!(conn.error, None, "{name}: {}", conn.client);
            let message = conn.client_hello.as_deref().expect("a complete hello");
            let hello = parse_client_hello(message).expect("the hello parses");
            got.push((
                conn.client.to_string(),
                conn.server.to_string(),
                hello.server_name().map(str::to_owned),
                hello.fingerprints().ja4().to_owned(),
            ));
        }
        got.sort();
        want.sort();
        assert_eq!(got, want, "{name}");
    }
}

/// The layout FoxIO's published capture shows in `quic-tls-handshake.pcapng`: QUIC v1, an
/// 8-byte DCID, no SCID, no token, packet number 1, and Chrome's hello scattered over 11 CRYPTO
/// frames in one Initial.
#[test]
fn chromes_scattered_crypto_frames_are_reassembled() {
    let bytes = std::fs::read(Path::new(DIR).join("quic-tls-handshake.pcapng")).expect("capture");
    let capture = pcap::read(&bytes, None).expect("readable");
    let [conn] = capture.quic.as_slice() else {
        panic!("one QUIC client, got {}", capture.quic.len());
    };
    assert_eq!(conn.first_frame, 1);
    assert_eq!(conn.version, exitvoice_protocol::quic::Version::V1);
    assert_eq!(conn.first_dcid_len, 8);
    let [packet] = conn.packets.as_slice() else {
        panic!("one Initial, got {}", conn.packets.len());
    };
    assert_eq!(packet.packet_number, 1);
    assert_eq!((packet.scid_len, packet.token_len), (0, 0));
    assert_eq!(packet.crypto_frames, 11);
}
