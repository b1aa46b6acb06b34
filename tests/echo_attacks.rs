//! Bounded versions of the attacks of `bench/attacks/run.sh`, as regression tests:
//! after each, the server is still running, answers a legitimate request, its peak memory is
//! bounded, and the open-connection gauge returns to its baseline.
//!
//! Run with `cargo test --test echo_attacks`; needs curl (scripts/install-test-deps.sh).

mod echo_support;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use echo_support::EchoServer;
use exitvoice_attacks::{legit, run, Attack, Params, Report, Target};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Peak RSS allowed after an attack; the server idles at about 20 MiB.
const RSS_BOUND_KIB: u64 = 256 * 1024;

fn target(server: &EchoServer) -> Target {
    Target::new(SocketAddr::from(([127, 0, 0, 1], server.port))).expect("loopback")
}

fn params(connections: usize, count: usize, seconds: u64) -> Params {
    Params {
        connections,
        count,
        duration: Duration::from_secs(seconds),
        sources: 4,
        interval: Duration::from_millis(200),
        reconnect: true,
    }
}

/// Every connection of `tasks` attackers was cut by the server, except at most the last one
/// of each, which the attack's own time limit may have ended first.
fn assert_all_cut(report: &Report, tasks: u64) {
    assert!(report.connected >= tasks, "{report:?}");
    assert!(report.closed_by_server >= tasks, "{report:?}");
    assert!(
        report.closed_by_server + tasks >= report.connected,
        "{report:?}"
    );
}

/// The server is running, answers a legitimate request, stayed under the memory bound, and
/// every attack connection is gone; returns the `/healthz` body.
async fn assert_survived(server: &mut EchoServer, what: &str) -> serde_json::Value {
    assert!(server.running(), "{what}: the server died");
    let answered = legit::request(&target(server)).await;
    assert!(
        matches!(answered, Ok(true)),
        "{what}: no answer: {answered:?}"
    );
    let rss = server.peak_rss_kib();
    assert!(rss > 0 && rss < RSS_BOUND_KIB, "{what}: peak RSS {rss} KiB");
    let health = server.wait_open_zero(Duration::from_secs(15));
    assert_eq!(
        health["connections"]["open"], 1,
        "{what}: only the /healthz connection stays open: {health}"
    );
    assert!(!server.stderr().contains("panicked"), "{what}: panic");
    health
}

#[tokio::test]
async fn slowloris_on_the_hello_and_the_preface_is_cut_at_the_deadlines() {
    // The idle timeout is long, so only the handshake and request deadlines can cut them.
    let mut server = EchoServer::start(&[
        "--handshake-timeout",
        "1s",
        "--request-timeout",
        "1s",
        "--idle-timeout",
        "60s",
    ]);
    let target = target(&server);
    // Four attackers for 2 s, each reconnecting when cut.
    // Cut by the server, and (below) for its deadlines: the server counts a hello timeout or a
    // request timeout for every connection it cut. (How many bytes got through before the cut
    // depends on how punctually both sides' timers fire on a loaded machine: not checked.)
    let hello = run(Attack::SlowHello, &target, params(4, 100_000, 2)).await;
    assert_all_cut(&hello, 4);

    let preface = run(Attack::SlowPreface, &target, params(4, 100_000, 2)).await;
    assert_all_cut(&preface, 4);

    let health = assert_survived(&mut server, "slowloris").await;
    assert!(
        health["handshakes"]["failures"]["hello_timeout"].as_u64() >= Some(hello.closed_by_server),
        "{health}"
    );
    assert!(
        health["connections"]["request_timeouts"].as_u64() >= Some(preface.closed_by_server),
        "{health}"
    );
}

#[tokio::test]
async fn a_slow_request_after_a_quick_preface_is_cut_too() {
    // The preface arrives at once, then the HEADERS frame drips: the first-request deadline,
    // not the idle timeout, ends it.
    let mut server = EchoServer::start(&["--request-timeout", "1s", "--idle-timeout", "60s"]);
    let target = target(&server);
    let mut slow = params(2, 100_000, 2);
    slow.interval = Duration::from_millis(100);
    let report = run(Attack::SlowHeaders, &target, slow).await;
    assert_all_cut(&report, 2);
    // Preface and SETTINGS (33 bytes) at once, then the drip: cut past the preface, and (below)
    // for the request deadline, as the server's request timeout count says.
    assert!(
        report.sent > report.connected * 33,
        "past the preface: {report:?}"
    );
    let health = assert_survived(&mut server, "slow request").await;
    assert!(
        health["connections"]["request_timeouts"].as_u64() >= Some(report.closed_by_server),
        "{health}"
    );
}

/// `GET /api/clean` on a kept-alive HTTP/1.1 connection; the answer's status line.
async fn keep_alive_request<S>(tls: &mut S) -> std::io::Result<String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    tls.write_all(b"GET /api/clean HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut answer = Vec::new();
    let mut chunk = [0_u8; 4096];
    // The answer's head, then as many body bytes as its content-length says.
    loop {
        let read = tls.read(&mut chunk).await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        answer.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&answer);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| {
                    line.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .and_then(|value| value.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= length {
                return Ok(head.lines().next().unwrap_or_default().to_owned());
            }
        }
    }
}

/// An HTTP/1.1 connection from `source` whose first request was answered, kept alive.
async fn answered_once(target: &Target, source: [u8; 4]) -> impl AsyncRead + AsyncWrite + Unpin {
    let mut tls = target.tls(IpAddr::from(source), false).await.expect("TLS");
    let first = keep_alive_request(&mut tls).await.expect("first answer");
    assert_eq!(first, "HTTP/1.1 200 OK");
    tls
}

#[tokio::test]
async fn a_keep_alive_connection_waiting_for_its_next_request_is_left_to_the_idle_timeout() {
    // Quiet between two requests for longer than the request deadline: the client is waiting,
    // not sending slowly, so the connection stays and no strike is counted.
    let server = EchoServer::start(&["--request-timeout", "1s", "--idle-timeout", "4s"]);
    let mut tls = answered_once(&target(&server), [127, 0, 0, 9]).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let second = keep_alive_request(&mut tls).await;
    assert_eq!(
        second.as_deref().ok(),
        Some("HTTP/1.1 200 OK"),
        "the connection outlived the request deadline: {second:?}"
    );
    let health = server.healthz();
    assert_eq!(health["connections"]["strikes"], 0, "{health}");
    assert_eq!(health["connections"]["request_timeouts"], 0, "{health}");
}

/// Sends `bytes` one per 100 ms until the server closes the connection; how long after the
/// first byte it did (`None`: it never did).
async fn drip_until_cut<S>(tls: &mut S, bytes: &[u8]) -> Option<Duration>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let started = std::time::Instant::now();
    for byte in bytes {
        if tls.write_all(&[*byte]).await.is_err() {
            return Some(started.elapsed());
        }
        let mut probe = [0_u8; 64];
        match tokio::time::timeout(Duration::from_millis(100), tls.read(&mut probe)).await {
            Ok(Ok(0) | Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => panic!("an answer to a request never completed"),
            Err(_) => {}
        }
    }
    None
}

/// The drip was cut by the request deadline (1 s): about that long after its first byte, long
/// before the idle timeout, counted and struck; the server is fine afterwards.
async fn assert_cut_at_the_deadline(server: &mut EchoServer, cut: Option<Duration>, what: &str) {
    let took = cut.unwrap_or_else(|| panic!("{what}: never cut"));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{what}: cut {took:?} after its first byte"
    );
    let health = assert_survived(server, what).await;
    assert!(
        health["connections"]["request_timeouts"].as_u64() >= Some(1),
        "{health}"
    );
    assert!(
        health["connections"]["strikes"].as_u64() >= Some(1),
        "{health}"
    );
}

#[tokio::test]
async fn a_slow_request_on_a_kept_alive_connection_is_cut_at_the_request_deadline() {
    // The first request is answered; after a pause the second's head drips.
    let mut server = EchoServer::start(&["--request-timeout", "1s", "--idle-timeout", "60s"]);
    let mut tls = answered_once(&target(&server), [127, 0, 0, 10]).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let head = format!(
        "GET /api/clean HTTP/1.1\r\nHost: localhost\r\nX-Slow: {}\r\n\r\n",
        "a".repeat(64)
    );
    let cut = drip_until_cut(&mut tls, head.as_bytes()).await;
    assert_cut_at_the_deadline(&mut server, cut, "slow head").await;
}

#[tokio::test]
async fn a_slow_body_is_cut_at_the_request_deadline() {
    // A head at once, then its body drips (R.U.D.Y.): hyper has the head, and the body keeps
    // the server waiting.
    let mut server = EchoServer::start(&["--request-timeout", "1s", "--idle-timeout", "60s"]);
    let mut tls = answered_once(&target(&server), [127, 0, 0, 11]).await;
    tls.write_all(b"POST /api/all HTTP/1.1\r\nHost: localhost\r\nContent-Length: 200\r\n\r\n")
        .await
        .expect("head");
    let cut = drip_until_cut(&mut tls, &[b'a'; 200]).await;
    assert_cut_at_the_deadline(&mut server, cut, "slow body").await;
}

#[tokio::test]
async fn oversized_hellos_are_refused_at_once() {
    let mut server = EchoServer::start(&[]);
    let report = run(Attack::BigHello, &target(&server), params(2, 10, 1)).await;
    assert!(report.connected >= 2, "{report:?}");
    assert_eq!(report.closed_by_server, report.connected, "{report:?}");
    let health = assert_survived(&mut server, "big hello").await;
    assert_eq!(
        health["handshakes"]["failures"]["hello_too_large"].as_u64(),
        Some(report.connected),
        "{health}"
    );
}

/// Runs one HTTP/2 flood on its own connection(s) and checks the server afterwards.
async fn flood(server: &mut EchoServer, attack: Attack, count: usize) -> Report {
    let report = run(attack, &target(server), params(2, count, 1)).await;
    assert!(report.connected >= 2, "{attack:?}: {report:?}");
    assert!(report.sent > 0, "{attack:?}: {report:?}");
    assert_survived(server, attack.name()).await;
    report
}

#[tokio::test]
async fn http2_floods_leave_the_server_answering() {
    // The floods come from the same few sources one after the other; the penalty box (tested in
    // echo_admission) would refuse the later ones before they reach the limits tested here.
    let mut server = EchoServer::start(&["--per-ip-connections", "256", "--penalty-strikes", "0"]);
    let priority = flood(&mut server, Attack::Priority, 10_000).await;
    assert!(priority.sent >= 20_000, "{priority:?}");
    let settings = flood(&mut server, Attack::Settings, 2_000).await;
    assert!(settings.sent >= 4_000, "{settings:?}");
    // 200 × 16 KB of header block that never ends: refused once over the header list cap.
    let continuation = flood(&mut server, Attack::Continuation, 200).await;
    assert_eq!(
        continuation.closed_by_server, continuation.connected,
        "{continuation:?}"
    );
    // Each block decodes to 48 MB; the table size update is a compression error.
    let bomb = flood(&mut server, Attack::HpackBomb, 50).await;
    assert_eq!(bomb.closed_by_server, bomb.connected, "{bomb:?}");
    let reset = flood(&mut server, Attack::RapidReset, 5_000).await;
    assert!(reset.sent > 0, "{reset:?}");
}

#[tokio::test]
async fn idle_connections_are_closed_at_the_handshake_deadline() {
    let mut server = EchoServer::start(&[
        "--handshake-timeout",
        "1s",
        "--max-connections",
        "1000",
        "--per-ip-connections",
        "64",
        // Every cut connection is a strike; this test is about the deadline, not the penalty.
        "--penalty-strikes",
        "0",
    ]);
    let mut idle = params(400, 1, 3);
    idle.sources = 8;
    let report = run(Attack::Idle, &target(&server), idle).await;
    assert!(report.connected >= 400, "{report:?}");
    // 50 per source fit under the per-IP cap; each was cut at the 1 s deadline and reopened.
    assert!(report.closed_by_server >= 400, "{report:?}");
    let health = assert_survived(&mut server, "idle").await;
    assert!(
        health["handshakes"]["failures"]["hello_timeout"].as_u64() >= Some(400),
        "{health}"
    );
}

#[tokio::test]
async fn raw_bytes_held_by_the_queue_are_capped() {
    // The writer holds its batch for a minute, so everything queued stays in memory; a 16 KiB
    // budget takes a few oversized hellos (each keeps what its first read took, ~2 KiB, before
    // the announced length showed it over the cap) and drops the rest, counted.
    let mut server = EchoServer::start(&[
        "--queue-bytes",
        "16384",
        "--flush-interval",
        "60s",
        "--batch-size",
        "100000",
    ]);
    let report = run(Attack::BigHello, &target(&server), params(2, 10, 1)).await;
    assert!(report.connected >= 4, "{report:?}");
    let health = assert_survived(&mut server, "queue bytes").await;
    let held = health["queue"]["bytes"].as_u64().unwrap_or(u64::MAX);
    assert!(held <= 16_384, "{health}");
    assert!(held > 0, "some hellos are held: {health}");
    assert!(
        health["observations"]["queue_drops"].as_u64() >= Some(1),
        "{health}"
    );
}
