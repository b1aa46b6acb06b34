//! A Prometheus server of the tests' own (Debian's `prometheus`, on a free loopback port with a
//! generated config and its own storage directory), and a parser of the OpenMetrics text it
//! scrapes. Needs prometheus and curl (scripts/install-test-deps.sh).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Runs curl with `args`.
fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(args)
        .output()
        .expect("curl is installed (scripts/install-test-deps.sh)")
}

/// One parsed sample line: metric name, labels, value.
#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses OpenMetrics text (OpenMetrics 1.0, "Text format"): `# TYPE`/`# HELP`/`# UNIT`
/// lines, samples `name{label="value",…} value`, and the closing `# EOF`. Panics on anything
/// else, so a malformed exposition fails the test.
pub fn parse_exposition(text: &str) -> (BTreeMap<String, String>, Vec<Sample>) {
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
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
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
pub struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts `prometheus` scraping `target` every second. The port is picked free and could be
    /// taken before Prometheus binds it, so the start is retried on another port.
    pub fn start(target: SocketAddr) -> Self {
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
    pub fn query(&self, promql: &str) -> Vec<Value> {
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
    pub fn value_until(&self, promql: &str, want: impl Fn(f64) -> bool) -> f64 {
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
