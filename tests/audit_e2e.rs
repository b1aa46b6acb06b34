//! End to end: `exitvoice serve` on loopback, real proxies in front of it, `exitvoice audit
//! --once` through them, and the labels it writes.
//!
//! Needs root and the packages squid, apache2-utils, tinyproxy, dante-server, haproxy, and
//! mitmproxy in `.tools/venv-mitm` (scripts/install-test-deps.sh).

mod support;

use std::path::Path;

use support::{
    audit, exits_file, EchoServer, Proxy, PASSWORD, PASSWORD_ENCODED, SOCKS_USER, TINY_PASSWORD,
    USER,
};

/// The fields that must not change between runs when nothing changed.
fn stable_view(label: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "state": label["state"],
        "bucket": label["bucket"],
        "flags": label["flags"],
        "voices": label["voices"],
        "route": label["route"],
        "egress_ips": label["egress_ips"],
        "url": label["url"],
    })
}

/// Every byte of every file under `dir` (databases, WAL files, labels), except the exits file,
/// which holds the credentials by design.
fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_file() && path.file_name().is_some_and(|n| n != "exits.toml") {
            out.extend(std::fs::read(&path).unwrap());
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn tunnelling_proxies_keep_the_voice_and_labels_repeat() {
    let echo = EchoServer::start();
    let squid = Proxy::squid();
    let tiny = Proxy::tinyproxy_auth();
    let dante = Proxy::dante();
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[
            (
                "squid",
                format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}", squid.port),
            ),
            (
                "tinyproxy",
                format!("http://{USER}:{TINY_PASSWORD}@127.0.0.1:{}", tiny.port),
            ),
            (
                "dante",
                format!(
                    "socks5h://{SOCKS_USER}:{PASSWORD_ENCODED}@127.0.0.1:{}",
                    dante.port
                ),
            ),
        ],
    );
    let db = work.path().join("audit.db");
    let runs: Vec<_> = (0..3).map(|_| audit(&exits, &db, &[])).collect();

    let first = &runs[0];
    assert!(
        first.labels["baseline"]["tls_voice"].is_string(),
        "{}",
        first.labels
    );
    for name in ["squid", "tinyproxy", "dante"] {
        let label = first.exit(name);
        assert_eq!(label["state"], "stable", "{name}: {label}");
        assert_eq!(label["flags"]["tls_preserved"], true, "{name}: {label}");
        assert_eq!(label["flags"]["h2_preserved"], true, "{name}: {label}");
        // A tunnel passes the ClientHello and the connection through untouched.
        assert_eq!(label["flags"]["alpn_preserved"], true, "{name}: {label}");
        assert_eq!(label["flags"]["remuxed"], false, "{name}: {label}");
        assert_eq!(label["flags"]["tls_intercepted"], false, "{name}: {label}");
        assert_eq!(label["bucket"], "A", "{name}: {label}");
        assert_eq!(label["route"], "identity", "{name}: {label}");
        assert_eq!(
            label["route_reasons"],
            serde_json::json!(["stable, browser-shaped, preserved"])
        );
        assert_eq!(label["changes"], serde_json::json!([]), "{name}: {label}");
        // Coherence: the rustls persona with Chrome's h2 and User-Agent is incoherent on
        // purpose; a tunnel keeps exactly that, the User-Agent as the echo read it included.
        let coherence = &label["coherence"];
        assert_eq!(coherence["tls_family"]["name"], "rustls", "{name}: {label}");
        assert_eq!(
            coherence["http_family"]["name"], "chrome",
            "{name}: {label}"
        );
        assert_eq!(coherence["ua_family"]["name"], "chrome", "{name}: {label}");
        assert_eq!(
            coherence["reasons"],
            serde_json::json!(["tls_family_ne_http_family", "ua_family_ne_tls_family"])
        );
        assert_eq!(coherence["score"], coherence["baseline_score"]);
        assert_eq!(coherence["kept"], true, "{name}: {label}");
        assert_eq!(label["coherence_dropped_at"], serde_json::Value::Null);
        assert_eq!(label["quarantined_since"], serde_json::Value::Null);
        assert_eq!(label["samples"], 4, "{name}: {label}");
        assert_eq!(label["egress_ips"], serde_json::json!(["127.0.0.1"]));
        // The exit's voice is the baseline's.
        let baseline_tls = first.labels["baseline"]["tls_voice"].as_str().unwrap();
        assert!(label["voices"][0]
            .as_str()
            .unwrap()
            .starts_with(baseline_tls));
    }
    // Three consecutive --once runs: the same labels.
    for run in &runs[1..] {
        for name in ["squid", "tinyproxy", "dante"] {
            assert_eq!(
                stable_view(run.exit(name)),
                stable_view(first.exit(name)),
                "{name}"
            );
        }
    }
    // Secrets: no password, in clear, percent-encoded or as a Basic token, in logs, labels or DBs.
    let basic = {
        use std::io::Write;
        let mut child = std::process::Command::new("base64")
            .arg("-w0")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        write!(child.stdin.take().unwrap(), "{USER}:{PASSWORD}").unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
    };
    let mut haystack = all_bytes(work.path());
    haystack.extend(all_bytes(echo.dir.path()));
    for run in &runs {
        haystack.extend(run.stderr.as_bytes());
        haystack.extend(run.stdout.as_bytes());
    }
    assert!(
        contains(&haystack, "\"squid\""),
        "the haystack holds the run"
    );
    for secret in [PASSWORD, PASSWORD_ENCODED, TINY_PASSWORD, basic.as_str()] {
        assert!(
            !contains(&haystack, secret),
            "found {secret:?} in logs, labels or databases"
        );
    }
}

#[test]
fn mitmproxy_is_intercepted_and_its_voice_recorded() {
    let echo = EchoServer::start();
    let mitm = Proxy::start("mitmproxy", &[]);
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[("mitm", format!("http://127.0.0.1:{}", mitm.port))],
    );
    let run = audit(&exits, &work.path().join("audit.db"), &[]);
    let label = run.exit("mitm");
    assert_eq!(label["flags"]["tls_intercepted"], true, "{label}");
    assert_eq!(label["flags"]["tls_preserved"], false, "{label}");
    assert_eq!(label["route"], "quarantine", "{label}");
    assert_eq!(label["samples"], 4, "{label}");
    // Its own voice: recorded, and not the auditor's.
    let voice = label["voices"][0].as_str().expect("a recorded voice");
    let baseline_tls = run.labels["baseline"]["tls_voice"].as_str().unwrap();
    assert!(
        !voice.starts_with(baseline_tls),
        "{voice} is the baseline's"
    );
    assert_eq!(
        label["state"], "stable",
        "mitmproxy always speaks the same: {label}"
    );
    assert_eq!(
        label["quarantined_since"], label["last_probe_at"],
        "{label}"
    );
    assert_eq!(label["transition"]["to"], "quarantine", "{label}");
    assert_eq!(
        label["transition"]["from"],
        serde_json::Value::Null,
        "{label}"
    );

    // Say what changed: mitmproxy's own ClientHello (OpenSSL) is not the auditor's (rustls).
    let changes = label["changes"].as_array().expect("changes");
    let change = |field: &str| {
        changes
            .iter()
            .find(|c| c["layer"] == "tls" && c["field"] == field)
            .unwrap_or_else(|| panic!("no tls {field} change: {label}"))
    };
    // The baseline's cipher suites, as its JA3 string says them (decimal, GREASE-free).
    let db = work.path().join("audit.db");
    let records = support::probes(&db);
    let baseline = records.iter().find(|r| r["exit"].is_null()).unwrap();
    let ja3 = baseline["sample"]["echo"]["tls"]["ja3"].as_str().unwrap();
    let ciphers: Vec<String> = ja3
        .split(',')
        .nth(1)
        .unwrap()
        .split('-')
        .map(|c| format!("0x{:04x}", c.parse::<u16>().unwrap()))
        .collect();
    assert_eq!(
        change("cipher_suites")["before"],
        ciphers.join(","),
        "{label}"
    );
    assert_ne!(change("cipher_suites")["after"], ciphers.join(","));
    assert!(change("extensions").is_object());
    // `exitvoice diff` on the two probe ids says the same.
    let mitm_token = records
        .iter()
        .rev()
        .find(|r| r["exit"] == "mitm")
        .and_then(|r| r["token"].as_str())
        .unwrap();
    let baseline_token = baseline["token"].as_str().unwrap();
    let (code, stdout) = support::diff(&[baseline_token, mitm_token, "--json"], &db);
    assert_eq!(code, 1, "voices differ: {stdout}");
    let printed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(&printed, &label["changes"]);
    // And so do the echo server's stored observations of the same two probes. The echo stores
    // a connection's requests asynchronously (at the latest when the connection closes, which
    // mitmproxy may delay upstream): poll a bounded while.
    let echo_db = echo.dir.path().join("echo.db");
    let echo_db = echo_db.to_str().unwrap();
    let no_db = work.path().join("none.db");
    let started = std::time::Instant::now();
    let (code, stdout) = loop {
        let (code, stdout) = support::diff(
            &["--echo-db", echo_db, baseline_token, mitm_token, "--json"],
            &no_db,
        );
        if code != 2 || started.elapsed() > std::time::Duration::from_secs(70) {
            break (code, stdout);
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    assert_eq!(code, 1, "voices differ: {stdout}");
    let stored: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(&stored, &label["changes"]);
    assert!(!no_db.exists(), "diff never creates a database");
    let (code, stdout) = support::diff(&[mitm_token, mitm_token], &db);
    assert_eq!((code, stdout.as_str()), (0, "no voice field differs\n"));
}

#[test]
fn round_robin_over_two_backends_alternates_over_three_mutates() {
    let echo = EchoServer::start();
    let squid = Proxy::squid();
    let mitm = Proxy::start("mitmproxy", &[]);
    // A third voice: mitmproxy without HTTP/2 upstream offers only http/1.1 (another ALPN list,
    // so another TLS voice) and speaks HTTP/1.1.
    let mitm_h1 = Proxy::start("mitmproxy", &["--set", "http2=false"]);
    let rr2 = Proxy::start(
        "haproxy",
        &[&squid.port.to_string(), &mitm.port.to_string()],
    );
    let rr3 = Proxy::start(
        "haproxy",
        &[
            &squid.port.to_string(),
            &mitm.port.to_string(),
            &mitm_h1.port.to_string(),
        ],
    );
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[
            (
                "rr2",
                format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}", rr2.port),
            ),
            (
                "rr3",
                format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}", rr3.port),
            ),
        ],
    );
    // Six samples: rr3 cycles through all three backends twice.
    let run = audit(
        &exits,
        &work.path().join("audit.db"),
        &["--samples", "6", "--concurrency", "1"],
    );
    let rr2 = run.exit("rr2");
    assert_eq!(rr2["state"], "alternating", "{rr2}");
    assert_eq!(rr2["voices"].as_array().unwrap().len(), 2, "{rr2}");
    // Squid passes the auditor's ClientHello, mitmproxy sends its own: the switch says so.
    let switch = rr2["switch_changes"].as_array().unwrap();
    assert!(
        switch
            .iter()
            .any(|c| c["layer"] == "tls" && c["field"] == "cipher_suites"),
        "{rr2}"
    );
    let rr3 = run.exit("rr3");
    assert_eq!(rr3["state"], "mutating", "{rr3}");
    assert_eq!(rr3["voices"].as_array().unwrap().len(), 3, "{rr3}");
    assert_eq!(rr3["route"], "quarantine", "{rr3}");
    // Every reason, not only the first: intercepted, and mutating.
    let reasons = rr3["route_reasons"].as_array().unwrap();
    assert_eq!(reasons[0], "tls_intercepted", "{rr3}");
    assert_eq!(reasons[1], "tls_reoriginated", "{rr3}");
    assert!(reasons.contains(&"state mutating".into()), "{rr3}");
    assert!(reasons.contains(&"tls not preserved".into()), "{rr3}");

    // A router that accepts interception and re-originated TLS for stateless work: mutating is
    // `stateless`.
    let lenient = work.path().join("lenient.toml");
    let mut text = std::fs::read_to_string(&exits).unwrap();
    text.push_str("\n[route]\nquarantine_intercepted = false\nquarantine_reoriginated = false\n");
    std::fs::write(&lenient, text).unwrap();
    let run = audit(
        &lenient,
        &work.path().join("lenient.db"),
        &["--samples", "6", "--concurrency", "1"],
    );
    let rr3 = run.exit("rr3");
    assert_eq!(rr3["state"], "mutating", "{rr3}");
    assert_eq!(rr3["route"], "stateless", "{rr3}");
    assert_eq!(rr3["route_reason"], "state mutating", "{rr3}");
    let rr2 = run.exit("rr2");
    assert_eq!(
        rr2["route"], "anonymous",
        "alternating is not mutating: {rr2}"
    );
}

/// A quarantined exit leaves quarantine only after `--recover-after` clean probes in a row, and
/// its label says since when, when it recovered, and its last transition.
#[test]
fn quarantine_lasts_until_enough_clean_probes() {
    let echo = EchoServer::start();
    let squid = Proxy::squid();
    let work = tempfile::tempdir().unwrap();
    let with_password = |password: &str| {
        exits_file(
            work.path(),
            &echo,
            &[(
                "squid",
                format!("http://{USER}:{password}@127.0.0.1:{}", squid.port),
            )],
        )
    };
    let db = work.path().join("audit.db");
    let bad = with_password("not-it");
    let run = audit(&bad, &db, &["--samples", "2", "--retries", "0"]);
    let label = run.exit("squid");
    assert_eq!(label["route"], "quarantine", "{label}");
    assert_eq!(
        label["route_reason"], "failing: 2 of 2 probes failed",
        "{label}"
    );
    let since = label["quarantined_since"].clone();
    assert_eq!(since, label["last_probe_at"], "{label}");

    // Fixed: 3 clean probes (2 of 5 failed: the window alone would pass), 3 < 4.
    let good = with_password(PASSWORD_ENCODED);
    let run = audit(&good, &db, &["--samples", "3"]);
    let label = run.exit("squid");
    assert_eq!(label["route"], "quarantine", "{label}");
    assert_eq!(
        label["route_reason"], "recovering: 3 of 4 clean probes",
        "{label}"
    );
    assert_eq!(label["clean_samples"], 3, "{label}");
    assert_eq!(label["quarantined_since"], since, "{label}");

    // --recover-after raises the bar: 4 clean probes are not 5.
    let run = audit(&good, &db, &["--samples", "1", "--recover-after", "5"]);
    let label = run.exit("squid");
    assert_eq!(
        label["route_reason"], "recovering: 4 of 5 clean probes",
        "{label}"
    );

    let run = audit(&good, &db, &["--samples", "1"]);
    let label = run.exit("squid");
    assert_eq!(label["route"], "identity", "{label}");
    assert_eq!(label["clean_samples"], 5, "{label}");
    assert_eq!(
        label["quarantined_since"],
        serde_json::Value::Null,
        "{label}"
    );
    assert_eq!(label["recovered_at"], label["last_probe_at"], "{label}");
    let transition = &label["transition"];
    assert_eq!(
        (&transition["from"], &transition["to"], &transition["at"]),
        (
            &"quarantine".into(),
            &"identity".into(),
            &label["last_probe_at"]
        ),
        "{label}"
    );
}

#[test]
fn failure_classes_reach_the_labels() {
    let echo = EchoServer::start();
    let squid = Proxy::squid();
    // Accepts and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for socket in silent.incoming() {
            held.push(socket);
        }
    });
    let (_closed, closed) = support::closed_port();
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[
            (
                "wrong-password",
                format!("http://{USER}:not-it@127.0.0.1:{}", squid.port),
            ),
            (
                "closed",
                format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{closed}"),
            ),
            (
                "silent",
                format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{silent_port}"),
            ),
        ],
    );
    let started = std::time::Instant::now();
    let run = audit(
        &exits,
        &work.path().join("audit.db"),
        &["--samples", "2", "--retries", "0", "--tunnel-timeout", "1s"],
    );
    for (name, class) in [
        ("wrong-password", "proxy_auth"),
        ("closed", "connect_refused"),
        ("silent", "timeout"),
    ] {
        let label = run.exit(name);
        assert_eq!(label["errors"][class], 2, "{name}: {label}");
        assert_eq!(label["route"], "quarantine", "{name}: {label}");
        assert_eq!(label["state"], "unknown", "{name}: {label}");
        assert_eq!(label["samples"], 0, "{name}: {label}");
    }
    // Two 1 s tunnel timeouts, sequential, plus spacing: nowhere near a hang.
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert!(
        run.stderr.contains("\"class\":\"timeout\""),
        "structured logs carry the class"
    );
}
