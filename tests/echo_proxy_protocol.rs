//! The echo behind an L4 load balancer: real haproxy in TCP mode sends a PROXY
//! protocol v1 (`send-proxy`) or v2 (`send-proxy-v2`) header, and the echo reports, stores and
//! rate-limits the original client; hostile headers from a trusted source and any header from
//! an untrusted one get typed, counted failures. Needs haproxy and curl
//! (scripts/install-test-deps.sh).

mod echo_support;
mod support;

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use echo_support::{client_config, client_hello, EchoServer};
use rustls::pki_types::ServerName;
use serde_json::Value;
use support::Proxy;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpSocket, TcpStream};

/// The client's own loopback address: not the load balancer's (127.0.0.1), so the echo can only
/// report it if it read it from the PROXY header.
const CLIENT_IP: [u8; 4] = [127, 0, 0, 9];

/// A stream that keeps a copy of every byte written before the first byte is read: the
/// ClientHello records exactly as the client sent them.
struct FirstFlight<S> {
    inner: S,
    sent: Arc<Mutex<Vec<u8>>>,
    answered: bool,
}

impl<S: AsyncRead + Unpin> AsyncRead for FirstFlight<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.answered = true;
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FirstFlight<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = poll {
            if !this.answered {
                this.sent
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend_from_slice(&buf[..written]);
            }
        }
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Connects from `CLIENT_IP` to `port` on 127.0.0.1.
async fn connect_from_client_ip(port: u16) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::from((CLIENT_IP, 0)))
        .expect("bind the client address");
    socket
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .expect("connect to haproxy")
}

/// Through haproxy: TLS to the echo, one HTTP/1.1 request; returns the client's own address,
/// the ClientHello it sent, and the echo JSON.
async fn request_through(
    server: &EchoServer,
    lb_port: u16,
    token: &str,
) -> (SocketAddr, Vec<u8>, Value) {
    let tcp = connect_from_client_ip(lb_port).await;
    let client = tcp.local_addr().expect("client address");
    let sent = Arc::new(Mutex::new(Vec::new()));
    let stream = FirstFlight {
        inner: tcp,
        sent: Arc::clone(&sent),
        answered: false,
    };
    let config = client_config(&server.cert_pem(), &[b"http/1.1"]);
    let name = ServerName::try_from("localhost").expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, stream)
        .await
        .expect("TLS through haproxy");
    let request = format!(
        "GET /api/all?token={token} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(request.as_bytes()).await.expect("request");
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response).into_owned();
    let hello = sent.lock().unwrap_or_else(PoisonError::into_inner).clone();
    (client, hello, echo_support::http1_body(&response))
}

#[tokio::test]
async fn haproxy_send_proxy_v1_and_v2_carry_the_client_address_and_the_hello_unchanged() {
    let server = EchoServer::start(&["--proxy-protocol-from", "127.0.0.1/32"]);
    for mode in ["send-proxy", "send-proxy-v2"] {
        let lb = Proxy::start("haproxy-pp", &[mode, &server.port.to_string()]);
        let token = format!("pp-{}", mode.replace('-', "_"));
        let (client, hello, echo) = request_through(&server, lb.port, &token).await;

        let peer = &echo["peer"];
        assert_eq!(peer["ip"], "127.0.0.9", "{mode}: {echo}");
        assert_eq!(peer["port"], client.port(), "{mode}: the client's own port");
        // haproxy connects to the echo from 127.0.0.1: the relay is shown beside the client.
        assert_eq!(peer["proxy"]["ip"], "127.0.0.1", "{mode}: {echo}");
        assert_ne!(peer["proxy"]["port"], client.port());
        assert_eq!(echo["token"], token.as_str());

        let row = server.row_of_token(&token).await;
        assert_eq!(row.peer, client.to_string(), "{mode}: stored by the client");
        assert!(
            !hello.is_empty() && hello[0] == 0x16,
            "{mode}: recorded a hello"
        );
        assert_eq!(
            row.hello, hello,
            "{mode}: the ClientHello reached the echo unchanged"
        );
        assert_eq!(row.failure, None);
    }
    let health = server.healthz();
    assert_eq!(health["handshakes"]["failures"], serde_json::json!({}));
    assert_eq!(health["connections"]["strikes"], 0);
}

/// Sends `wire` from 127.0.0.1 (the trusted load balancer's address), half-closes when
/// `close` says so, and waits for the server to end the connection.
async fn send_raw(port: u16, wire: &[u8], close: bool) {
    let mut tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    tcp.write_all(wire).await.expect("write");
    if close {
        tcp.shutdown().await.expect("half-close");
    }
    let mut sink = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut sink)).await;
    assert!(ended.is_ok(), "the server ended the connection");
}

/// A v2 header: signature, version 2 with `command`, `family_protocol`, then `payload`.
fn v2_header(command: u8, family_protocol: u8, payload: &[u8]) -> Vec<u8> {
    let mut header = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    header.push(0x20 | command);
    header.push(family_protocol);
    header.extend(u16::try_from(payload.len()).expect("small").to_be_bytes());
    header.extend(payload);
    header
}

/// The address block of a v2 TCP over IPv4 header: 198.51.100.9:1234 to 127.0.0.1:443.
const V2_TCP4_ADDRESSES: [u8; 12] = [198, 51, 100, 9, 127, 0, 0, 1, 0x04, 0xd2, 0x01, 0xbb];

/// The failure counters of `/healthz` once `total` PROXY failures are counted (at most 10 s).
fn failures_once(server: &EchoServer, total: u64) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let health = server.healthz();
        let failures = health["handshakes"]["failures"].clone();
        let counted: u64 = failures
            .as_object()
            .map(|map| map.values().filter_map(Value::as_u64).sum())
            .unwrap_or(0);
        if counted >= total || std::time::Instant::now() > deadline {
            return health;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn hostile_headers_from_the_trusted_source_are_typed_counted_and_no_strike() {
    let server = EchoServer::start(&[
        "--proxy-protocol-from",
        "127.0.0.1/32",
        "--handshake-timeout",
        "1s",
    ]);
    let hello = client_hello(&server);
    let port = server.port;
    // A client reaching the port directly: its ClientHello where the header belongs.
    send_raw(port, &hello, false).await;
    send_raw(port, b"PROXY TCP4 999.0.0.1 127.0.0.1 1 2\r\n", false).await;
    // Cut by the peer, and cut by the handshake deadline.
    send_raw(port, b"PROXY TCP4 198.51.100.7 127.0.0.1 5", true).await;
    send_raw(port, &v2_header(0x1, 0x11, &V2_TCP4_ADDRESSES)[..18], false).await;
    // A v2 header announcing 60,000 bytes, and a v1 line that never ends within 107 bytes.
    send_raw(port, &v2_header(0x1, 0x11, &[0; 60_000])[..64], false).await;
    send_raw(
        port,
        &[b"PROXY TCP4 ".as_slice(), &[b'7'; 150]].concat(),
        false,
    )
    .await;
    // A health check (v2 LOCAL) and a v1 UNKNOWN: no client address to report.
    send_raw(port, &v2_header(0x0, 0x00, &[]), false).await;
    send_raw(port, b"PROXY UNKNOWN\r\n", false).await;

    let health = failures_once(&server, 8);
    let failures = &health["handshakes"]["failures"];
    assert_eq!(failures["proxy_malformed"], 2, "{health}");
    assert_eq!(failures["proxy_truncated"], 2, "{health}");
    assert_eq!(failures["proxy_too_large"], 2, "{health}");
    assert_eq!(failures["proxy_local"], 2, "{health}");
    // The load balancer carries everyone's connections: its mistakes put nobody in the box.
    assert_eq!(health["connections"]["strikes"], 0, "{health}");
    let settled = server.wait_open_zero(Duration::from_secs(5));
    assert_eq!(
        settled["connections"]["open"], 1,
        "only the /healthz request is open"
    );

    let rows = server.rows_until(|rows| rows.len() >= 8).await;
    let details: Vec<&str> = rows.iter().filter_map(|r| r.failure.as_deref()).collect();
    for reason in [
        "proxy_malformed",
        "proxy_truncated",
        "proxy_too_large",
        "proxy_local",
    ] {
        assert_eq!(
            details.iter().filter(|d| d.starts_with(reason)).count(),
            2,
            "{reason} stored twice: {details:?}"
        );
    }
}

#[tokio::test]
async fn a_proxy_header_from_an_untrusted_source_is_refused_and_struck() {
    // Only 127.0.0.3 may send headers; the test connects from 127.0.0.1.
    let server = EchoServer::start(&["--proxy-protocol-from", "127.0.0.3/32"]);
    let hello = client_hello(&server);
    let spoof = [
        b"PROXY TCP4 198.51.100.9 127.0.0.1 1234 443\r\n".as_slice(),
        &hello,
    ]
    .concat();
    send_raw(server.port, &spoof, false).await;
    let mut v2 = v2_header(0x1, 0x11, &V2_TCP4_ADDRESSES);
    v2.extend(&hello);
    send_raw(server.port, &v2, false).await;

    let health = failures_once(&server, 2);
    assert_eq!(
        health["handshakes"]["failures"]["proxy_untrusted"], 2,
        "{health}"
    );
    assert_eq!(health["connections"]["strikes"], 2, "{health}");
    let rows = server.rows_until(|rows| rows.len() >= 2).await;
    assert!(
        rows.iter().all(|row| row.peer.starts_with("127.0.0.1:")),
        "stored under the TCP peer, never the claimed 198.51.100.9: {:?}",
        rows.iter().map(|row| &row.peer).collect::<Vec<_>>()
    );
}

/// Sends a v1 header naming `client`, then a real ClientHello, and says whether the echo
/// answered with TLS bytes (served) rather than a reset or a close (refused).
async fn served(port: u16, client: &str, hello: &[u8]) -> bool {
    let mut tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let header = format!("PROXY TCP4 {client} 127.0.0.1 40000 443\r\n");
    let wire = [header.as_bytes(), hello].concat();
    if tcp.write_all(&wire).await.is_err() {
        return false;
    }
    let mut first = [0_u8; 1];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut first)).await,
        Ok(Ok(1))
    )
}

#[tokio::test]
async fn the_rate_limit_is_the_header_clients_not_the_load_balancers() {
    let server = EchoServer::start(&[
        "--proxy-protocol-from",
        "127.0.0.1/32",
        "--per-ip-rate",
        "1",
        "--per-ip-burst",
        "2",
    ]);
    let hello = client_hello(&server);
    assert!(served(server.port, "198.51.100.1", &hello).await);
    assert!(served(server.port, "198.51.100.1", &hello).await);
    assert!(
        !served(server.port, "198.51.100.1", &hello).await,
        "the third connection of one client within its burst is refused"
    );
    // Another client behind the same load balancer is not held back by the first.
    assert!(served(server.port, "198.51.100.2", &hello).await);
    let health = server.healthz();
    assert_eq!(health["connections"]["rejected_rate"], 1, "{health}");
}

#[tokio::test]
async fn a_second_header_behind_the_trusted_one_is_the_clients_spoof() {
    let server = EchoServer::start(&["--proxy-protocol-from", "127.0.0.1/32"]);
    let hello = client_hello(&server);
    let wire = [
        b"PROXY TCP4 198.51.100.7 127.0.0.1 40000 443\r\n".as_slice(),
        b"PROXY TCP4 203.0.113.1 127.0.0.1 40000 443\r\n",
        &hello,
    ]
    .concat();
    send_raw(server.port, &wire, false).await;
    let health = failures_once(&server, 1);
    assert_eq!(
        health["handshakes"]["failures"]["proxy_untrusted"], 1,
        "{health}"
    );
    // The strike is the client's (the first header's address), never the load balancer's.
    assert_eq!(health["connections"]["strikes"], 1, "{health}");
    let rows = server.rows_until(|rows| !rows.is_empty()).await;
    assert_eq!(rows.len(), 1);
    assert!(
        rows[0].peer.starts_with("198.51.100.7:"),
        "{}",
        rows[0].peer
    );
}
