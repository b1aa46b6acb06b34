//! `audit --every … --metrics-listen`: the runs, the probes by
//! outcome and the latest run's exits by state, bucket and route in OpenMetrics text, parsed
//! here and scraped by a real Prometheus (Debian's `prometheus`), read back through its HTTP API.
//! One exit through a real tinyproxy, one dead port (a probe failure with an error class).

mod prometheus;
mod support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use prometheus::{parse_exposition, value, Prometheus};
use support::{EchoServer, Proxy};

/// `GET /metrics` on `addr` with curl: the body, when it answered 200.
fn scrape(addr: SocketAddr) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sf", &format!("http://{addr}/metrics")])
        .output()
        .expect("curl is installed (scripts/install-test-deps.sh)");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_scheduled_audit_exposes_its_runs_probes_and_exits() {
    let echo = EchoServer::start();
    let tiny = Proxy::tinyproxy();
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port");
    let work = tempfile::tempdir().unwrap();
    let exits = support::exits_file(
        work.path(),
        &echo,
        &[
            ("tiny", format!("http://127.0.0.1:{}", tiny.port)),
            ("dead", format!("http://{dead}")),
        ],
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .arg("audit")
        .arg("--exits")
        .arg(&exits)
        .arg("--db")
        .arg(work.path().join("audit.db"))
        .args(["--every", "1h", "--samples", "2", "--retries", "0"])
        .args(["--spacing", "10ms", "--jitter", "10ms"])
        .args(["--metrics-listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(work.path().join("stderr")).unwrap())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let addr: SocketAddr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| {
            line.strip_prefix("metrics on http://")
                .and_then(|rest| rest.strip_suffix("/metrics"))
                .map(|a| a.parse().expect("address"))
        })
        .expect("the metrics address is printed");

    let deadline = Instant::now() + Duration::from_secs(60);
    let text = loop {
        let text = scrape(addr).unwrap_or_default();
        if text.contains("exitvoice_audit_runs_total 1") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let (types, samples) = parse_exposition(&text);
    let log = || std::fs::read_to_string(work.path().join("stderr")).unwrap_or_default();
    assert_eq!(
        value(&samples, "exitvoice_audit_runs_total", &[]),
        Some(1.0),
        "{text}\n{}",
        log()
    );
    assert_eq!(types["exitvoice_audit_probes"], "counter");
    assert_eq!(types["exitvoice_audit_exits_by_route"], "gauge");
    assert_eq!(
        value(
            &samples,
            "exitvoice_audit_probes_total",
            &[("outcome", "ok")]
        ),
        Some(2.0),
        "two samples through tinyproxy: {text}"
    );
    let failed: f64 = samples
        .iter()
        .filter(|s| s.name == "exitvoice_audit_probes_total")
        .filter(|s| s.labels.get("outcome").is_some_and(|o| o != "ok"))
        .map(|s| s.value)
        .sum();
    assert_eq!(failed, 2.0, "two failed samples on the dead port: {text}");
    for family in [
        "exitvoice_audit_exits_by_state",
        "exitvoice_audit_exits_by_bucket",
        "exitvoice_audit_exits_by_route",
    ] {
        assert_eq!(
            value(&samples, family, &[]),
            Some(2.0),
            "{family}: both exits, once each: {text}"
        );
    }
    assert_eq!(
        value(
            &samples,
            "exitvoice_audit_exits_by_route",
            &[("route", "quarantine")]
        ),
        Some(1.0),
        "the dead port is quarantined: {text}"
    );
    assert!(value(&samples, "exitvoice_audit_last_run_seconds", &[]).is_some_and(|s| s > 0.0));

    let prometheus = Prometheus::start(addr);
    let up = prometheus.value_until(r#"up{job="exitvoice"}"#, |v| v == 1.0);
    assert_eq!(up, 1.0);
    let probes = prometheus.value_until("sum(exitvoice_audit_probes_total)", |v| v == 4.0);
    assert_eq!(
        probes, 4.0,
        "every probe of the run, as Prometheus stored it"
    );
    let exits = prometheus.value_until("sum(exitvoice_audit_exits_by_state)", |v| v == 2.0);
    assert_eq!(exits, 2.0);
    let _ = child.kill();
    let _ = child.wait();
}
