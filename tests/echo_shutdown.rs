//! SIGTERM under load loses no queued observation: the writer is told to hold its batch for a
//! minute, so when SIGTERM arrives every observation is still queued (checked: the table is
//! empty), and after the exit every one of them is in SQLite. Stalled peers are cut at
//! shutdown, not waited for, and stored too. A fresh database's start and stop log nothing about
//! moves it did not need.
//!
//! Run with `cargo test --test echo_shutdown`.

mod echo_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use echo_support::{
    client_config, client_hello, http1_body, http1_request, read_rows, tls_connect, EchoServer,
};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

/// Connections (one request each) made before SIGTERM.
const CONNECTIONS: usize = 200;
/// Connections in flight at once.
const CONCURRENCY: usize = 25;

#[tokio::test]
async fn sigterm_under_load_stores_every_queued_observation() {
    let mut server = EchoServer::start(&[
        "--flush-interval",
        "60s",
        "--batch-size",
        "100000",
        "--per-ip-connections",
        "1000",
    ]);
    let config = client_config(&server.cert_pem(), &[b"http/1.1"]);
    let port = server.port;
    let gate = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
    let mut clients = Vec::with_capacity(CONNECTIONS);
    for i in 0..CONNECTIONS {
        let config = Arc::clone(&config);
        let gate = Arc::clone(&gate);
        clients.push(tokio::spawn(async move {
            let _slot = gate.acquire_owned().await.expect("semaphore");
            let mut stream = tls_connect(port, config).await.expect("handshake");
            let response = http1_request(&mut stream, &format!("/probe/load-{i}")).await;
            http1_body(&response)["token"].clone()
        }));
    }
    for (i, client) in clients.into_iter().enumerate() {
        let token = client.await.expect("client task");
        assert_eq!(token, format!("load-{i}"));
    }

    let before = read_rows(&server.db()).await;
    assert!(
        before.is_empty(),
        "the batch is still queued: {} rows",
        before.len()
    );

    let status = server.sigterm();
    assert!(status.success(), "clean exit: {status:?}");

    let rows = read_rows(&server.db()).await;
    assert_eq!(rows.len(), CONNECTIONS, "every queued observation stored");
    let mut tokens: Vec<String> = rows.iter().filter_map(|r| r.token.clone()).collect();
    tokens.sort();
    let mut expected: Vec<String> = (0..CONNECTIONS).map(|i| format!("load-{i}")).collect();
    expected.sort();
    assert_eq!(tokens, expected);
}

/// Two stalled peers, one inside its ClientHello and one after the handshake without a request,
/// with every deadline at a minute: SIGTERM cuts both (the server exits, and well inside the 30 s
/// that `sigterm` waits, so it waited for no deadline) and stores both with the reason
/// `shutdown`, the first with the part of its hello that arrived.
#[tokio::test]
async fn sigterm_cuts_stalled_peers_and_stores_them() {
    let mut server = EchoServer::start(&[
        "--handshake-timeout",
        "60s",
        "--request-timeout",
        "60s",
        "--idle-timeout",
        "60s",
    ]);
    let hello = client_hello(&server);
    let half = &hello[..hello.len() / 2];
    let mut in_hello = TcpStream::connect(("127.0.0.1", server.port))
        .await
        .expect("connect");
    in_hello.write_all(half).await.expect("half a hello");
    let config = client_config(&server.cert_pem(), &[b"h2"]);
    let _before_request = tls_connect(server.port, config).await.expect("handshake");
    // Both are open on the server's side (plus the /healthz request's own connection).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let health = server.healthz();
        if health["connections"]["open"] == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "two stalled peers open: {health}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let status = server.sigterm();
    assert!(status.success(), "clean exit: {status:?}");
    assert!(
        !server
            .stderr()
            .contains("still open after the shutdown grace"),
        "cut, not waited for: {}",
        server.stderr()
    );

    let rows = read_rows(&server.db()).await;
    let cut: Vec<_> = rows
        .iter()
        .filter(|r| {
            r.failure
                .as_deref()
                .is_some_and(|f| f.starts_with("shutdown"))
        })
        .collect();
    assert_eq!(
        cut.len(),
        2,
        "both stalled peers stored: {:?}",
        rows.iter().map(|r| &r.failure).collect::<Vec<_>>()
    );
    let in_hello_row = cut
        .iter()
        .find(|r| {
            r.failure
                .as_deref()
                .is_some_and(|f| f.contains("ClientHello"))
        })
        .expect("the peer inside its hello");
    assert!(
        half.starts_with(&in_hello_row.hello),
        "the stored bytes are what the peer sent so far"
    );
    let before_request_row = cut
        .iter()
        .find(|r| r.failure.as_deref().is_some_and(|f| f.contains("request")))
        .expect("the peer that sent no request");
    assert!(
        before_request_row.summary["tls"]["ja4"].is_string(),
        "its whole hello is stored and fingerprinted: {}",
        before_request_row.summary
    );
}

/// A fresh database needs no move of rows from an older layout: the server, started and
/// stopped, says nothing about one (its log has the stop, so the log is there to read).
#[test]
fn a_fresh_database_logs_no_move_it_did_not_need() {
    let mut server = EchoServer::start(&[]);
    // Stopped once it serves: its store is open, any move of old rows done.
    let health = server.healthz();
    assert!(health.is_object(), "{health}");
    server.sigterm();
    let log = server.stderr();
    assert!(log.contains("observations flushed; stopped"), "{log}");
    let moves: Vec<&str> = log
        .lines()
        .filter(|line| {
            line.contains("exitvoice_store::legacy") || line.contains("observations moved to")
        })
        .collect();
    assert!(moves.is_empty(), "{moves:#?}");
}
