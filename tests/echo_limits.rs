//! The configurable limits and the protected observations endpoint: per-IP connection cap, idle
//! timeout, request body cap, and `--api-token` (constant-time bearer check; the token never
//! reaches the logs or the database).
//!
//! Run with `cargo test --test echo_limits`; needs curl (scripts/install-test-deps.sh).

mod echo_support;

use std::time::{Duration, Instant};

use echo_support::{client_config, curl, json_stream, tls_connect, EchoServer};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

#[tokio::test]
async fn per_ip_cap_refuses_the_extra_connection_and_counts_it() {
    let server = EchoServer::start(&["--per-ip-connections", "2", "--handshake-timeout", "5s"]);
    let _first = TcpStream::connect(("127.0.0.1", server.port))
        .await
        .expect("1");
    let _second = TcpStream::connect(("127.0.0.1", server.port))
        .await
        .expect("2");
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The refused connection is reset at once: on loopback the reset may even beat the end of
    // `connect`.
    if let Ok(mut third) = TcpStream::connect(("127.0.0.1", server.port)).await {
        let mut byte = [0_u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(2), third.read(&mut byte))
            .await
            .expect("closed at once, not after the handshake deadline");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }
    drop((_first, _second));
    // The two silent connections end at the handshake deadline; then /healthz gets through.
    let deadline = Instant::now() + Duration::from_secs(10);
    let health = loop {
        let out = curl(&["-sk", "--http1.1", &server.url("/healthz")]);
        if out.status.success() && !out.stdout.is_empty() {
            break json_stream(&out.stdout).remove(0);
        }
        assert!(Instant::now() < deadline, "healthz never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        health["connections"]["rejected_per_ip"].as_u64() >= Some(1),
        "{health}"
    );
}

#[tokio::test]
async fn idle_connection_after_the_handshake_is_closed_and_stored() {
    let server = EchoServer::start(&["--idle-timeout", "1s"]);
    let config = client_config(&server.cert_pem(), &[b"h2"]);
    let start = Instant::now();
    let mut stream = tls_connect(server.port, config).await.expect("handshake");
    let mut buf = [0_u8; 64];
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "closed by the idle timeout");
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
    let rows = server.rows_until(|rows| !rows.is_empty()).await;
    let failure = rows
        .first()
        .and_then(|r| r.failure.clone())
        .unwrap_or_default();
    assert!(failure.starts_with("idle_timeout"), "{failure}");
    assert_eq!(rows[0].summary["alpn"]["negotiated"], "h2");
    assert_eq!(server.healthz()["connections"]["idle_closed"], 1);
}

#[tokio::test]
async fn body_over_the_cap_gets_413() {
    let server = EchoServer::start(&["--body-cap", "1024"]);
    let small = curl(&[
        "-sk",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--data-binary",
        "x",
        &server.url("/api/all"),
    ]);
    assert_eq!(String::from_utf8_lossy(&small.stdout), "200");
    let body = server.dir.path().join("body.bin");
    std::fs::write(&body, vec![b'y'; 100 * 1024]).expect("body file");
    let body_arg = format!("@{}", body.display());
    let big = curl(&[
        "-sk",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--data-binary",
        &body_arg,
        &server.url("/api/all"),
    ]);
    assert_eq!(String::from_utf8_lossy(&big.stdout), "413");
}

#[tokio::test]
async fn observations_need_the_bearer_token_which_is_never_logged_or_stored() {
    let secret = "s3cret-api-token-4f1c";
    let server = EchoServer::start(&["--api-token", secret]);
    let probe = curl(&["-sk", "--http2", &server.url("/probe/tok-api")]);
    assert!(probe.status.success());
    let url = server.url("/api/observations?token=tok-api&raw=true");

    let deadline = Instant::now() + Duration::from_secs(10);
    let listed = loop {
        let out = curl(&[
            "-sk",
            "-H",
            &format!("Authorization: Bearer {secret}"),
            &url,
        ]);
        let body = json_stream(&out.stdout).remove(0);
        if body["observations"]
            .as_array()
            .is_some_and(|o| !o.is_empty())
        {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "observation never listed: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let first = &listed["observations"][0];
    assert_eq!(first["token"], "tok-api");
    assert_eq!(first["summary"]["token"], "tok-api");
    assert!(
        first["hello"].as_str().is_some_and(|h| h.starts_with("16")),
        "hex ClientHello"
    );

    for auth in [
        None,
        Some("Bearer wrong-token"),
        Some("Bearer s3cret-api-token-4f1"),
    ] {
        let mut args = vec!["-sk", "-o", "/dev/null", "-w", "%{http_code}"];
        let header = auth.map(|a| format!("Authorization: {a}"));
        if let Some(header) = &header {
            args.extend(["-H", header.as_str()]);
        }
        args.push(&url);
        let out = curl(&args);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "401", "{auth:?}");
    }
    let lean_url = server.url("/api/observations?token=tok-api");
    let lean = curl(&[
        "-sk",
        "-H",
        &format!("Authorization: Bearer {secret}"),
        &lean_url,
    ]);
    let lean = json_stream(&lean.stdout).remove(0);
    assert!(
        lean["observations"][0].get("hello").is_none(),
        "raw bytes only on request"
    );
    assert_eq!(lean["observations"][0]["token"], "tok-api");
    let since = curl(&[
        "-sk",
        "-H",
        &format!("Authorization: Bearer {secret}"),
        &server.url("/api/observations?since=2999-01-01T00:00:00Z"),
    ]);
    assert_eq!(
        json_stream(&since.stdout)[0]["observations"],
        serde_json::json!([])
    );

    assert!(!server.stderr().contains(secret), "token in the logs");
    let db = std::fs::read(server.db()).unwrap_or_default();
    let wal = std::fs::read(server.db().with_extension("db-wal")).unwrap_or_default();
    for bytes in [db, wal] {
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "token stored"
        );
    }
}
