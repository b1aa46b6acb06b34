//! The live echo and `exitvoice inspect` are one analysis: for real connections of several
//! shapes (curl over h2 and HTTP/1.1, nghttp's h2 with PRIORITY frames, a silent downgrade — ALPN
//! `h2` then HTTP/1.1 — and two requests on one h2 connection), the server writes each
//! connection's bytes with `--record-dir`, and `exitvoice inspect HELLO PREFIX` on those files
//! must give the same fingerprints, voices, spoken protocol, bucket and profile as the echo the
//! server answered on the connection itself.
//!
//! Run with `cargo test --test echo_inspect_agree`; needs curl and nghttp.

mod echo_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use echo_support::{
    client_config, curl, http1_body, http1_request, json_stream, tls_connect, EchoServer,
};
use serde_json::Value;

/// The fields both must agree on, as JSON pointers into the echo and into inspect's output.
const FIELDS: &[&str] = &[
    "/tls/ja3",
    "/tls/ja3_hash",
    "/tls/ja3n",
    "/tls/ja4",
    "/tls/ja4_r",
    "/tls/ja4_o",
    "/tls/ja4_ro",
    "/tls/voice_id",
    "/tls/order_id",
    "/http2/akamai_fingerprint",
    "/http2/akamai_fingerprint_hash",
    "/http2/voice_id",
    "/http2/pseudo_header_order",
    "/http2/header_order",
    "/http1/request_line",
    "/http1/header_order",
    "/http1/voice_id",
    "/alpn/spoken",
    "/bucket",
    "/profile",
];

/// Waits for the `--record-dir` record of the connection whose first request carried `token`.
fn record_of(dir: &Path, token: &str) -> (PathBuf, Value) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = std::fs::read_dir(dir)
            .expect("record dir")
            .filter_map(|entry| {
                let path = entry.ok()?.path();
                (path.extension()? == "json").then_some(path)
            })
            .find_map(|path| {
                let record: Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
                let first = record["first_request"]["path"].as_str()?;
                first.contains(token).then_some((path, record))
            });
        if let Some(found) = found {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "no record for {token} in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `exitvoice inspect` on a recorded connection's files.
fn inspect(record_path: &Path, record: &Value) -> Value {
    let stem = record_path.with_extension("");
    let hello = stem.with_extension("hello.bin");
    let prefix = stem.with_extension("prefix.bin");
    let mut command = Command::new(env!("CARGO_BIN_EXE_exitvoice"));
    command.arg("inspect").arg("--compact");
    if let Some(negotiated) = record["alpn_negotiated"].as_str() {
        command.args(["--negotiated", negotiated]);
    }
    let out = command
        .arg(&hello)
        .arg(&prefix)
        .output()
        .expect("run inspect");
    assert!(out.status.success(), "inspect: {out:?}");
    serde_json::from_slice(&out.stdout).expect("inspect JSON")
}

/// Checks that `echo` (the live answer) and inspect's analysis of its connection agree.
fn assert_agree(server: &EchoServer, case: &str, token: &str, echo: &Value) {
    let dir = server.dir.path().join("records");
    let (path, record) = record_of(&dir, token);
    let offline = inspect(&path, &record);
    let mut compared = 0;
    for field in FIELDS {
        let live = echo.pointer(field);
        let off = offline.pointer(field);
        assert_eq!(
            live, off,
            "{case}: {field} (live {live:?}, inspect {off:?})"
        );
        compared += usize::from(live.is_some_and(|v| !v.is_null()));
    }
    assert!(
        compared >= 10,
        "{case}: only {compared} fields carried values: {echo}"
    );
}

fn curl_echo(args: &[&str]) -> Vec<Value> {
    let out = curl(args);
    assert!(out.status.success(), "curl {args:?}: {out:?}");
    json_stream(&out.stdout)
}

#[tokio::test]
async fn live_echo_and_inspect_agree_on_every_shape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let records = dir.path().join("records");
    let server = EchoServer::start_in(
        dir,
        &["--record-dir", records.to_str().expect("UTF-8 path")],
        &[],
    );

    let h2 = curl_echo(&[
        "-sk",
        "--http2",
        &server.url("/api/all?token=agree-curl-h2"),
    ]);
    assert_eq!(h2[0]["bucket"], "B");
    assert_agree(&server, "curl h2", "agree-curl-h2", &h2[0]);

    let h1 = curl_echo(&[
        "-sk",
        "--http1.1",
        &server.url("/api/all?token=agree-curl-h1"),
    ]);
    assert_eq!(h1[0]["alpn"]["spoken"], "http/1.1");
    assert_agree(&server, "curl http/1.1", "agree-curl-h1", &h1[0]);

    let two = curl_echo(&[
        "-sk",
        "--http2",
        &server.url("/api/all?token=agree-two-1"),
        &server.url("/api/all?token=agree-two-2"),
    ]);
    assert_eq!(two.len(), 2);
    assert_eq!(
        two[1]["request"]["index"], 2,
        "one connection, two requests"
    );
    assert_eq!(two[1]["request"]["stream_id"], 3);
    assert_eq!(
        two[0]["tls"], two[1]["tls"],
        "the connection's facts are shared"
    );
    assert_agree(&server, "two requests", "agree-two-1", &two[0]);

    let out = Command::new("nghttp")
        .arg(server.url("/api/all?token=agree-nghttp"))
        .output()
        .expect("nghttp is installed (scripts/install-test-deps.sh)");
    assert!(out.status.success(), "nghttp: {out:?}");
    let nghttp: Value = serde_json::from_slice(&out.stdout).expect("nghttp echo");
    assert!(
        nghttp["http2"]["akamai_fingerprint"]
            .as_str()
            .is_some_and(|a| !a.contains("|0|")),
        "nghttp sends PRIORITY frames: {nghttp}"
    );
    assert_agree(&server, "nghttp", "agree-nghttp", &nghttp);

    // ALPN h2 negotiated, then HTTP/1.1 spoken: bucket D, seen offline with --negotiated.
    let config = client_config(&server.cert_pem(), &[b"h2", b"http/1.1"]);
    let mut tls = tls_connect(server.port, config).await.expect("connect");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let downgrade = http1_body(&http1_request(&mut tls, "/api/all?token=agree-downgrade").await);
    drop(tls);
    assert_eq!(downgrade["bucket"], "D");
    assert_agree(&server, "downgrade", "agree-downgrade", &downgrade);
}
