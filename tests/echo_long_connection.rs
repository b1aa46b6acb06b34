//! A long keep-alive connection past `--capture-bytes`: the tap stores the first bytes only, but
//! every later request still gets its own head (HTTP/2 stream id and header order through the
//! connection's HPACK state; the HTTP/1.1 request line) through the follower's window; a body
//! larger than the window loses the heads after it, counted. Real curl, one connection per
//! command line.
//!
//! Run with `cargo test --test echo_long_connection`; needs curl (scripts/install-test-deps.sh).

mod echo_support;

use echo_support::{curl, json_stream, EchoServer};
use serde_json::Value;

/// A capture cap small enough that a few dozen requests go past it.
const CAP: &str = "1024";
/// Requests on the one connection: their paths alone are several times the cap.
const REQUESTS: usize = 120;

fn urls(server: &EchoServer) -> Vec<String> {
    (1..=REQUESTS)
        .map(|n| server.url(&format!("/api/all?token=long-{n:04}")))
        .collect()
}

fn echoes(server: &EchoServer, version: &str) -> Vec<Value> {
    let urls = urls(server);
    let mut args = vec!["-sk", version];
    args.extend(urls.iter().map(String::as_str));
    let out = curl(&args);
    assert!(out.status.success(), "{out:?}");
    let echoes = json_stream(&out.stdout);
    assert_eq!(echoes.len(), REQUESTS);
    let port = &echoes[0]["peer"]["port"];
    assert!(
        echoes.iter().all(|e| &e["peer"]["port"] == port),
        "one connection"
    );
    echoes
}

#[test]
fn http2_heads_past_the_capture_cap_keep_their_stream_and_order() {
    let server = EchoServer::start(&["--capture-bytes", CAP]);
    let echoes = echoes(&server, "--http2");
    let first = &echoes[0]["http2"];
    for (n, echo) in echoes.iter().enumerate() {
        let index = n + 1;
        assert_eq!(
            echo["request"],
            serde_json::json!({"stream_id": 2 * index - 1, "index": index}),
            "request {index}"
        );
        assert_eq!(
            echo["http2"]["pseudo_header_order"], first["pseudo_header_order"],
            "request {index}"
        );
        assert_eq!(
            echo["http2"]["header_order"], first["header_order"],
            "request {index}"
        );
    }
    let health = server.healthz();
    assert_eq!(health["parse_errors"], serde_json::json!({}), "{health}");
}

#[test]
fn http1_heads_past_the_capture_cap_and_a_body_larger_than_the_window() {
    let server = EchoServer::start(&["--capture-bytes", CAP]);
    let echoes = echoes(&server, "--http1.1");
    for (n, echo) in echoes.iter().enumerate() {
        let index = n + 1;
        assert_eq!(
            echo["http1"]["request_line"],
            format!("GET /api/all?token=long-{index:04} HTTP/1.1"),
            "request {index}"
        );
    }

    // Past the cap, a 64 KiB body between two requests overflows the window: the request after
    // it keeps its echo but not its head, and the connection is counted.
    let body = "x".repeat(64 * 1024);
    let mut args: Vec<String> = vec!["-sk".into(), "--http1.1".into()];
    args.extend(urls(&server).into_iter().take(40));
    args.extend(["--next", "-sk", "--http1.1", "--data-binary", &body].map(str::to_owned));
    args.push(server.url("/api/all?token=big-body"));
    args.extend(["--next", "-sk", "--http1.1"].map(str::to_owned));
    args.push(server.url("/api/all?token=after"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = curl(&args);
    assert!(out.status.success(), "{out:?}");
    let echoes = json_stream(&out.stdout);
    let after = echoes.last().expect("echoes");
    assert_eq!(after["token"], "after", "{after}");
    assert_eq!(after["request"]["index"], 42, "one connection: {after}");
    assert_eq!(after["http1"], Value::Null, "{after}");
    // Counted when the connection ends, just after curl's exit.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let health = loop {
        let health = server.healthz();
        if health["connections"]["heads_unfollowed"] == 1 || std::time::Instant::now() > deadline {
            break health;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let connections = &health["connections"];
    assert_eq!(connections["heads_unfollowed"], 1, "{health}");
    assert_eq!(
        connections["captures_truncated"], 2,
        "both connections: {health}"
    );
    assert_eq!(health["parse_errors"], serde_json::json!({}), "{health}");
}
