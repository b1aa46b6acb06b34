//! Admission of new connections by source: the per-source rate limit resets
//! connections over `--per-ip-rate`, and the penalty box holds then resets every connection of a
//! source whose connections broke the protocol or a deadline `--penalty-strikes` times — while
//! every other source is served as before.
//!
//! Run with `cargo test --test echo_admission`; needs curl (scripts/install-test-deps.sh).

mod echo_support;

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use echo_support::EchoServer;
use exitvoice_attacks::{run, Attack, Params, Target};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn target(server: &EchoServer) -> Target {
    Target::new(SocketAddr::from(([127, 0, 0, 1], server.port))).expect("loopback")
}

fn ip(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 3, last])
}

/// One `GET /api/clean` over a fresh TLS connection from `source`; true on a 200.
async fn served(target: &Target, source: IpAddr) -> bool {
    let Ok(mut tls) = target.tls(source, false).await else {
        return false;
    };
    let request = b"GET /api/clean HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    if tls.write_all(request).await.is_err() {
        return false;
    }
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    response.starts_with(b"HTTP/1.1 200")
}

/// Sends bytes that are no ClientHello (an HTTP request on the TLS port) and waits for the
/// server to close: one `hello_invalid` strike.
async fn strike(target: &Target, source: IpAddr) {
    let mut tcp = target.tcp(source).await.expect("connect");
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut rest = Vec::new();
    let _ = tcp.read_to_end(&mut rest).await;
}

#[tokio::test]
async fn a_source_that_keeps_breaking_the_protocol_is_held_then_reset() {
    let mut server = EchoServer::start(&[
        "--penalty-strikes",
        "3",
        "--penalty-window",
        "60s",
        "--penalty-time",
        "60s",
        "--handshake-timeout",
        "1s",
        "--per-ip-rate",
        "0",
    ]);
    let target = target(&server);
    let (bad, good) = (ip(1), ip(2));
    assert!(served(&target, bad).await, "served before any strike");
    for _ in 0..2 {
        strike(&target, bad).await;
    }
    // Two strikes of three: still served.
    assert!(served(&target, bad).await, "served under the strike limit");
    strike(&target, bad).await;

    // In the penalty box: the connection is held without an answer for the handshake deadline
    // (1 s here), then reset; the TLS handshake never completes.
    let started = Instant::now();
    let refused = target.tls(bad, false).await;
    let held = started.elapsed();
    assert!(refused.is_err(), "a penalised source got a handshake");
    // Timers never fire early, so the hold lasts at least the deadline; the upper bound only
    // says it ends (the idle timeout, 60 s, would be next), with room for any load.
    assert!(
        held >= Duration::from_millis(800) && held < Duration::from_secs(20),
        "held for {held:?}"
    );
    // Any other source is served meanwhile.
    assert!(served(&target, good).await, "another source refused");

    let health = server.healthz();
    let connections = &health["connections"];
    assert_eq!(connections["strikes"], 3, "{health}");
    assert_eq!(connections["penalties"], 1, "{health}");
    assert_eq!(connections["rejected_penalty"], 1, "{health}");
    assert_eq!(
        health["handshakes"]["failures"]["hello_invalid"], 3,
        "{health}"
    );
    let log = server.stderr();
    assert!(
        log.contains("penalty box") && log.contains("127.0.3.1"),
        "the penalty is logged with its source: {log}"
    );
    assert!(server.running());
}

#[tokio::test]
async fn a_source_over_the_rate_is_reset_at_once_and_recovers() {
    let mut server = EchoServer::start(&[
        "--per-ip-rate",
        "2",
        "--per-ip-burst",
        "4",
        "--penalty-strikes",
        "0",
    ]);
    let target = target(&server);
    let (fast, other) = (ip(3), ip(4));
    // The burst of four is served; the next is reset before the handshake. Tokens come back at
    // two a second, so on a slow machine a token may return while the burst is opened: open
    // until the first refusal, and allow one connection per token that elapsed time refilled.
    let started = Instant::now();
    let mut open = Vec::new();
    let (refused_after, refusal) = loop {
        let attempt = Instant::now();
        match target.tls(fast, false).await {
            Ok(tls) if open.len() < 40 => open.push(tls),
            Ok(_) => panic!("40 connections served, none refused"),
            Err(_) => break (attempt.elapsed(), started.elapsed()),
        }
    };
    let refilled = (refusal.as_secs_f64() * 2.0).ceil() as usize;
    assert!(
        open.len() >= 4 && open.len() <= 4 + refilled,
        "{} served before the refusal, in {refusal:?}",
        open.len()
    );
    // Reset at once: a held connection would wait for the handshake deadline (10 s by default),
    // like the penalised source above.
    assert!(
        refused_after < Duration::from_secs(5),
        "reset at once, not held: {refused_after:?}"
    );
    assert!(served(&target, other).await, "another source refused");
    // Two per second: a token is back after half a second.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(served(&target, fast).await, "not served after the refill");
    drop(open);
    let health = server.healthz();
    assert_eq!(health["connections"]["rejected_rate"], 1, "{health}");
    assert!(server.running());
}

/// Runs `attack` from one source, reconnecting after every close, and returns the report and
/// `/healthz` afterwards.
async fn reconnecting(
    attack: Attack,
    count: usize,
) -> (exitvoice_attacks::Report, serde_json::Value) {
    let mut server = EchoServer::start(&["--penalty-strikes", "5", "--handshake-timeout", "1s"]);
    let params = Params {
        connections: 2,
        count,
        duration: Duration::from_secs(3),
        sources: 1,
        interval: Duration::from_millis(200),
        reconnect: true,
    };
    let report = run(attack, &target(&server), params).await;
    assert!(server.running(), "{attack:?}: the server died");
    assert!(
        served(&target(&server), ip(9)).await,
        "{attack:?}: others are refused"
    );
    let health = server.healthz();
    (report, health)
}

#[tokio::test]
async fn reconnecting_http2_floods_end_in_the_penalty_box() {
    // Each connection of these floods ends in an HTTP/2 connection error our side detects
    // (RFC 9113 section 5.4.1): GOAWAY for too many resets, a header block over the header
    // list limit, a COMPRESSION_ERROR. Five of them put the source in the penalty box, after
    // which the attacker's reconnects are held and reset before any TLS.
    for (attack, count) in [
        (Attack::RapidReset, 100_000),
        (Attack::Continuation, 10_000),
        (Attack::HpackBomb, 1_000),
    ] {
        let (report, health) = reconnecting(attack, count).await;
        let connections = &health["connections"];
        assert!(
            connections["strikes"].as_u64() >= Some(5),
            "{attack:?}: {report:?} {health}"
        );
        assert_eq!(connections["penalties"], 1, "{attack:?}: {health}");
        // Without the penalty box such an attacker gets hundreds of TLS connections in 3 s.
        assert!(report.connected <= 5 + 2, "{attack:?}: {report:?} {health}");
        assert!(
            connections["rejected_penalty"].as_u64() >= Some(1),
            "{attack:?}: {health}"
        );
    }
}
