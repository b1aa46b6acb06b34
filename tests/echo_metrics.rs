//! The Prometheus exposition (issue 14, §1): `--metrics-listen` serves the echo's counters in
//! OpenMetrics text; a real Prometheus server (Debian's `prometheus`, started here on a free
//! loopback port with a generated config and its own storage directory) scrapes it, and the
//! series are read back through Prometheus' HTTP API. Needs prometheus and curl
//! (scripts/install-test-deps.sh).

mod echo_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use echo_support::{curl, EchoServer};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// One parsed sample line: metric name, labels, value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses OpenMetrics text (OpenMetrics 1.0, "Text format"): `# TYPE`/`# HELP`/`# UNIT`
/// lines, samples `name{label="value",…} value`, and the closing `# EOF`. Panics on anything
/// else, so a malformed exposition fails the test.
fn parse_exposition(text: &str) -> (BTreeMap<String, String>, Vec<Sample>) {
    let mut types = BTreeMap::new();
    let mut samples = Vec::new();
    let mut lines = text.lines().peekable();
    let mut saw_eof = false;
    while let Some(line) = lines.next() {
        if line == "# EOF" {
            assert!(lines.peek().is_none(), "nothing may follow # EOF");
            saw_eof = true;
            break;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            types.insert(name.to_owned(), kind.to_owned());
            continue;
        }
        if line.starts_with("# HELP ") || line.starts_with("# UNIT ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("sample: series value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("value in {line:?}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').expect("labels close with }");
                let labels = body
                    .split(',')
                    .filter(|pair| !pair.is_empty())
                    .map(|pair| {
                        let (key, quoted) = pair.split_once('=').expect("label key=value");
                        let value = quoted
                            .strip_prefix('"')
                            .and_then(|v| v.strip_suffix('"'))
                            .expect("quoted label value");
                        (key.to_owned(), value.to_owned())
                    })
                    .collect();
                (name.to_owned(), labels)
            }
            None => (series.to_owned(), BTreeMap::new()),
        };
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "metric name {name:?}"
        );
        samples.push(Sample {
            name,
            labels,
            value,
        });
    }
    assert!(saw_eof, "the exposition ends with # EOF");
    (types, samples)
}

/// The sum of the samples `name` whose labels include all of `labels`; `None` if there is none.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
        .reduce(|sum, v| sum + v)
}

/// A Prometheus server on a free loopback port; killed on drop.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts `prometheus` scraping `target` every second. The port is picked free and could be
    /// taken before Prometheus binds it, so the start is retried on another port.
    fn start(target: SocketAddr) -> Self {
        let mut failures = Vec::new();
        for _ in 0..3 {
            let dir = tempfile::tempdir().expect("tempdir");
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("free port")
                .port();
            let config = dir.path().join("prometheus.yml");
            std::fs::write(
                &config,
                format!(
                    "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                     scrape_configs:\n  - job_name: exitvoice\n    scrape_interval: 1s\n\
                     \x20   static_configs:\n      - targets: ['{target}']\n"
                ),
            )
            .expect("write prometheus.yml");
            let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log");
            let mut child = Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("prometheus is installed (scripts/install-test-deps.sh)");
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                let ready = curl(&["-sf", &format!("http://127.0.0.1:{port}/-/ready")]);
                if ready.status.success() {
                    return Self {
                        child,
                        port,
                        _dir: dir,
                    };
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            let _ = child.kill();
            let _ = child.wait();
            failures.push(
                std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default(),
            );
        }
        panic!("prometheus did not start: {failures:#?}");
    }

    /// `GET /api/v1/query?query=…`: the result vector.
    fn query(&self, promql: &str) -> Vec<Value> {
        let out = curl(&[
            "-sf",
            "--get",
            "--data-urlencode",
            &format!("query={promql}"),
            &format!("http://127.0.0.1:{}/api/v1/query", self.port),
        ]);
        let body: Value = serde_json::from_slice(&out.stdout).expect("Prometheus API JSON");
        assert_eq!(body["status"], "success", "{body}");
        body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The single value of `promql`, once Prometheus has one that satisfies `want` (at most
    /// 30 s: a few scrapes).
    fn value_until(&self, promql: &str, want: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let result = self.query(promql);
            let value = result
                .first()
                .and_then(|series| series["value"][1].as_str())
                .and_then(|v| v.parse::<f64>().ok());
            if let Some(value) = value {
                if want(value) || Instant::now() > deadline {
                    return value;
                }
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus has no {promql} after 30 s: {result:?}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
