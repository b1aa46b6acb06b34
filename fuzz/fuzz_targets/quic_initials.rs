//! A UDP payload → `quic::ClientInitials` (long header, Initial keys, header protection, AEAD,
//! coalesced packets, frames, CRYPTO reassembly) → the reassembled ClientHello through the TLS
//! parser and the transport parameter decoder, as `exitvoice inspect` runs them. The input is
//! split in two datagrams where its first byte says, to exercise reassembly across datagrams.
#![no_main]

use exitvoice_protocol::{quic, tls};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    // 0 keeps the whole input as one datagram; n cuts it after 16·n bytes.
    let at = match split {
        0 => rest.len(),
        n => (usize::from(n) * 16).min(rest.len()),
    };
    let (first, second) = rest.split_at(at);
    let Ok(mut initials) = quic::ClientInitials::start(first) else {
        let _ = quic::decode_transport_parameters(rest);
        return;
    };
    let _ = initials.push(second);
    assert!(initials.packets().len() <= quic::MAX_INITIAL_PACKETS);
    if let Some(message) = initials.client_hello() {
        assert!(message.len() <= quic::MAX_CRYPTO_BYTES);
        if let Ok(hello) = tls::parse_client_hello(message) {
            let _ = hello.fingerprints();
            let _ = quic::transport_parameters(&hello);
        }
    }
});
