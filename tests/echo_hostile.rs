//! Hostile and broken peers: silence, half a record, 1 MB of garbage, a 70 KiB ClientHello, and
//! a client that disconnects mid-handshake. Each is closed within the handshake deadline (1 s
//! here), nothing panics, every one leaves an observation with its failure reason, and the
//! open-connection gauge comes back down.
//!
//! Run with `cargo test --test echo_hostile`.

mod echo_support;

use std::time::{Duration, Instant};

use echo_support::{client_hello, curl, EchoServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The handshake deadline the server runs with in these tests.
const DEADLINE: Duration = Duration::from_secs(1);
/// Slack on top of the deadline for a loaded 2-core machine (the suite runs test binaries side
/// by side): a close this late still shows the deadline at work, as nothing else would close
/// these connections before the 60 s idle timeout.
const SLACK: Duration = Duration::from_secs(4);

/// Writes `bytes` (ignoring errors: the server may close first), then reads until the server
/// closes; returns how long after connecting the close came.
async fn closed_after(port: u16, bytes: &[u8]) -> Duration {
    let start = Instant::now();
    let mut tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let _ = tcp.write_all(bytes).await;
    let mut sink = vec![0_u8; 64 * 1024];
    let read_until_close = async {
        loop {
            match tcp.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(DEADLINE + SLACK + SLACK, read_until_close)
        .await
        .expect("the server closed the connection");
    start.elapsed()
}

/// Deterministic pseudo-random bytes (xorshift), so a failure can be replayed.
fn garbage(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_be_bytes()[0]
        })
        .collect()
}

/// A ClientHello handshake message announcing `len` body bytes, split into maximal records.
fn oversized_hello(len: usize) -> Vec<u8> {
    let len24 = u32::try_from(len).expect("fits").to_be_bytes();
    let mut message = vec![0x01, len24[1], len24[2], len24[3], 0x03, 0x03];
    message.resize(4 + len, 0x00);
    let mut wire = Vec::new();
    for fragment in message.chunks(16_384) {
        let flen = u16::try_from(fragment.len()).expect("record").to_be_bytes();
        wire.extend([0x16, 0x03, 0x01, flen[0], flen[1]]);
        wire.extend(fragment);
    }
    wire
}

#[tokio::test]
async fn broken_peers_are_closed_within_the_deadline_and_counted() {
    let server = EchoServer::start(&["--handshake-timeout", "1s"]);
    let port = server.port;
    let hello = client_hello(&server);

    let silent = closed_after(port, b"").await;
    assert!(
        silent >= DEADLINE - Duration::from_millis(100),
        "{silent:?}"
    );
    assert!(silent < DEADLINE + SLACK, "{silent:?}");

    let half = closed_after(port, &hello[..hello.len() / 2]).await;
    assert!(half >= DEADLINE - Duration::from_millis(100), "{half:?}");
    assert!(half < DEADLINE + SLACK, "{half:?}");

    let noise = closed_after(port, &garbage(1 << 20)).await;
    assert!(noise < DEADLINE + SLACK, "{noise:?}");

    // Refused as soon as the length is read, not at the deadline: the stored reason says so
    // (`hello_too_large`, not `hello_timeout`; checked below), whatever the load.
    let big = closed_after(port, &oversized_hello(70 * 1024)).await;
    assert!(big < DEADLINE + SLACK, "{big:?}");

    // A full hello, part of the server's answer read, then the client goes away.
    let start = Instant::now();
    let mut tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    tcp.write_all(&hello).await.expect("send hello");
    let mut first = [0_u8; 5];
    tcp.read_exact(&mut first)
        .await
        .expect("server hello header");
    assert_eq!(first[0], 0x16, "a handshake record came back");
    drop(tcp);
    assert!(start.elapsed() < DEADLINE + SLACK);

    let rows = server.rows_until(|rows| rows.len() >= 5).await;
    let failures: Vec<&str> = rows.iter().filter_map(|r| r.failure.as_deref()).collect();
    assert_eq!(rows.len(), 5, "{failures:?}");
    assert!(failures[0].starts_with("hello_timeout"), "{failures:?}");
    assert!(failures[1].starts_with("hello_timeout"), "{failures:?}");
    assert!(failures[2].starts_with("hello_invalid"), "{failures:?}");
    assert!(failures[3].starts_with("hello_too_large"), "{failures:?}");
    assert!(failures[4].starts_with("tls_"), "{failures:?}");
    assert!(rows[0].hello.is_empty());
    assert_eq!(
        rows[1].hello,
        &hello[..hello.len() / 2],
        "the partial hello is kept"
    );
    assert_eq!(rows[4].hello, hello, "the whole hello is kept");
    assert!(rows[4].summary["tls"]["ja4"].is_string());

    let health = server.wait_open_zero(Duration::from_secs(5));
    assert_eq!(
        health["connections"]["open"], 1,
        "only the /healthz connection: {health}"
    );
    assert_eq!(health["handshakes"]["failures"]["hello_timeout"], 2);
    assert_eq!(health["handshakes"]["failures"]["hello_invalid"], 1);
    assert_eq!(health["handshakes"]["failures"]["hello_too_large"], 1);

    // Still serving.
    let out = curl(&["-sk", "--http2", &server.url("/api/clean")]);
    assert!(out.status.success());
    assert!(!server.stderr().contains("panicked"), "{}", server.stderr());
}
