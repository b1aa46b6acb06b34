//! Bucket D: a client that negotiates ALPN `h2` and then speaks HTTP/1.1 still gets an HTTP/1.1
//! answer, and its echo says so, bucket and coherence. The client is rustls (curl cannot be made
//! to do this).
//!
//! Run with `cargo test --test echo_downgrade`.

mod echo_support;

use echo_support::{client_config, http1_body, http1_request, tls_connect, EchoServer};

#[tokio::test]
async fn alpn_h2_then_http1_is_answered_in_http1_and_reported_as_bucket_d() {
    let server = EchoServer::start(&[]);
    let config = client_config(&server.cert_pem(), &[b"h2", b"http/1.1"]);
    let mut stream = tls_connect(server.port, config).await.expect("handshake");
    let (_, session) = stream.get_ref();
    assert_eq!(
        session.alpn_protocol(),
        Some(&b"h2"[..]),
        "the server chose h2"
    );

    let response = http1_request(&mut stream, "/api/all?token=downgrade").await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let echo = http1_body(&response);
    assert_eq!(
        echo["alpn"]["offered"],
        serde_json::json!(["h2", "http/1.1"])
    );
    assert_eq!(echo["alpn"]["negotiated"], "h2");
    assert_eq!(echo["alpn"]["spoken"], "http/1.1");
    assert_eq!(echo["bucket"], "D");
    assert_eq!(
        echo["http1"]["request_line"],
        "GET /api/all?token=downgrade HTTP/1.1"
    );
    assert!(echo["http2"].is_null());
    // Coherence: the one reason is the downgrade. The client is rustls (its
    // TLS 1.3 suites AES-256 first) and names no known client (`exitvoice-test`).
    let coherence = &echo["coherence"];
    assert_eq!(coherence["tls_family"]["name"], "rustls", "{coherence}");
    assert_eq!(coherence["http_family"], serde_json::Value::Null);
    assert!(coherence.get("ua_family").is_none(), "{coherence}");
    assert_eq!(
        coherence["reasons"],
        serde_json::json!(["alpn_h2_spoke_http1"])
    );
    assert_eq!(coherence["score"], 0.5);

    let rows = server.rows_until(|rows| !rows.is_empty()).await;
    assert_eq!(
        rows.first().map(|r| r.summary["bucket"].clone()),
        Some("D".into())
    );
}
