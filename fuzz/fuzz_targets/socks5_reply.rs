//! A SOCKS5 proxy's replies (method selection, RFC 1929 auth status, CONNECT reply with its
//! bound address; RFC 1928) → `tokio-socks`, the parser `exitvoice_exits::dial::socks5` uses,
//! over the same calls it makes. Input byte 0 picks auth (bit 0) and a name (`socks5h`) or
//! address target (bit 1); byte 1 is the read size (0 = as many as asked); the rest is the
//! proxy's side.
#![no_main]

use std::net::{Ipv4Addr, SocketAddr};

use exitvoice_fuzz::{poll_ready, ScriptedStream};
use libfuzzer_sys::fuzz_target;
use tokio_socks::tcp::Socks5Stream;

fuzz_target!(|data: &[u8]| {
    let [mode, chunk, reply @ ..] = data else {
        return;
    };
    let chunk = if *chunk == 0 {
        usize::MAX
    } else {
        usize::from(*chunk)
    };
    let stream = ScriptedStream::new(reply, chunk);
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 443));
    let name = ("echo.example", 443);
    let result = match (mode & 1 != 0, mode & 2 != 0) {
        (false, false) => poll_ready(Socks5Stream::connect_with_socket(stream, addr)),
        (false, true) => poll_ready(Socks5Stream::connect_with_socket(stream, name)),
        (true, false) => poll_ready(Socks5Stream::connect_with_password_and_socket(
            stream,
            addr,
            "fuzz-user",
            "fuzz-pass",
        )),
        (true, true) => poll_ready(Socks5Stream::connect_with_password_and_socket(
            stream,
            name,
            "fuzz-user",
            "fuzz-pass",
        )),
    }
    .expect("SOCKS5 over an always-ready stream did not finish");
    match result {
        Ok(stream) => {
            // RFC 1928 section 6: a successful reply starts with VER 5, REP 0.
            let _ = stream.target_addr();
            assert!(reply.first() == Some(&5));
        }
        Err(err) => {
            let _ = err.to_string();
        }
    }
});
