//! The Chromium persona: real headless Chromium (Debian package `chromium`) through tinyproxy,
//! squid (Basic auth) and dante (SOCKS5 auth) via the auditor's loopback shim, against Chromium
//! direct (the same shim, no exit); and the same verdicts as the rustls persona over mitmproxy
//! and a re-muxing gateway double.

mod gateway;
mod support;

use support::{audit, exits_file, EchoServer, Proxy, PASSWORD, PASSWORD_ENCODED, SOCKS_USER, USER};

#[test]
fn chromium_through_tunnelling_exits_keeps_chromiums_tls_voice() {
    let echo = EchoServer::start();
    let tiny = Proxy::tinyproxy();
    // Exits Chromium cannot use on its own: Basic auth (squid) and SOCKS5 username/password
    // (dante). The shim adds the credentials.
    let squid = Proxy::squid();
    let dante = Proxy::dante();
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[
            ("tinyproxy", format!("http://127.0.0.1:{}", tiny.port)),
            (
                "squid",
                format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}", squid.port),
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
    let run = audit(
        &exits,
        &work.path().join("audit.db"),
        &["--persona", "chromium", "--samples", "3"],
    );
    // Chromium's requests went through tinyproxy, not around it: one connection per attempt (a
    // sample, or a retry of a sample's transient failure, as under a loaded CI machine), to the
    // echo and nowhere else (Chromium's own background fetches stay off the exit).
    let attempts: usize = support::probes(&work.path().join("audit.db"))
        .iter()
        .filter(|record| record["exit"] == "tinyproxy")
        .map(|record| 1 + record["retried"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(attempts >= 3, "{attempts} attempts through tinyproxy");
    let log = std::fs::read_to_string(tiny.dir().join("tinyproxy.out")).unwrap_or_default();
    let requests: Vec<&str> = log
        .lines()
        .filter_map(|line| line.split_once("): ").map(|(_, request)| request))
        .filter(|request| request.ends_with(" HTTP/1.1") || request.ends_with(" HTTP/1.0"))
        .collect();
    let to_echo = format!("CONNECT localhost:{} HTTP/1.1", echo.port);
    assert_eq!(requests, vec![to_echo.as_str(); attempts], "{log}");
    let direct = run.labels["baseline"]["tls_voice"]
        .as_str()
        .unwrap_or_else(|| panic!("no direct Chromium TLS voice: {}", run.labels));
    for name in ["tinyproxy", "squid", "dante"] {
        let label = run.exit(name);
        assert_eq!(label["samples"], 3, "{name}: {label}");
        let voice = label["voices"][0].as_str().unwrap();
        assert!(
            voice.starts_with(direct),
            "{name}: {voice} is not Chromium's direct voice {direct}"
        );
        assert_eq!(label["flags"]["tls_preserved"], true, "{name}: {label}");
        assert_eq!(label["state"], "stable", "{name}: {label}");
        // Chromium's story hangs together, its User-Agent (as the echo read it) included.
        let coherence = &label["coherence"];
        for family in ["tls_family", "http_family", "ua_family"] {
            assert_eq!(
                coherence[family]["name"], "chrome",
                "{name} {family}: {label}"
            );
        }
        assert_eq!(
            coherence["reasons"],
            serde_json::json!([]),
            "{name}: {label}"
        );
        assert_eq!(coherence["kept"], true, "{name}: {label}");
    }
    assert!(!run.stderr.contains(PASSWORD) && !run.stdout.contains(PASSWORD));
}

/// The same exit gets the same verdict whatever the persona. Chromium checks the
/// echo's pin itself, so mitmproxy and a TLS-terminating gateway are intercepted for it too, and
/// a changed TLS voice is re-originated TLS for both.
#[test]
fn both_personas_give_the_same_route_and_flags() {
    use gateway::{Gateway, Mode};
    let echo = EchoServer::start();
    let tiny = Proxy::tinyproxy();
    let mitm = Proxy::start("mitmproxy", &[]);
    let remux = Gateway::start(Mode::Remux, &echo.dir.path().join("echo.db.cert.pem"));
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[
            ("tinyproxy", format!("http://127.0.0.1:{}", tiny.port)),
            ("mitm", format!("http://127.0.0.1:{}", mitm.port)),
            ("remux", format!("http://127.0.0.1:{}", remux.port)),
        ],
    );
    let rustls = audit(&exits, &work.path().join("rustls.db"), &["--samples", "3"]);
    let chromium = audit(
        &exits,
        &work.path().join("chromium.db"),
        &["--persona", "chromium", "--samples", "3"],
    );
    for name in ["tinyproxy", "mitm", "remux"] {
        let (a, b) = (rustls.exit(name), chromium.exit(name));
        for flag in ["tls_intercepted", "tls_reoriginated", "tls_preserved"] {
            assert_eq!(
                a["flags"][flag], b["flags"][flag],
                "{name} {flag}:\n{a}\n{b}"
            );
        }
        assert_eq!(
            a["route"], b["route"],
            "{name}:\n{a}\n{b}\n{}",
            chromium.stderr
        );
    }
    let mitm = chromium.exit("mitm");
    assert_eq!(mitm["flags"]["tls_intercepted"], true, "{mitm}");
    assert_eq!(mitm["route"], "quarantine", "{mitm}");
    // The echo read Chromium's User-Agent through mitmproxy, over mitmproxy's own TLS. (The
    // family table knows no mitmproxy stack, so no reason is raised: the flags above catch it.)
    let coherence = &mitm["coherence"];
    assert_eq!(coherence["ua_family"]["name"], "chrome", "{mitm}");
    assert_ne!(coherence["tls_family"]["name"], "chrome", "{mitm}");
    assert_eq!(
        mitm["samples"], 3,
        "the interceptor's voice is recorded: {mitm}"
    );
    assert_eq!(chromium.exit("tinyproxy")["route"], "identity");
}

/// One exit whose connections a real haproxy round-robins over a tunnel (squid) and an
/// interceptor (mitmproxy), and one over three stacks (squid, mitmproxy, a TLS-terminating
/// gateway), get one verdict whatever the persona: quarantined, intercepted, not stable. One
/// sample is one connection through the exit for both personas, so within six samples every
/// backend answers, and the interceptor's voice is in the Chromium persona's history too.
#[test]
fn a_round_robin_over_an_interceptor_gets_one_verdict_from_both_personas() {
    use gateway::{Gateway, Mode};
    let echo = EchoServer::start();
    let squid = Proxy::squid();
    let mitm = Proxy::start("mitmproxy", &[]);
    let reoriginating = Gateway::start(Mode::Downgrade, &echo.dir.path().join("echo.db.cert.pem"));
    let (squid_port, mitm_port) = (squid.port.to_string(), mitm.port.to_string());
    let rr2 = Proxy::start("haproxy", &[&squid_port, &mitm_port]);
    let rr3 = Proxy::start(
        "haproxy",
        &[&squid_port, &mitm_port, &reoriginating.port.to_string()],
    );
    let work = tempfile::tempdir().unwrap();
    let url = |port: u16| format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{port}");
    let exits = exits_file(
        work.path(),
        &echo,
        &[("rr2", url(rr2.port)), ("rr3", url(rr3.port))],
    );
    let samples = ["--samples", "6"];
    let rustls = audit(&exits, &work.path().join("rustls.db"), &samples);
    let chromium = audit(
        &exits,
        &work.path().join("chromium.db"),
        &["--persona", "chromium", "--samples", "6"],
    );
    for (persona, run) in [("rustls", &rustls), ("chromium", &chromium)] {
        for name in ["rr2", "rr3"] {
            let label = run.exit(name);
            assert_eq!(label["samples"], 6, "{persona} {name}: {label}");
            assert_eq!(label["route"], "quarantine", "{persona} {name}: {label}");
            assert_eq!(
                label["flags"]["tls_intercepted"], true,
                "{persona} {name}: {label}"
            );
            let state = label["state"].as_str().unwrap();
            assert!(
                state == "alternating" || state == "mutating",
                "{persona} {name}: {label}"
            );
        }
    }
    for name in ["rr2", "rr3"] {
        let (a, b) = (rustls.exit(name), chromium.exit(name));
        for flag in ["tls_intercepted", "tls_reoriginated", "tls_preserved"] {
            assert_eq!(
                a["flags"][flag], b["flags"][flag],
                "{name} {flag}:\n{a}\n{b}"
            );
        }
        assert_eq!(
            a["route"], b["route"],
            "{name}:\n{a}\n{b}\n{}",
            chromium.stderr
        );
    }
    // Behind the two-way round robin the Chromium persona heard both backends: its own voice
    // through squid, mitmproxy's through the interceptor.
    let direct = chromium.labels["baseline"]["tls_voice"].as_str().unwrap();
    let voices: Vec<&str> = chromium.exit("rr2")["voices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        voices.iter().any(|v| v.starts_with(direct))
            && voices.iter().any(|v| !v.starts_with(direct)),
        "{voices:?} lack a backend (direct {direct})"
    );
}

/// The persona's h3 ledger verdict. Chromium sends no QUIC while a proxy is configured
/// (docs/quic.md, "How clients behave"), so behind squid it keeps coming back over TCP after the
/// echo's `alt-svc`: the echo's ledger (its rule scaled down from 3 returns 2 s apart over 60 s to
/// 200 ms and 500 ms: each sample is a Chromium start, which takes longer) says `never_tries_h3`,
/// while the auditor's own QUIC probe says squid carries no UDP at all. On loopback the direct
/// baseline's Chromium is the same identity (127.0.0.1, Chromium's voice).
#[test]
fn chromium_behind_an_exit_never_comes_back_over_h3() {
    let echo = EchoServer::start_with(&["--ledger-spacing", "200ms", "--ledger-span", "500ms"]);
    let squid = Proxy::squid();
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(work.path(), &echo, &[("squid", squid.squid_url())]);
    let run = audit(
        &exits,
        &work.path().join("audit.db"),
        &["--persona", "chromium", "--samples", "4"],
    );
    let label = run.exit("squid");
    assert_eq!(label["samples"], 4, "{label}");
    let h3 = &label["h3"];
    assert_eq!(h3["via"], "http_connect", "{label}");
    assert_eq!(h3["baseline_h3"], true, "{label}");
    let ledger = &h3["chromium_ledger"];
    assert_eq!(ledger["verdict"], "never_tries_h3", "{label}");
    assert_eq!(ledger["quic_attempts"], 0, "{label}");
    assert!(
        ledger["tcp_connections_after_alt_svc"].as_u64() >= Some(3),
        "{label}"
    );
    assert_eq!(label["flags"]["h3_gap"], true);
}
