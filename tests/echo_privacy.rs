//! Private by default: `exitvoice serve` with no flags publishes no visitor. One visitor (from
//! 127.0.0.2) leaves an observation; then an anonymous client (from 127.0.0.3) walks every route,
//! over HTTP/2 and HTTP/1.1, and no answer may carry the visitor's address, port, probe token,
//! ClientHello or fingerprints. The visitor's own long probe token opens its own rows and no
//! other; short tokens open nothing; token queries share the per-source rate limit; and
//! `--store-peer-ip prefix|none` keeps the address out of the database while the visitor's own
//! echo still shows it.
//!
//! Run with `cargo test --test echo_privacy`; needs curl.

mod echo_support;

use std::time::Instant;

use echo_support::{curl, json_stream, EchoServer};
use serde_json::Value;

const VISITOR: &str = "127.0.0.2";
const STRANGER: &str = "127.0.0.3";

/// A probe token long enough to be a capability (≥ 16 characters of `A-Za-z0-9-_`).
fn long_token(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{tag}-{nanos:x}-privacy")
}

/// What identifies the visitor: none of it may reach the stranger.
struct Visitor {
    token: String,
    secrets: Vec<String>,
}

/// The visitor's request: TLS 1.2 at most and HTTP/1.1, so its fingerprints differ from the
/// stranger's default curl (TLS 1.3, h2).
fn visit(server: &EchoServer) -> Visitor {
    let token = long_token("visitor");
    let out = curl(&[
        "-sk",
        "--http1.1",
        "--tls-max",
        "1.2",
        "--interface",
        VISITOR,
        &server.url(&format!("/probe/{token}")),
    ]);
    assert!(out.status.success(), "visitor's request: {out:?}");
    let echo: Value = serde_json::from_slice(&out.stdout).expect("visitor's echo");
    assert_eq!(
        echo["peer"]["ip"], VISITOR,
        "the visitor sees its own address"
    );
    let port = echo["peer"]["port"].as_u64().expect("port");
    let tls = &echo["tls"];
    let mut secrets = vec![
        VISITOR.to_owned(),
        format!("\"port\":{port}"),
        token.clone(),
    ];
    for field in [
        "ja3",
        "ja3_hash",
        "ja3n_hash",
        "ja4",
        "ja4_r",
        "voice_id",
        "order_id",
    ] {
        let value = tls[field].as_str().expect("TLS fingerprint field");
        secrets.push(value.to_owned());
    }
    Visitor { token, secrets }
}

/// The stored observation of the request that carried `token`.
async fn stored_row(server: &EchoServer, token: &str) -> echo_support::Row {
    let rows = server
        .rows_until(|rows| rows.iter().any(|r| r.token.as_deref() == Some(token)))
        .await;
    rows.into_iter()
        .find(|r| r.token.as_deref() == Some(token))
        .expect("the visitor's observation is stored")
}

/// The visitor's raw ClientHello as stored, as hex (a stretch of its random and cipher list).
async fn stored_hello_hex(server: &EchoServer, token: &str) -> String {
    let row = stored_row(server, token).await;
    let hex: String = row.hello.iter().map(|b| format!("{b:02x}")).collect();
    // Bytes 11..43 of the records are the hello's random: unique to this connection.
    hex.get(22..86).expect("a whole hello").to_owned()
}

/// GETs `path` as the stranger, over h2 and over HTTP/1.1; returns status and body of each.
fn stranger_get(server: &EchoServer, path: &str) -> Vec<(String, String)> {
    ["--http2", "--http1.1"]
        .iter()
        .map(|version| {
            let out = curl(&[
                "-sk",
                version,
                "--interface",
                STRANGER,
                "-w",
                "\n%{http_code}",
                &server.url(path),
            ]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let (body, status) = text.rsplit_once('\n').unwrap_or((&text, ""));
            (status.to_owned(), body.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn no_route_shows_a_stranger_another_visitors_data() {
    let server = EchoServer::start(&[]);
    let visitor = visit(&server);
    let mut secrets = visitor.secrets.clone();
    secrets.push(stored_hello_hex(&server, &visitor.token).await);

    let routes = [
        "/".to_owned(),
        "/api/all".to_owned(),
        "/api/tls".to_owned(),
        "/api/http2".to_owned(),
        "/api/http1".to_owned(),
        "/api/clean".to_owned(),
        "/api/observations".to_owned(),
        "/api/observations?limit=1000&raw=true".to_owned(),
        "/api/observations?since=0".to_owned(),
        format!("/api/observations?token={}", &visitor.token[..15]),
        format!("/api/observations?token={}", long_token("stranger")),
        "/probe/x".to_owned(),
        format!("/probe/{}", long_token("stranger")),
        "/healthz".to_owned(),
        "/no/such/path".to_owned(),
        "/api/no-such-route".to_owned(),
    ];
    for route in &routes {
        for (status, body) in stranger_get(&server, route) {
            assert!(!status.is_empty(), "{route}: no answer");
            for secret in &secrets {
                assert!(
                    !body.contains(secret.as_str()),
                    "{route} ({status}) shows the visitor's {secret:?}:\n{body}"
                );
            }
        }
    }

    // Closed by default: listing is refused with a message that names the flag.
    for (status, body) in stranger_get(&server, "/api/observations") {
        assert_eq!(status, "403", "{body}");
        let error: Value = serde_json::from_str(&body).expect("JSON error");
        assert_eq!(error["error"], "forbidden");
        assert!(error["message"]
            .as_str()
            .is_some_and(|m| m.contains("--api-token")));
    }
    // A token too short to be a credential opens nothing, even when it is a stored token.
    let short = long_token("s");
    let short = &short[..15];
    let probe = curl(&["-sk", &server.url(&format!("/probe/{short}"))]);
    assert!(probe.status.success());
    for (status, _) in stranger_get(&server, &format!("/api/observations?token={short}")) {
        assert_eq!(status, "403");
    }
    // The visitor's own long token opens exactly the visitor's rows, from anywhere.
    let (status, body) = stranger_get(
        &server,
        &format!("/api/observations?token={}", visitor.token),
    )
    .remove(0);
    assert_eq!(status, "200", "{body}");
    let listed = json_stream(body.as_bytes()).remove(0);
    let rows = listed["observations"].as_array().expect("observations");
    assert_eq!(rows.len(), 1, "{listed}");
    assert_eq!(rows[0]["token"], visitor.token.as_str());

    // /healthz is counters only.
    let health = server.healthz();
    let text = health.to_string();
    for secret in &secrets {
        assert!(!text.contains(secret.as_str()), "healthz shows {secret:?}");
    }
}

#[tokio::test]
async fn token_queries_take_from_the_per_source_rate_limit() {
    // One connection per second, two at once: the query connection takes one, the first query
    // the other, and the next queries in the same second find the bucket empty.
    let server = EchoServer::start(&["--per-ip-rate", "1", "--per-ip-burst", "2"]);
    let token = long_token("limited");
    let url = server.url(&format!("/api/observations?token={token}"));
    let urls: Vec<&str> = std::iter::repeat_n(url.as_str(), 6).collect();
    let mut args = vec![
        "-sk",
        "--http2",
        "--interface",
        STRANGER,
        "-w",
        "%{http_code}\n",
    ];
    args.extend(urls);
    let started = Instant::now();
    let out = curl(&args);
    let codes = String::from_utf8_lossy(&out.stdout).into_owned();
    // Each line is a body (no newline of its own) followed by its status code.
    let codes: Vec<&str> = codes
        .lines()
        .map(|line| line.get(line.len().saturating_sub(3)..).unwrap_or(line))
        .collect();
    assert_eq!(codes.len(), 6, "{codes:?}");
    assert_eq!(codes[0], "200", "{codes:?}");
    // The bucket refills at one token a second: however slow this run was, the six queries
    // could have found at most elapsed-seconds + 1 tokens.
    let allowed = usize::try_from(started.elapsed().as_secs()).unwrap_or(usize::MAX) + 1;
    let ok = codes.iter().filter(|c| **c == "200").count();
    assert!(
        ok <= allowed,
        "{ok} queries answered in {:?}: {codes:?}",
        started.elapsed()
    );
    assert!(codes.contains(&"429"), "{codes:?}");
    let refused = codes.iter().filter(|c| **c == "429").count() as u64;
    let health = server.healthz();
    assert_eq!(
        health["connections"]["rejected_token_queries"].as_u64(),
        Some(refused),
        "{health}"
    );
}

/// Waits for the visitor's row and returns the database and WAL bytes.
async fn stored_bytes(server: &EchoServer, token: &str) -> (Value, Vec<u8>) {
    let row = stored_row(server, token).await;
    let mut bytes = std::fs::read(server.db()).unwrap_or_default();
    bytes.extend(std::fs::read(server.db().with_extension("db-wal")).unwrap_or_default());
    (row.summary["peer"].clone(), bytes)
}

#[tokio::test]
async fn stored_peer_address_is_a_choice() {
    for (policy, stored_ip) in [("prefix", "127.0.0.0/24"), ("none", "")] {
        let server = EchoServer::start(&["--store-peer-ip", policy]);
        let visitor = visit(&server);
        let (peer, bytes) = stored_bytes(&server, &visitor.token).await;
        assert_eq!(peer["ip"], stored_ip, "{policy}");
        assert_eq!(peer["port"], 0, "{policy}");
        let needle = VISITOR.as_bytes();
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "{policy}: the full address is in the database"
        );
        // The visitor's token query still answers, with the stored (reduced) address.
        let out = curl(&[
            "-sk",
            &server.url(&format!("/api/observations?token={}", visitor.token)),
        ]);
        let listed = json_stream(&out.stdout).remove(0);
        assert_eq!(
            listed["observations"][0]["peer"]["ip"], stored_ip,
            "{listed}"
        );
    }
    let server = EchoServer::start(&[]);
    let visitor = visit(&server);
    let (peer, _) = stored_bytes(&server, &visitor.token).await;
    assert_eq!(peer["ip"], VISITOR, "full is the default");
    assert!(peer["port"].as_u64().is_some_and(|p| p > 0));
}
