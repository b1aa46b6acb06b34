//! `exitvoice serve` against real curl: HTTP/2 and HTTP/1.1 echoes that match what is stored,
//! each echo route's JSON, two requests on one HTTP/2 connection, the certificate pin, a client
//! rejecting the certificate, `--record-dir`, and SSLKEYLOGFILE.
//!
//! Run with `cargo test --test echo_curl`; needs curl (scripts/install-test-deps.sh).

mod echo_support;

use echo_support::{as_stored, curl, json_stream, EchoServer};

/// The HTTP/2 client connection preface (RFC 9113 section 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

#[tokio::test]
async fn curl_http2_and_http1_get_their_echo_and_the_same_observation_is_stored() {
    let server = EchoServer::start(&[]);

    let out = curl(&["-sk", "--http2", &server.url("/api/all?token=tok-h2")]);
    assert!(out.status.success(), "curl --http2: {out:?}");
    let h2 = &json_stream(&out.stdout)[0];
    assert_eq!(h2["schema_version"], 1);
    assert_eq!(h2["token"], "tok-h2");
    assert_eq!(h2["peer"]["ip"], "127.0.0.1");
    assert_eq!(h2["alpn"]["offered"], serde_json::json!(["h2", "http/1.1"]));
    assert_eq!(h2["alpn"]["negotiated"], "h2");
    assert_eq!(h2["alpn"]["spoken"], "h2");
    assert!(
        h2["tls"]["ja4"]
            .as_str()
            .is_some_and(|ja4| ja4.starts_with("t13i")),
        "{h2}"
    );
    assert_eq!(h2["tls"]["ja3_hash"].as_str().map(str::len), Some(32));
    assert!(h2["http2"]["akamai_fingerprint"]
        .as_str()
        .is_some_and(|a| a.contains('|')));
    assert_eq!(
        h2["http2"]["pseudo_header_order"],
        serde_json::json!([":method", ":path", ":scheme", ":authority"])
    );
    assert_eq!(
        h2["request"],
        serde_json::json!({"stream_id": 1, "index": 1})
    );
    assert_eq!(h2["bucket"], "B", "curl is a library, not a browser");
    assert!(h2["http1"].is_null());

    let out = curl(&["-sk", "--http1.1", &server.url("/api/all?token=tok-h1")]);
    assert!(out.status.success(), "curl --http1.1: {out:?}");
    let h1 = &json_stream(&out.stdout)[0];
    assert_eq!(h1["alpn"]["offered"], serde_json::json!(["http/1.1"]));
    assert_eq!(h1["alpn"]["negotiated"], "http/1.1");
    assert_eq!(h1["alpn"]["spoken"], "http/1.1");
    assert_eq!(
        h1["http1"]["request_line"],
        "GET /api/all?token=tok-h1 HTTP/1.1"
    );
    assert_eq!(
        h1["http1"]["header_order"],
        serde_json::json!(["Host", "User-Agent", "Accept"])
    );
    assert!(h1["bucket"].is_null(), "no h2 offered: no bucket");
    assert!(h1["request"]["stream_id"].is_null());

    let rows = server
        .rows_until(|rows| rows.iter().filter(|r| r.token.is_some()).count() >= 2)
        .await;
    let stored_h2 = rows
        .iter()
        .find(|r| r.token.as_deref() == Some("tok-h2"))
        .expect("h2 observation stored");
    assert_eq!(
        stored_h2.summary,
        as_stored(h2),
        "the stored summary is the echo that was answered"
    );
    assert_eq!(stored_h2.request_index, 1);
    assert_eq!(
        stored_h2.hello.first(),
        Some(&0x16),
        "raw ClientHello records"
    );
    assert!(
        stored_h2.prefix.starts_with(PREFACE),
        "tapped decrypted prefix"
    );
    let stored_h1 = rows
        .iter()
        .find(|r| r.token.as_deref() == Some("tok-h1"))
        .expect("h1 observation stored");
    assert_eq!(stored_h1.summary, as_stored(h1));
    assert!(stored_h1
        .prefix
        .starts_with(b"GET /api/all?token=tok-h1 HTTP/1.1\r\n"));
}

#[tokio::test]
async fn two_tokens_on_one_h2_connection_report_stream_3_index_2() {
    let server = EchoServer::start(&[]);
    // curl reuses one connection for the URLs of one command line.
    let out = curl(&[
        "-sk",
        "--http2",
        &server.url("/probe/first-token"),
        &server.url("/probe/second-token"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let echoes = json_stream(&out.stdout);
    assert_eq!(echoes.len(), 2);
    assert_eq!(echoes[0]["token"], "first-token");
    assert_eq!(
        echoes[0]["request"],
        serde_json::json!({"stream_id": 1, "index": 1})
    );
    assert_eq!(echoes[1]["token"], "second-token");
    assert_eq!(
        echoes[1]["request"],
        serde_json::json!({"stream_id": 3, "index": 2})
    );
    assert_eq!(
        echoes[1]["bucket"], "C",
        "another probe's request came first"
    );
    assert_eq!(
        echoes[0]["peer"]["port"], echoes[1]["peer"]["port"],
        "one connection"
    );

    let rows = server.rows_until(|rows| rows.len() >= 2).await;
    let conn_ids: Vec<&str> = rows.iter().map(|r| r.conn_id.as_str()).collect();
    assert_eq!(conn_ids.len(), 2);
    assert_eq!(conn_ids[0], conn_ids[1]);
}

#[tokio::test]
async fn printed_pin_is_the_certificate_spki_pin_curl_checks() {
    let server = EchoServer::start(&[]);
    let url = server.url("/api/clean");
    let pinned = curl(&["-sk", "--pinnedpubkey", &server.pin, &url]);
    assert!(
        pinned.status.success(),
        "curl accepts the printed pin: {pinned:?}"
    );
    let clean = &json_stream(&pinned.stdout)[0];
    assert!(clean["ja4"].is_string());
    assert!(
        clean.get("tls").is_none(),
        "clean carries hashes and ids only"
    );
    let wrong = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let refused = curl(&["-sk", "--pinnedpubkey", wrong, &url]);
    assert_eq!(refused.status.code(), Some(90), "curl: pinned key mismatch");
}

#[tokio::test]
async fn every_echo_route_answers_json_with_its_layer() {
    let server = EchoServer::start(&[]);
    for (path, http, key) in [
        ("/api/clean", "--http2", "ja4"),
        ("/api/all", "--http2", "tls"),
        ("/api/tls", "--http2", "tls"),
        ("/api/http2", "--http2", "http2"),
        ("/api/http1", "--http1.1", "http1"),
    ] {
        let out = curl(&["-sk", http, "-w", "\n%{content_type}", &server.url(path)]);
        let text = String::from_utf8_lossy(&out.stdout);
        let (body, kind) = text.rsplit_once('\n').expect("content type line");
        assert_eq!(kind, "application/json", "{path}");
        let body: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert!(!body[key].is_null(), "{path}: no {key} in {body}");
    }
}

#[tokio::test]
async fn unknown_path_gets_a_json_404_with_the_fingerprint() {
    let server = EchoServer::start(&[]);
    let out = curl(&["-sk", "--http2", "-w", "\n%{http_code}", &server.url("/")]);
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, code) = text.rsplit_once('\n').expect("status line");
    assert_eq!(code, "404");
    let body: serde_json::Value = serde_json::from_str(body).expect("JSON 404");
    assert_eq!(body["error"], "not_found");
    assert!(body["fingerprint"]["ja4"].is_string());
    assert!(body["fingerprint"]["akamai_fingerprint_hash"].is_string());
}

#[tokio::test]
async fn client_rejecting_the_certificate_leaves_an_observation_with_its_hello() {
    let server = EchoServer::start(&[]);
    let resolve = format!("localhost:{}:127.0.0.1", server.port);
    let url = format!("https://localhost:{}/api/all", server.port);
    // Without -k curl refuses the self-signed certificate and aborts the handshake.
    let out = curl(&["-s", "--resolve", &resolve, &url]);
    assert_eq!(out.status.code(), Some(60), "curl: certificate problem");

    let rows = server.rows_until(|rows| !rows.is_empty()).await;
    let row = rows
        .first()
        .expect("an observation for the refused connection");
    assert_eq!(row.request_index, 0);
    let failure = row.failure.as_deref().unwrap_or_default();
    assert!(
        failure.starts_with("tls_alert_received"),
        "failure: {failure}"
    );
    assert_eq!(row.sni.as_deref(), Some("localhost"));
    assert_eq!(row.hello.first(), Some(&0x16));
    assert!(row.prefix.is_empty());
    assert!(
        row.summary["tls"]["ja4"].is_string(),
        "the hello was parsed: {}",
        row.summary
    );
    assert_eq!(
        row.summary["failure"], "tls_alert_received",
        "the typed reason"
    );

    let health = server.healthz();
    assert_eq!(health["handshakes"]["failures"]["tls_alert_received"], 1);
}

#[tokio::test]
async fn record_dir_gets_the_file_trio_and_sslkeylogfile_the_secrets() {
    let records = tempfile::tempdir().expect("tempdir");
    let keylog_dir = tempfile::tempdir().expect("tempdir");
    let keylog = keylog_dir.path().join("keys.log");
    let record_dir = records.path().to_str().expect("utf-8 path");
    let server = EchoServer::start_with_env(
        &["--record-dir", record_dir],
        &[("SSLKEYLOGFILE", keylog.as_path())],
    );
    let resolve = format!("localhost:{}:127.0.0.1", server.port);
    let url = format!("https://localhost:{}/api/all", server.port);
    let out = curl(&["-sk", "--http2", "--resolve", &resolve, &url]);
    assert!(out.status.success());

    let rows = server.rows_until(|rows| !rows.is_empty()).await;
    let row = rows.first().expect("stored");
    let stem = records.path().join(&row.conn_id);
    let json = recorded_json(&stem);
    let hello = std::fs::read(format!("{}.hello.bin", stem.display())).expect("hello.bin");
    let prefix = std::fs::read(format!("{}.prefix.bin", stem.display())).expect("prefix.bin");
    assert_eq!(hello, row.hello);
    assert!(prefix.starts_with(PREFACE));
    assert_eq!(json["sni"], "localhost");
    assert_eq!(json["conn_id"], row.conn_id.as_str());
    assert_eq!(json["alpn_offered"], serde_json::json!(["h2", "http/1.1"]));
    assert_eq!(json["alpn_negotiated"], "h2");
    assert_eq!(json["spoken"], "h2");
    assert_eq!(json["tls_version"], "TLSv1.3");
    assert!(
        json["cipher"]
            .as_str()
            .is_some_and(|c| c.starts_with("TLS_")),
        "{json}"
    );
    assert_eq!(
        json["first_request"],
        serde_json::json!({"method": "GET", "path": "/api/all", "stream_id": 1})
    );
    assert_eq!(json["hello_len"], hello.len());
    assert_eq!(json["prefix_len"], prefix.len());
    assert!(json["peer"]
        .as_str()
        .is_some_and(|p| p.starts_with("127.0.0.1:")));
    assert!(json["recorder"]
        .as_str()
        .is_some_and(|s| s.starts_with("exitvoice/")));
    assert!(json["failure"].is_null());

    let secrets = std::fs::read_to_string(&keylog).expect("SSLKEYLOGFILE written");
    assert!(
        secrets.contains("CLIENT_HANDSHAKE_TRAFFIC_SECRET"),
        "{secrets}"
    );
    assert!(secrets.contains("CLIENT_TRAFFIC_SECRET_0"));
}

/// The `--record-dir` JSON file of the connection at `stem`, once the server wrote it (when the
/// connection closed).
fn recorded_json(stem: &std::path::Path) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let json_path = stem.with_extension("json");
    while !json_path.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    serde_json::from_slice(&std::fs::read(&json_path).expect("json")).expect("json")
}

#[tokio::test]
async fn negotiated_tls_version_is_recorded_as_curl_names_it() {
    // TLS 1.2 and 1.3: the version is named as OpenSSL (curl's library, and the captures
    // format) names it, whatever rustls calls it; the cipher by its IANA name.
    for max in ["1.2", "1.3"] {
        let records = tempfile::tempdir().expect("tempdir");
        let server = EchoServer::start(&["--record-dir", records.path().to_str().expect("utf-8")]);
        let out = curl(&[
            "-sk",
            "-v",
            "--http1.1",
            "--tls-max",
            max,
            &server.url("/api/clean"),
        ]);
        assert!(out.status.success(), "{out:?}");
        // `* SSL connection using TLSv1.2 / ECDHE-ECDSA-AES256-GCM-SHA384…`
        let verbose = String::from_utf8_lossy(&out.stderr);
        let version = verbose
            .lines()
            .find_map(|line| line.split("SSL connection using ").nth(1))
            .and_then(|rest| rest.split(" / ").next())
            .expect("curl -v names the negotiated version")
            .to_owned();
        assert!(version.ends_with(max), "{version}");
        let rows = server.rows_until(|rows| !rows.is_empty()).await;
        let row = rows.first().expect("stored");
        let json = recorded_json(&records.path().join(&row.conn_id));
        assert_eq!(json["tls_version"], version.as_str(), "{json}");
        assert!(
            json["cipher"]
                .as_str()
                .is_some_and(|c| c.starts_with("TLS_")),
            "{json}"
        );
    }
}

#[tokio::test]
async fn second_request_on_a_keep_alive_http1_connection_echoes_its_own_head() {
    let server = EchoServer::start(&[]);
    let out = curl(&[
        "-sk",
        "--http1.1",
        &server.url("/probe/one"),
        &server.url("/probe/two"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let echoes = json_stream(&out.stdout);
    assert_eq!(echoes.len(), 2);
    assert_eq!(
        echoes[1]["request"],
        serde_json::json!({"stream_id": null, "index": 2})
    );
    assert_eq!(
        echoes[1]["http1"]["request_line"],
        "GET /probe/two HTTP/1.1"
    );
    assert_eq!(
        echoes[0]["http1"]["voice_id"],
        echoes[1]["http1"]["voice_id"]
    );
}

#[tokio::test]
async fn nghttp_priority_tree_streams_do_not_shift_the_request_mapping() {
    let server = EchoServer::start(&[]);
    // nghttp opens its priority tree with PRIORITY frames on streams 3–11 first, so its
    // requests travel on streams 13 and 15: only HEADERS frames count as requests.
    let out = std::process::Command::new("nghttp")
        .args([&server.url("/probe/ng-one"), &server.url("/probe/ng-two")])
        .output()
        .expect("nghttp is installed (scripts/install-test-deps.sh)");
    assert!(out.status.success(), "{out:?}");
    let mut echoes = json_stream(&out.stdout);
    echoes.sort_by_key(|echo| echo["request"]["index"].as_u64());
    assert_eq!(echoes.len(), 2);
    assert_eq!(echoes[0]["token"], "ng-one");
    assert_eq!(
        echoes[0]["request"],
        serde_json::json!({"stream_id": 13, "index": 1})
    );
    assert_eq!(echoes[1]["token"], "ng-two");
    assert_eq!(
        echoes[1]["request"],
        serde_json::json!({"stream_id": 15, "index": 2})
    );
    assert_eq!(echoes[1]["bucket"], "C");
}
