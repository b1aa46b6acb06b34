//! The simulator over real loopback sockets: a tunnel forwards bytes and is counted while open;
//! wrong credentials, unknown exits and targets off loopback are refused and counted; `/stats`
//! answers the counters.

use std::time::Duration;

use base64::Engine;
use exitvoice_exitsim::Simulator;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PASSWORD: &str = "pw";

async fn simulator(exits: usize) -> Simulator {
    Simulator::start(
        exits,
        PASSWORD.to_owned(),
        "127.0.0.1:0".parse().unwrap(),
        Some("127.0.0.1:0".parse().unwrap()),
    )
    .await
    .unwrap()
}

/// A loopback server that echoes every byte back.
async fn echo() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = socket.split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
    });
    addr
}

/// Sends `CONNECT target` as `user` with `password`; the stream and the status line.
async fn connect(sim: &Simulator, target: &str, user: &str, password: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(sim.http).await.unwrap();
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let request = format!(
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: Basic {token}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        if stream.read(&mut byte).await.unwrap() == 0 {
            break;
        }
        head.push(byte[0]);
    }
    let status = String::from_utf8_lossy(&head)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned();
    (stream, status)
}

/// SOCKS5 greeting and RFC 1929 authentication as `user`; the auth status byte.
async fn socks_auth(sim: &Simulator, user: &str, password: &str) -> (TcpStream, u8) {
    let mut stream = TcpStream::connect(sim.socks.unwrap()).await.unwrap();
    stream.write_all(&[5, 1, 2]).await.unwrap();
    let mut choice = [0u8; 2];
    stream.read_exact(&mut choice).await.unwrap();
    assert_eq!(choice, [5, 2], "username/password chosen");
    let mut auth = vec![1, u8::try_from(user.len()).unwrap()];
    auth.extend_from_slice(user.as_bytes());
    auth.push(u8::try_from(password.len()).unwrap());
    auth.extend_from_slice(password.as_bytes());
    stream.write_all(&auth).await.unwrap();
    let mut status = [0u8; 2];
    stream.read_exact(&mut status).await.unwrap();
    (stream, status[1])
}

#[tokio::test]
async fn tunnels_forward_and_count_while_open() {
    let sim = simulator(3).await;
    let target = echo().await.to_string();
    let (mut first, status) = connect(&sim, &target, "exit-2", PASSWORD).await;
    assert_eq!(status, "HTTP/1.1 200 Connection established");
    let (mut second, _) = connect(&sim, &target, "exit-2", PASSWORD).await;
    for stream in [&mut first, &mut second] {
        stream.write_all(b"ping").await.unwrap();
        let mut back = [0u8; 4];
        stream.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"ping");
    }
    let open = sim.snapshot(true);
    assert_eq!(
        (open.tunnels, open.in_flight, open.max_in_flight_per_exit),
        (2, 2, 2)
    );
    assert_eq!(open.per_exit.unwrap(), [[0, 0], [0, 0], [2, 2]]);

    // SOCKS5 to the same target by IPv4 address, as exit 0.
    let (mut socks, status) = socks_auth(&sim, "exit-0", PASSWORD).await;
    assert_eq!(status, 0);
    let addr: std::net::SocketAddr = target.parse().unwrap();
    let std::net::IpAddr::V4(ip) = addr.ip() else {
        unreachable!("bound on 127.0.0.1")
    };
    let mut request = vec![5, 1, 0, 1];
    request.extend_from_slice(&ip.octets());
    request.extend_from_slice(&addr.port().to_be_bytes());
    socks.write_all(&request).await.unwrap();
    let mut reply = [0u8; 10];
    socks.read_exact(&mut reply).await.unwrap();
    assert_eq!(reply[1], 0, "succeeded");
    socks.write_all(b"pong").await.unwrap();
    let mut back = [0u8; 4];
    socks.read_exact(&mut back).await.unwrap();
    assert_eq!(&back, b"pong");

    drop((first, second, socks));
    for _ in 0..100 {
        if sim.snapshot(false).in_flight == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let closed = sim.snapshot(false);
    assert_eq!(
        (closed.tunnels, closed.in_flight, closed.exits_used),
        (3, 0, 2)
    );
    assert_eq!(closed.refused, 0);
}

#[tokio::test]
async fn refuses_bad_credentials_unknown_exits_and_targets_off_loopback() {
    let sim = simulator(2).await;
    let target = echo().await.to_string();
    let (_, status) = connect(&sim, &target, "exit-1", "wrong").await;
    assert!(status.starts_with("HTTP/1.1 407"), "{status}");
    let (_, status) = connect(&sim, &target, "exit-2", PASSWORD).await;
    assert!(status.starts_with("HTTP/1.1 407"), "{status}");
    // TEST-NET-1 (RFC 5737): never forwarded, whatever the credentials.
    let (_, status) = connect(&sim, "192.0.2.1:443", "exit-0", PASSWORD).await;
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    let (_, status) = socks_auth(&sim, "exit-0", "wrong").await;
    assert_eq!(status, 1, "RFC 1929 failure");

    let stats_addr = sim
        .serve_stats("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut stream = TcpStream::connect(stats_addr).await.unwrap();
    stream
        .write_all(b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let body = response.split("\r\n\r\n").nth(1).unwrap();
    let stats: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(stats["refused"], 4, "{stats}");
    assert_eq!(stats["tunnels"], 0, "{stats}");
    assert!(stats.get("per_exit").is_none());
    assert!(!response.contains(PASSWORD));
}
