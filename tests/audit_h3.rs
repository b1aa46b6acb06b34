//! The auditor's QUIC side: a run's QUIC probes (HTTP/3 over UDP) straight to the echo and
//! through each exit, and the labels' `h3` and `flags.h3_gap`. Real dante relays UDP (SOCKS5
//! `UDP ASSOCIATE`) when its rules grant it, refuses the association when they do not, and
//! drops the replies when only the association is granted; squid (HTTP CONNECT) carries no UDP.

mod support;

use serde_json::Value;
use support::{
    audit, exits_file, probes, EchoServer, Proxy, PASSWORD, PASSWORD_ENCODED, SOCKS_USER, USER,
};

/// The QUIC probe record of `exit` (`None` for the baseline) in an auditor database.
fn h3_record(records: &[Value], exit: Option<&str>) -> Value {
    records
        .iter()
        .filter(|r| r["exit"].as_str() == exit)
        .find_map(|r| r.get("h3").cloned())
        .unwrap_or_else(|| panic!("no QUIC probe for {exit:?}"))
}

/// The HTTP/3 requests the echo stored under `token`, from `/api/observations` (a probe's
/// 128-bit token is its own capability), once its writer has stored any (it batches).
fn echo_h3_rows(echo: &EchoServer, token: &str) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let output = std::process::Command::new("curl")
            .args(["-sk", "--http1.1"])
            .arg(format!(
                "https://127.0.0.1:{}/api/observations?token={token}",
                echo.port
            ))
            .output()
            .expect("run curl");
        let answer: Value = serde_json::from_slice(&output.stdout).expect("observations JSON");
        let rows = answer["quic"].as_array().expect("a quic list").clone();
        if !rows.is_empty() || std::time::Instant::now() > deadline {
            return rows;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn udp_through_socks5_is_probed_and_http_connect_is_a_gap() {
    let echo = EchoServer::start();
    let udp = Proxy::start("dante", &[SOCKS_USER, PASSWORD, "udp"]);
    let tcp_only = Proxy::dante();
    let no_reply = Proxy::start("dante", &[SOCKS_USER, PASSWORD, "udp-noreply"]);
    let squid = Proxy::squid();
    let work = tempfile::tempdir().unwrap();
    let socks = |scheme: &str, port: u16| {
        format!("{scheme}://{SOCKS_USER}:{PASSWORD_ENCODED}@127.0.0.1:{port}")
    };
    let exits = exits_file(
        work.path(),
        &echo,
        &[
            ("udp", socks("socks5", udp.port)),
            ("udp-by-name", socks("socks5h", udp.port)),
            ("tcp-only", socks("socks5", tcp_only.port)),
            ("no-reply", socks("socks5", no_reply.port)),
            (
                "squid",
                format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}", squid.port),
            ),
        ],
    );
    let db = work.path().join("audit.db");
    let run = audit(&exits, &db, &["--samples", "1", "--quic-timeout", "2s"]);
    let records = probes(&db);

    let baseline = h3_record(&records, None);
    assert_eq!(baseline["via"], "direct");
    assert_eq!(baseline["udp_carried"], true, "{baseline}");
    for field in ["tls_voice_id", "quic_voice_id", "http3_voice_id"] {
        assert!(baseline[field].is_string(), "baseline {field}: {baseline}");
    }

    // Through the relay: the echo answered the probe's own token over HTTP/3, with the
    // baseline's voices (UDP relaying does not touch QUIC), and dante logged the association.
    for name in ["udp", "udp-by-name"] {
        let probe = h3_record(&records, Some(name));
        assert_eq!(probe["udp_carried"], true, "{name}: {probe}");
        let token = probe["token"].as_str().unwrap();
        let rows = echo_h3_rows(&echo, token);
        assert_eq!(rows.len(), 1, "{name}: {token} stored once: {rows:?}");
        let connection = &rows[0]["connection"];
        assert_eq!(connection["quic_voice_id"], probe["quic_voice_id"]);
        assert!(
            connection["quic"]["transport_parameters"].is_array(),
            "{connection}"
        );
        assert!(
            connection.get("hello").is_none(),
            "raw bytes only with raw=true"
        );
        let label = &run.exit(name)["h3"];
        assert_eq!(label["via"], "socks5_udp_associate", "{name}: {label}");
        assert_eq!(label["baseline_h3"], true);
        assert_eq!(label["udp_carried"], true);
        assert_eq!(label["preserved"], true, "{name}: {label}");
        assert_eq!(label["egress_ip"], "127.0.0.1");
        assert_eq!(run.exit(name)["flags"]["h3_gap"], false);
    }
    let dante_log = std::fs::read_to_string(udp.dir().join("danted.log")).unwrap();
    assert!(
        dante_log.contains("udp/udpassociate"),
        "dante relayed no UDP:\n{dante_log}"
    );

    // dante without `udpassociate` refuses the command (RFC 1928 reply 2).
    let refused = &run.exit("tcp-only")["h3"];
    assert_eq!(refused["udp_carried"], false, "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .starts_with("proxy_refused:"),
        "{refused}"
    );
    // Granted the association but not the replies: the handshake never completes.
    let dropped = &run.exit("no-reply")["h3"];
    assert_eq!(dropped["udp_carried"], false, "{dropped}");
    assert!(
        dropped["reason"].as_str().unwrap().starts_with("timeout:"),
        "{dropped}"
    );
    // squid: no probe is sent, UDP is not carried by construction.
    let connect = &run.exit("squid")["h3"];
    assert_eq!(connect["via"], "http_connect");
    assert_eq!(connect["udp_carried"], false);
    assert_eq!(connect["reason"], "HTTP CONNECT carries TCP only");
    assert!(h3_record(&records, Some("squid"))["token"].is_null());
    for name in ["tcp-only", "no-reply", "squid"] {
        let label = run.exit(name);
        assert_eq!(label["flags"]["h3_gap"], true, "{name}: {label}");
        assert_eq!(label["h3"]["preserved"], Value::Null);
        // A missing h3 is a finding, not a failure: the TCP samples route as before.
        assert_eq!(label["samples"], 1, "{name}: {label}");
    }

    let everything = format!("{}{}{}", run.stdout, run.stderr, run.labels);
    assert!(!everything.contains(PASSWORD), "the password leaked");
}

#[test]
fn an_echo_without_quic_leaves_the_exits_unprobed_and_without_gap() {
    let echo = EchoServer::start_with(&["--no-quic"]);
    let squid = Proxy::squid();
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(work.path(), &echo, &[("squid", squid.squid_url())]);
    let db = work.path().join("audit.db");
    let run = audit(&exits, &db, &["--samples", "1", "--quic-timeout", "1s"]);
    let baseline = h3_record(&probes(&db), None);
    assert_eq!(baseline["udp_carried"], false, "{baseline}");
    assert!(baseline["error"]["class"].is_string(), "{baseline}");
    let label = run.exit("squid");
    assert_eq!(label["h3"]["baseline_h3"], false, "{label}");
    assert_eq!(label["h3"]["via"], Value::Null, "{label}");
    assert_eq!(label["flags"]["h3_gap"], false);

    // --no-quic: no QUIC probe at all, and no `h3` in the labels.
    let db = work.path().join("no-quic.db");
    let run = audit(&exits, &db, &["--samples", "1", "--no-quic"]);
    assert!(probes(&db).iter().all(|r| r.get("h3").is_none()));
    assert!(run.exit("squid").get("h3").is_none());
}
