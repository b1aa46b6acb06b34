//! TLS 1.2 and TLS 1.3 decryption over every AEAD suite a real client offers, with an external
//! key log: a loopback recording of curl against `openssl s_server`, one connection per suite
//! (`data/pcap/SOURCE.md`). The decrypted request of each connection is the one tshark decodes
//! with the same key log (`data/pcap/tshark-requests.txt`). Two more recordings cover the Linux
//! cooked link layers (v1 over IPv6 with cleartext HTTP/2, v2 with TLS 1.3), checked against
//! tshark's reading of the same files (`data/pcap/tshark-linux-cooked.txt`).

use std::path::Path;

use exitvoice_protocol::pcap::{self, ClientData};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pcap");

fn read(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(DIR).join(name)).expect("test data in the repo")
}

/// tshark's lines: (client port, cipher suite, expected request head).
fn expected() -> Vec<(u16, u16, String)> {
    let text = String::from_utf8(read("tshark-requests.txt")).expect("text");
    text.lines()
        .map(|line| {
            let mut cols = line.split('\t');
            let port = cols.next().expect("port").parse().expect("a port");
            let suite = cols.next().expect("suite").trim_start_matches("0x");
            let suite = u16::from_str_radix(suite, 16).expect("a suite");
            let mut request = cols.next().expect("request").split('|');
            let (method, target, version, headers) = (
                request.next().expect("method"),
                request.next().expect("target"),
                request.next().expect("version"),
                request.next().expect("headers"),
            );
            let head = format!(
                "{method} {target} {version}\r\n{}\r\n",
                headers.replace("\\r\\n,", "\r\n").replace("\\r\\n", "\r\n")
            );
            (port, suite, head)
        })
        .collect()
}

#[test]
fn six_suites_decrypt_to_the_requests_tshark_sees() {
    let file = read("curl-openssl-six-suites.pcapng");
    let keys = String::from_utf8(read("curl-openssl-six-suites.keys")).expect("text");
    let conns = pcap::connections(&file, Some(&keys)).expect("a capture");
    let expected = expected();
    assert_eq!(expected.len(), 6);
    assert_eq!(conns.len(), 6);
    for (port, suite, head) in expected {
        let conn = conns
            .iter()
            .find(|c| c.client.port() == port)
            .expect("a connection from the port");
        let server = conn.server_hello.as_ref().expect("a ServerHello");
        assert_eq!(server.cipher_suite, suite);
        let ClientData::Decrypted(bytes) = &conn.client_data else {
            panic!("suite {suite:#06x} not decrypted: {:?}", conn.decrypt_error);
        };
        assert_eq!(String::from_utf8_lossy(bytes), head, "suite {suite:#06x}");
    }
}

#[test]
fn without_the_key_log_nothing_is_decrypted() {
    let conns =
        pcap::connections(&read("curl-openssl-six-suites.pcapng"), None).expect("a capture");
    assert_eq!(conns.len(), 6);
    for conn in conns {
        assert_eq!(conn.client_data, ClientData::None);
        assert_eq!(conn.decrypt_error, Some(pcap::DecryptError::NoKeys));
    }
}

/// tshark's value for (capture, field) in `tshark-linux-cooked.txt`.
fn tshark_value(capture: &str, field: &str) -> String {
    let text = String::from_utf8(read("tshark-linux-cooked.txt")).expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{capture} {field} ")))
        .expect("a line for the capture and field")
        .to_owned()
}

/// Linux cooked v1 over IPv6: cleartext HTTP/2 with prior knowledge.
#[test]
fn linux_sll_ipv6_cleartext_h2() {
    let name = "curl-h2c-ipv6-linux-sll.pcap";
    let conns = pcap::connections(&read(name), None).expect("a capture");
    assert_eq!(conns.len(), 1);
    let conn = &conns[0];
    assert!(conn.client.is_ipv6() && conn.server.port() == 18080);
    assert!(conn.client_hellos.is_empty());
    let ClientData::Cleartext(bytes) = &conn.client_data else {
        panic!("not cleartext: {:?}", conn.client_data);
    };
    let frames = bytes
        .strip_prefix(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".as_slice())
        .expect("the preface");
    let mut types = Vec::new();
    let mut rest = frames;
    while let Some((header, tail)) = rest.split_at_checked(9) {
        let len =
            usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
        types.push(header[3].to_string());
        rest = tail.get(len..).expect("whole frames");
    }
    assert_eq!(types.join(","), tshark_value(name, "http2.type"));
}

/// Linux cooked v2: a TLS 1.3 connection, its ClientHello and its decrypted request.
#[test]
fn linux_sll2_tls13() {
    let name = "curl-tls13-linux-sll2.pcapng";
    let keys = String::from_utf8(read("curl-tls13-linux-sll2.keys")).expect("text");
    let conns = pcap::connections(&read(name), Some(&keys)).expect("a capture");
    assert_eq!(conns.len(), 1);
    let conn = &conns[0];
    let hello =
        exitvoice_protocol::tls::parse_client_hello(&conn.client_hellos[0]).expect("a hello");
    assert_eq!(
        hello.fingerprints().ja3_hash(),
        tshark_value(name, "tls.handshake.ja3")
    );
    let ClientData::Decrypted(bytes) = &conn.client_data else {
        panic!("not decrypted: {:?}", conn.decrypt_error);
    };
    let uri = tshark_value(name, "http.request.uri");
    assert!(bytes.starts_with(format!("GET {uri} HTTP/1.1\r\n").as_bytes()));
}

/// The nanosecond and "modified" classic pcap formats (editcap rewrites of a FoxIO capture) give
/// the same ClientHello as the original.
#[test]
fn classic_pcap_variants_read_like_the_original() {
    let original = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/ja4/pcap/badcurveball.pcap"
    ))
    .expect("the original capture");
    let hellos = |file: &[u8]| -> Vec<Vec<u8>> {
        pcap::connections(file, None)
            .expect("a capture")
            .into_iter()
            .flat_map(|c| c.client_hellos)
            .collect()
    };
    let want = hellos(&original);
    assert_eq!(want.len(), 1);
    for variant in ["badcurveball-nanosecond.pcap", "badcurveball-modified.pcap"] {
        assert_eq!(hellos(&read(variant)), want, "{variant}");
    }
}

/// TLS 1.3 resumption whose 0-RTT early data the server rejected (`openssl s_server` logged
/// "Early data was rejected"): the early record is skipped, and the client bytes are the request
/// it sent after the handshake, as tshark decodes it (`tshark-early-data.txt`, frame 27; frame
/// 19 is the rejected early data).
#[test]
fn rejected_early_data_is_not_client_application_data() {
    let keys = String::from_utf8(read("openssl-rejected-early-data.keys")).expect("text");
    let conns = pcap::connections(&read("openssl-rejected-early-data.pcapng"), Some(&keys))
        .expect("a capture");
    let tshark = String::from_utf8(read("tshark-early-data.txt")).expect("text");
    let requests: Vec<Vec<&str>> = tshark.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(requests.len(), 3);
    assert_eq!(conns.len(), 2);
    for conn in &conns {
        let port = conn.client.port().to_string();
        let mine: Vec<&Vec<&str>> = requests.iter().filter(|r| r[0] == port).collect();
        // The last request tshark sees on the connection is the one after the handshake.
        let last = mine.last().expect("a request on the connection");
        let ClientData::Decrypted(bytes) = &conn.client_data else {
            panic!("not decrypted: {:?}", conn.decrypt_error);
        };
        assert_eq!(
            String::from_utf8_lossy(bytes),
            format!("{} {} {}\r\n\r\n", last[2], last[3], last[4])
        );
    }
}
