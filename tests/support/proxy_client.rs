//! A client of the broker's forward proxy, by hand: `CONNECT` with Basic credentials, the
//! tunnel after `200`, and how long until the broker closes it.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// `user:password` as HTTP Basic credentials.
pub fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

/// A `CONNECT` to `target` as `user` with `token`.
pub fn connect(user: &str, token: &str, target: &str) -> Vec<u8> {
    format!(
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: Basic {}\r\n\r\n",
        basic(user, token)
    )
    .into_bytes()
}

/// Opens a tunnel through `proxy` to `target` as `user`: the stream after `200`.
pub fn tunnel(proxy: SocketAddr, user: &str, token: &str, target: &str) -> TcpStream {
    let mut stream = TcpStream::connect(proxy).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(&connect(user, token, target)).unwrap();
    let mut head = Vec::new();
    let mut byte = [0; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).unwrap(),
            1,
            "the proxy closed: {head:?}"
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    stream
}

/// How long until `stream` is closed by the other side (EOF or reset), at most `limit`.
pub fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut buf = [0; 64];
    while started.elapsed() < limit {
        match stream.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(started.elapsed()),
        }
    }
    None
}
