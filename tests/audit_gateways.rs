//! Gateway test doubles (tests/gateway) between the auditor and the echo server: a silent
//! downgrade gives bucket D and quarantine; a re-muxing gateway gives bucket C.

mod gateway;
mod support;

use gateway::{Gateway, Mode};
use support::{audit, exits_file, EchoServer};

#[test]
fn downgrading_gateway_is_bucket_d_and_quarantined() {
    let echo = EchoServer::start();
    let gateway = Gateway::start(Mode::Downgrade, &echo.dir.path().join("echo.db.cert.pem"));
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[("downgrade", format!("http://127.0.0.1:{}", gateway.port))],
    );
    let run = audit(&exits, &work.path().join("audit.db"), &[]);
    let label = run.exit("downgrade");
    assert_eq!(label["samples"], 4, "{label}");
    assert_eq!(label["bucket"], "D", "{label}");
    assert_eq!(label["route"], "quarantine", "{label}");
    // It terminated TLS, so the auditor saw the gateway's certificate, not the echo's.
    assert_eq!(label["flags"]["tls_intercepted"], true, "{label}");
    // It negotiated h2 with the auditor but spoke HTTP/1.1 to the echo.
    assert_eq!(label["flags"]["alpn_preserved"], false, "{label}");
    // Every reason, and what changed: HTTP/1.1 instead of h2. (The double re-originates TLS
    // with rustls, as the auditor does: its TLS voice is the auditor's, so only the certificate
    // gives it away, not `tls_reoriginated`.)
    let reasons = label["route_reasons"].as_array().unwrap();
    assert_eq!(label["flags"]["tls_reoriginated"], false, "{label}");
    for reason in ["tls_intercepted", "bucket D"] {
        assert!(reasons.contains(&reason.into()), "{reason}: {label}");
    }
    let changes = label["changes"].as_array().unwrap();
    let spoken = changes
        .iter()
        .find(|c| c["layer"] == "alpn" && c["field"] == "spoken")
        .unwrap_or_else(|| panic!("no spoken change: {label}"));
    assert_eq!(
        (&spoken["before"], &spoken["after"]),
        (&"h2".into(), &"http/1.1".into())
    );
    // ALPN said h2, HTTP/1.1 was spoken: a reason the baseline does not have.
    let coherence = &label["coherence"];
    assert!(
        coherence["reasons"]
            .as_array()
            .unwrap()
            .contains(&"alpn_h2_spoke_http1".into()),
        "{label}"
    );
    assert_eq!(coherence["kept"], false, "{label}");
    assert_eq!(
        label["coherence_dropped_at"], label["history"][0]["at"],
        "{label}"
    );
}

#[test]
fn remuxing_gateway_is_bucket_c() {
    let echo = EchoServer::start();
    let gateway = Gateway::start(Mode::Remux, &echo.dir.path().join("echo.db.cert.pem"));
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[("remux", format!("http://127.0.0.1:{}", gateway.port))],
    );
    let run = audit(&exits, &work.path().join("audit.db"), &[]);
    let label = run.exit("remux");
    assert_eq!(label["samples"], 4, "{label}");
    // The first probe opened the shared upstream connection; the later ones rode on it.
    assert_eq!(label["bucket"], "C", "{label}");
    let history = label["history"].as_array().unwrap();
    assert!(history[1..].iter().all(|h| h["bucket"] == "C"), "{label}");
    // The later probes' requests arrived behind the first one's on the shared connection.
    assert_eq!(label["flags"]["remuxed"], true, "{label}");
    let reasons = label["route_reasons"].as_array().unwrap();
    assert!(
        reasons.contains(&"bucket C".into()),
        "why not identity: {label}"
    );
}
