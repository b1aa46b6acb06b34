//! The broker obeys real audits: an exit that starts intercepting (a loopback forwarder switched
//! from tinyproxy to mitmproxy between two `exitvoice audit --once` runs) stops being leased
//! within one labels refresh, and its live lease is revoked.

mod support;

use std::process::Command;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::broker::{audit, Broker};
use support::{exits_file, EchoServer, Proxy};

const TOKEN: &str = "labels-test-token-0123456789";
const REFRESH_MS: u64 = 500;

/// A TCP forwarder on loopback whose target port can be switched: the "exit".
fn forwarder(runtime: &tokio::runtime::Runtime, target: Arc<AtomicU16>) -> u16 {
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let to = target.load(Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut upstream) =
                        tokio::net::TcpStream::connect(("127.0.0.1", to)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    }
                });
            }
        });
        port
    })
}

fn lease(broker: &str, args: &[&str]) -> (i32, serde_json::Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .args(["lease", "--broker", broker])
        .args(args)
        .env("EXITVOICE_BROKER_TOKEN", TOKEN)
        .output()
        .unwrap();
    let answer = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("lease said {}", String::from_utf8_lossy(&output.stdout)));
    (output.status.code().unwrap_or(-1), answer)
}

#[test]
fn an_exit_that_starts_intercepting_stops_being_leased_within_one_refresh() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let echo = EchoServer::start();
    let tiny = Proxy::tinyproxy();
    let mitm = Proxy::start("mitmproxy", &[]);
    let target = Arc::new(AtomicU16::new(tiny.port));
    let exit = forwarder(&runtime, target.clone());
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[("flip", format!("http://127.0.0.1:{exit}"))],
    );
    let db = work.path().join("audit.db");
    let database = db.to_string_lossy();
    audit(&exits, &database);

    let broker = Broker::start(
        &exits,
        &database,
        TOKEN,
        &["--labels-refresh", &format!("{REFRESH_MS}ms")],
    );
    let url = broker.url.clone();

    let (code, held) = lease(&url, &["acquire", "--class", "anonymous", "--holder", "w1"]);
    assert_eq!(code, 0, "{held}");
    assert_eq!(held["exit"], "flip");
    let (id, fence) = (
        held["lease_id"].as_str().unwrap(),
        held["fence"].to_string(),
    );
    let (code, renewed) = lease(&url, &["renew", id, "--fence", &fence]);
    assert_eq!(code, 0, "{renewed}");

    // The exit starts intercepting; the next real audit sees it.
    target.store(mitm.port, Ordering::SeqCst);
    audit(&exits, &database);
    let audited = Instant::now();
    let revoked = loop {
        let (code, answer) = lease(&url, &["renew", id, "--fence", &fence]);
        if code == 4 {
            break answer;
        }
        assert!(
            audited.elapsed() < Duration::from_millis(3 * REFRESH_MS),
            "still renewed: {answer}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(revoked["error"], "revoked");
    let (code, none) = lease(&url, &["acquire", "--class", "stateless", "--holder", "w2"]);
    assert_eq!(
        (code, &none["error"]),
        (3, &serde_json::json!("no exit of class stateless is free"))
    );
}
