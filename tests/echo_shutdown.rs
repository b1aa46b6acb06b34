//! SIGTERM under load loses no queued observation: the writer is told to hold its batch for a
//! minute, so when SIGTERM arrives every observation is still queued (checked: the table is
//! empty), and after the exit every one of them is in SQLite. Stalled peers are cut at
//! shutdown, not waited for, and stored too.
//!
//! Run with `cargo test --test echo_shutdown`.

mod echo_support;

use std::sync::Arc;

use echo_support::{client_config, http1_body, http1_request, read_rows, tls_connect, EchoServer};

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
