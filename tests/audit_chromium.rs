//! The Chromium persona: real headless Chromium (Debian package `chromium`) through tinyproxy,
//! via the auditor's loopback shim, against Chromium direct (the same shim, no exit).

mod support;

use support::{audit, exits_file, EchoServer, Proxy};

#[test]
fn chromium_through_tinyproxy_keeps_chromiums_tls_voice() {
    let echo = EchoServer::start();
    let tiny = Proxy::tinyproxy();
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[("tinyproxy", format!("http://127.0.0.1:{}", tiny.port))],
    );
    let run = audit(
        &exits,
        &work.path().join("audit.db"),
        &["--persona", "chromium", "--samples", "3"],
    );
    let label = run.exit("tinyproxy");
    assert_eq!(label["samples"], 3, "{label}");
    // Chromium's request went through tinyproxy, not around it.
    let log = std::fs::read_to_string(tiny.dir().join("tinyproxy.out")).unwrap_or_default();
    assert!(log.contains("CONNECT"), "tinyproxy saw no CONNECT:\n{log}");
    let direct = run.labels["baseline"]["tls_voice"]
        .as_str()
        .unwrap_or_else(|| panic!("no direct Chromium TLS voice: {}", run.labels));
    let voice = label["voices"][0].as_str().unwrap();
    assert!(
        voice.starts_with(direct),
        "{voice} is not Chromium's direct voice {direct}"
    );
    assert_eq!(label["flags"]["tls_preserved"], true, "{label}");
    assert_eq!(label["state"], "stable", "{label}");
}
