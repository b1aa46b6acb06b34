//! Run with `cargo run -p exitvoice-protocol --example pcap_voices -- CAPTURE [SSLKEYLOGFILE]`.
//!
//! Reads a pcap or pcapng file, and prints one line per TCP connection: the endpoints, the JA4
//! and TLS voice of its ClientHello, and the Akamai fingerprint and HTTP/2 voice of the client's
//! HTTP/2 bytes when the capture is cleartext or carries TLS keys (embedded in a pcapng
//! Decryption Secrets Block, or in the key log file given as the second argument).

use exitvoice_protocol::{h2, pcap, tls};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        return Err("usage: pcap_voices CAPTURE [SSLKEYLOGFILE]".into());
    };
    let keylog = args.next().map(std::fs::read_to_string).transpose()?;
    let file = std::fs::read(&path)?;
    for conn in pcap::connections(&file, keylog.as_deref())? {
        let tls = conn
            .client_hellos
            .first()
            .and_then(|records| tls::parse_client_hello(records).ok())
            .map(|hello| hello.fingerprints());
        let h2 = conn
            .client_data
            .bytes()
            .filter(|bytes| bytes.starts_with(h2::PREFACE))
            .map(|bytes| h2::parse_prefix(bytes).unwrap_or_else(|error| *error.partial));
        println!(
            "{} -> {}  ja4={}  tls={}  akamai={}  h2={}",
            conn.client,
            conn.server,
            tls.as_ref().map_or("-", |fp| fp.ja4()),
            tls.as_ref()
                .map_or("-".into(), |fp| fp.voice_id().to_owned()),
            h2.as_ref().map_or("-".into(), h2::akamai_fingerprint),
            h2.as_ref()
                .map_or("-".into(), |p| h2::voice_id(p).to_string()),
        );
    }
    Ok(())
}
