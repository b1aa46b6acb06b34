//! A capture file → `pcap::read` (pcap/pcapng, link, IP, TCP reassembly, key log, decryption)
//! → each connection's ClientHellos and client bytes through the TLS, HTTP/2 and HTTP/1
//! parsers, and each QUIC client's reassembled ClientHello through the TLS parser, as
//! `exitvoice inspect` runs them.
#![no_main]

use exitvoice_protocol::{h1, h2, pcap, quic, tls};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pcap::is_capture(data);
    let Ok(capture) = pcap::read(data, None) else {
        return;
    };
    assert!(capture.connections.len() <= capture.frames);
    assert!(capture.quic.len() <= capture.frames);
    for conn in &capture.quic {
        if let Some(hello) = conn.client_hello.as_deref().and_then(|h| tls::parse_client_hello(h).ok()) {
            let _ = hello.fingerprints();
            let _ = quic::transport_parameters(&hello);
        }
    }
    for conn in &capture.connections {
        for hello in &conn.client_hellos {
            if let Ok(hello) = tls::parse_client_hello(hello) {
                let _ = hello.fingerprints();
            }
        }
        if let Some(bytes) = conn.client_data.bytes() {
            let _ = pcap::is_http_start(bytes);
            if let Ok(prefix) = h2::parse_prefix(bytes) {
                let _ = h2::akamai_fingerprint(&prefix);
                let _ = h2::voice_id(&prefix);
            }
            if let Ok(head) = h1::parse_head(bytes) {
                let _ = h1::voice_id(&head);
            }
        }
    }
});
