//! The Prometheus exposition: `--metrics-listen` serves the echo's counters in
//! OpenMetrics text; a real Prometheus server (Debian's `prometheus`, started here on a free
//! loopback port with a generated config and its own storage directory) scrapes it, and the
//! series are read back through Prometheus' HTTP API. Needs prometheus and curl
//! (scripts/install-test-deps.sh).

mod echo_support;
mod prometheus;

use echo_support::{curl, EchoServer};
use prometheus::{parse_exposition, value, Prometheus};
use tokio::io::AsyncWriteExt;

/// Traffic every series below needs: two h2 requests and one HTTP/1.1 request (curl), and one
/// connection that is no TLS at all.
async fn make_traffic(server: &EchoServer) {
    let out = curl(&[
        "-sk",
        "--http2",
        &server.url("/api/all?token=metrics-h2"),
        &server.url("/api/clean"),
    ]);
    assert!(out.status.success());
    let out = curl(&["-sk", "--http1.1", &server.url("/api/all?token=metrics-h1")]);
    assert!(out.status.success());
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", server.port))
        .await
        .expect("connect");
    tcp.write_all(b"GET / HTTP/1.1\r\n\r\n")
        .await
        .expect("write");
    let mut sink = Vec::new();
    let _ = tokio::io::AsyncReadExt::read_to_end(&mut tcp, &mut sink).await;
}

#[tokio::test]
async fn metrics_are_off_by_default() {
    let server = EchoServer::start(&[]);
    assert_eq!(
        server.metrics, None,
        "no --metrics-listen, no metrics listener"
    );
}

#[tokio::test]
async fn the_exposition_parses_and_counts_what_happened() {
    let server = EchoServer::start(&["--metrics-listen", "127.0.0.1:0"]);
    let metrics = server.metrics.expect("metrics address printed");
    make_traffic(&server).await;
    // The observations reach the store (and the write histogram) within the flush interval.
    server.rows_until(|rows| rows.len() >= 4).await;

    let out = curl(&["-si", &format!("http://{metrics}/metrics")]);
    let response = String::from_utf8(out.stdout).expect("UTF-8");
    let (head, body) = response.split_once("\r\n\r\n").expect("head and body");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    let (types, samples) = parse_exposition(body);
    assert_eq!(
        types.get("exitvoice_requests").map(String::as_str),
        Some("counter")
    );
    assert_eq!(
        types.get("exitvoice_write_seconds").map(String::as_str),
        Some("histogram")
    );
    assert_eq!(
        types.get("exitvoice_connections_open").map(String::as_str),
        Some("gauge")
    );
    let h2 = value(&samples, "exitvoice_requests_total", &[("spoken", "h2")]);
    assert_eq!(h2, Some(2.0), "{body}");
    let h1 = value(
        &samples,
        "exitvoice_requests_total",
        &[("spoken", "http/1.1")],
    );
    assert_eq!(h1, Some(1.0), "{body}");
    let invalid = value(
        &samples,
        "exitvoice_handshakes_total",
        &[("outcome", "hello_invalid")],
    );
    assert_eq!(invalid, Some(1.0), "{body}");
    let completed = value(
        &samples,
        "exitvoice_handshakes_total",
        &[("outcome", "completed")],
    );
    assert_eq!(completed, Some(2.0), "{body}");
    assert!(value(&samples, "exitvoice_write_seconds_count", &[]) >= Some(1.0));
    assert!(value(&samples, "exitvoice_database_file_bytes", &[]) > Some(0.0));
    assert_eq!(
        value(&samples, "exitvoice_queue_capacity", &[]),
        Some(8192.0)
    );
    for reason in ["max_connections", "per_ip", "rate", "penalty"] {
        let refused = value(
            &samples,
            "exitvoice_connections_refused_total",
            &[("reason", reason)],
        );
        assert_eq!(refused, Some(0.0), "{reason}");
    }
    // The exposition is on its own listener: the TLS port does not serve it.
    let on_tls = curl(&["-sk", &server.url("/metrics")]);
    assert!(!String::from_utf8_lossy(&on_tls.stdout).contains("exitvoice_requests_total"));
}

#[tokio::test]
async fn a_real_prometheus_scrapes_the_series() {
    let server = EchoServer::start(&["--metrics-listen", "127.0.0.1:0"]);
    let metrics = server.metrics.expect("metrics address printed");
    make_traffic(&server).await;
    let prometheus = Prometheus::start(metrics);

    let up = prometheus.value_until(r#"up{job="exitvoice"}"#, |v| v == 1.0);
    assert_eq!(up, 1.0, "the scrape succeeded");
    let h2 = prometheus.value_until(r#"sum(exitvoice_requests_total{spoken="h2"})"#, |v| {
        v >= 2.0
    });
    assert_eq!(h2, 2.0);
    let invalid = prometheus.value_until(
        r#"exitvoice_handshakes_total{outcome="hello_invalid"}"#,
        |v| v >= 1.0,
    );
    assert_eq!(invalid, 1.0);
    let writes = prometheus.value_until("exitvoice_write_seconds_count", |v| v >= 1.0);
    assert!(writes >= 1.0);
    let open = prometheus.value_until("exitvoice_connections_open", |v| v == 0.0);
    assert_eq!(open, 0.0, "every connection ended");

    // Traffic after the first scrapes shows up in later ones.
    let out = curl(&["-sk", "--http1.1", &server.url("/api/all")]);
    assert!(out.status.success());
    let h1 = prometheus.value_until(r#"exitvoice_requests_total{spoken="http/1.1"}"#, |v| {
        v >= 2.0
    });
    assert_eq!(h1, 2.0);
}
