//! TLS 1.3 decryption with the key logs embedded in two FoxIO captures (pcapng Decryption
//! Secrets Blocks): the client's decrypted stream starts with the HTTP/2 preface, and its HTTP/2
//! frame types are the ones tshark 4.0.17 decodes from the same capture with the same keys
//! (`data/ja4/pcap/tshark-h2-client-frame-types.txt`, command in `data/ja4/SOURCE-pcap.md`).

use std::path::Path;

use exitvoice_protocol::pcap::{self, ClientData, DecryptError, ServerChoice};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ja4/pcap");
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn capture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(DIR).join(name)).expect("capture in the repo")
}

/// tshark's client frame types for `name`.
fn tshark_types(name: &str) -> Vec<u8> {
    let text = std::fs::read_to_string(Path::new(DIR).join("tshark-h2-client-frame-types.txt"))
        .expect("tshark expectations in the repo");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .expect("a line for the capture");
    line.split(',')
        .map(|t| t.parse().expect("a frame type"))
        .collect()
}

/// HTTP/2 frame types (RFC 9113 section 4.1) after the preface.
fn frame_types(mut bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while let Some((header, rest)) = bytes.split_at_checked(9) {
        let len =
            usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
        let Some((_, rest)) = rest.split_at_checked(len) else {
            break;
        };
        types.push(header[3]);
        bytes = rest;
    }
    types
}

fn decrypted_h2(name: &str) -> Vec<u8> {
    let conns = pcap::connections(&capture(name), None).expect("a capture");
    let decrypted: Vec<&[u8]> = conns
        .iter()
        .filter_map(|c| match &c.client_data {
            ClientData::Decrypted(bytes) => Some(bytes.as_slice()),
            _ => None,
        })
        .collect();
    assert_eq!(decrypted.len(), 1, "{name}: one decrypted TCP connection");
    let conn = conns
        .iter()
        .find(|c| matches!(c.client_data, ClientData::Decrypted(_)))
        .expect("the decrypted connection");
    assert_eq!(conn.server.port(), 443);
    assert_eq!(
        conn.server_hello,
        Some(ServerChoice {
            version: 0x0304,
            cipher_suite: 0x1301,
            // From the EncryptedExtensions, decrypted with SERVER_HANDSHAKE_TRAFFIC_SECRET.
            alpn: Some(b"h2".to_vec()),
        })
    );
    decrypted[0].to_vec()
}

#[test]
fn chrome_116_youtube_h2_is_decrypted() {
    let name = "http2-with-cookies.pcapng";
    let bytes = decrypted_h2(name);
    let body = bytes
        .strip_prefix(PREFACE)
        .expect("starts with the HTTP/2 preface");
    assert_eq!(frame_types(body), tshark_types(name));
}

#[test]
fn chrome_107_cloudflare_h2_is_decrypted() {
    let name = "chrome-cloudflare-quic-with-secrets.pcapng";
    let bytes = decrypted_h2(name);
    let body = bytes
        .strip_prefix(PREFACE)
        .expect("starts with the HTTP/2 preface");
    assert_eq!(frame_types(body), tshark_types(name));
}

/// The capture with its Decryption Secrets Blocks removed, and the key log text they held.
fn without_secrets(file: &[u8]) -> (Vec<u8>, String) {
    let mut out = Vec::new();
    let mut keys = String::new();
    let mut rest = file;
    while let Some((head, _)) = rest.split_at_checked(8) {
        let kind = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
        let len = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes")) as usize;
        let (block, tail) = rest.split_at(len);
        if kind == 0x0000_000a {
            let secrets_len = u32::from_le_bytes(block[12..16].try_into().expect("4 bytes"));
            keys.push_str(
                std::str::from_utf8(&block[16..16 + secrets_len as usize]).expect("text"),
            );
        } else {
            out.extend_from_slice(block);
        }
        rest = tail;
    }
    (out, keys)
}

#[test]
fn an_external_key_log_decrypts_a_capture_without_embedded_keys() {
    let name = "http2-with-cookies.pcapng";
    let embedded = decrypted_h2(name);
    let (stripped, keys) = without_secrets(&capture(name));
    assert!(
        keys.contains("CLIENT_TRAFFIC_SECRET_0 "),
        "the block held a key log"
    );
    let conns = pcap::connections(&stripped, None).expect("a capture");
    let conn = conns.first().expect("a connection");
    assert_eq!(conn.client_data, ClientData::None);
    assert_eq!(conn.decrypt_error, Some(DecryptError::NoKeys));
    let conns = pcap::connections(&stripped, Some(&keys)).expect("a capture");
    let conn = conns.first().expect("a connection");
    assert_eq!(conn.client_data, ClientData::Decrypted(embedded));
}

#[test]
fn a_wrong_traffic_secret_is_a_typed_error() {
    let (stripped, keys) = without_secrets(&capture("http2-with-cookies.pcapng"));
    let wrong: String = keys
        .lines()
        .map(|line| match line.strip_prefix("CLIENT_TRAFFIC_SECRET_0 ") {
            Some(rest) => {
                let random = rest.split(' ').next().expect("a random");
                format!("CLIENT_TRAFFIC_SECRET_0 {random} {}\n", "11".repeat(32))
            }
            None => format!("{line}\n"),
        })
        .collect();
    let conns = pcap::connections(&stripped, Some(&wrong)).expect("a capture");
    let conn = conns.first().expect("a connection");
    assert_eq!(conn.client_data, ClientData::None);
    assert!(matches!(
        conn.decrypt_error,
        Some(DecryptError::NothingDecrypted { .. })
    ));
}
