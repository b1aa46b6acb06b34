//! The echo server's own coherence, in each `/api/all` answer, on real curl.
//!
//! Expected values come from what the client is, not from our output: Debian's curl is built on
//! OpenSSL and nghttp2 and names itself `curl/…`, so as itself it is coherent; the same curl
//! sending Chrome's User-Agent claims a browser its TLS contradicts. The auditor, reading the
//! same echo with the same rules (`exitvoice_auditor::coherence`), must agree with the echo on
//! everything but the User-Agent (which the echo's layers carry as a name only). The
//! downgrade case (ALPN h2, HTTP/1.1 spoken) is in `tests/echo_downgrade.rs`.
//!
//! Run with `cargo test --test echo_coherence`; needs curl (scripts/install-test-deps.sh).

mod echo_support;

use echo_support::{curl, json_stream, EchoServer};
use serde_json::{json, Value};

/// A desktop Chrome User-Agent (the auditor's `chrome` profile sends this one).
const CHROME_UA: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
                         Chrome/131.0.0.0 Safari/537.36";

/// One `/api/all` answer to curl with `args`.
fn echo(server: &EchoServer, args: &[&str]) -> Value {
    let url = server.url("/api/all");
    let mut all = vec!["-sk"];
    all.extend_from_slice(args);
    all.push(&url);
    let out = curl(&all);
    assert!(out.status.success(), "curl {args:?}: {out:?}");
    json_stream(&out.stdout).remove(0)
}

/// The auditor's judgement of the same echo.
fn auditor_view(echo: &Value) -> Value {
    let echo: exitvoice_schema::Echo = serde_json::from_value(echo.clone()).expect("an Echo");
    serde_json::to_value(exitvoice_auditor::coherence::of_echo(&echo)).expect("serialize")
}

#[test]
fn curl_as_itself_is_coherent_and_as_chrome_is_not() {
    let server = EchoServer::start(&[]);

    let itself = echo(&server, &["--http2"]);
    let coherence = &itself["coherence"];
    assert_eq!(coherence["tls_family"]["name"], "openssl", "{coherence}");
    assert_eq!(coherence["http_family"]["name"], "nghttp2", "{coherence}");
    assert_eq!(
        coherence["ua_family"],
        json!({"name": "curl", "exact": false})
    );
    assert_eq!(coherence["reasons"], json!([]));
    assert_eq!(coherence["score"], 1.0);
    let auditor = auditor_view(&itself);
    for field in ["tls_family", "http_family", "ua_family", "reasons", "score"] {
        assert_eq!(auditor[field], coherence[field], "{field}");
    }

    let disguised = echo(&server, &["--http2", "-A", CHROME_UA]);
    let coherence = &disguised["coherence"];
    assert_eq!(coherence["tls_family"]["name"], "openssl", "{coherence}");
    assert_eq!(coherence["ua_family"]["name"], "chrome", "{coherence}");
    assert_eq!(coherence["reasons"], json!(["ua_family_ne_tls_family"]));
    let score = coherence["score"].as_f64().expect("a score");
    assert!((score - 0.6).abs() < 1e-9, "{coherence}");
    // The auditor takes the User-Agent family from the echo (it keeps no header values): it
    // judges the disguised curl as the echo does.
    let auditor = auditor_view(&disguised);
    for field in ["tls_family", "http_family", "ua_family", "reasons", "score"] {
        assert_eq!(auditor[field], coherence[field], "{field}");
    }

    // HTTP/1.1 negotiated and spoken: no HTTP/2 family, nothing incoherent.
    let http1 = echo(&server, &["--http1.1"]);
    let coherence = &http1["coherence"];
    assert_eq!(http1["alpn"]["spoken"], "http/1.1");
    assert_eq!(coherence["http_family"], Value::Null, "{coherence}");
    assert_eq!(coherence["ua_family"]["name"], "curl", "{coherence}");
    assert_eq!(coherence["reasons"], json!([]));
    // No User-Agent at all: no UA family, and the field is left out.
    let anonymous = echo(&server, &["--http2", "-H", "User-Agent:"]);
    assert!(
        anonymous["coherence"].get("ua_family").is_none(),
        "{anonymous}"
    );

    // Only the full echo is judged: the layer and clean views stay as they were.
    for path in ["/api/clean", "/api/tls", "/api/http2"] {
        let out = curl(&["-sk", "--http2", &server.url(path)]);
        let body = &json_stream(&out.stdout)[0];
        assert!(body.get("coherence").is_none(), "{path}: {body}");
    }
}
