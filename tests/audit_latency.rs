//! The auditor's round-trip label: an exit with a hidden leg behind it (a delaying relay in
//! front of squid, `support::delay_relay`) carries the reason `latency_gap`, the same squid
//! reached without the relay does not, and a change of the relay's delay between two runs
//! moves the gap (`flags.gap_moved`).
//!
//! Needs root and the packages squid and apache2-utils (scripts/install-test-deps.sh).

mod support;

use support::delay_relay::DelayRelay;
use support::{audit, exits_file, probes, EchoServer, Proxy, PASSWORD_ENCODED, USER};

/// The `latency.round_trip` of exit `name`.
fn round_trip<'a>(run: &'a support::AuditRun, name: &str) -> &'a serde_json::Value {
    &run.exit(name)["latency"]["round_trip"]
}

fn has_reason(run: &support::AuditRun, name: &str, reason: &str) -> bool {
    run.exit(name)["route_reasons"]
        .as_array()
        .is_some_and(|reasons| reasons.iter().any(|r| r == reason))
}

fn micros(value: &serde_json::Value, field: &str) -> u64 {
    value[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no integer {field}: {value}"))
}

#[test]
fn an_exit_behind_a_hidden_leg_is_labelled_and_its_change_is_seen() {
    let echo = EchoServer::start();
    let squid = Proxy::squid();
    let relay = DelayRelay::start(squid.port, 40);
    let work = tempfile::tempdir().unwrap();
    let near = format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}", squid.port);
    let far = format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}", relay.port);
    let exits = exits_file(work.path(), &echo, &[("near", near), ("far", far)]);
    let db = work.path().join("audit.db");
    let flags = ["--samples", "3", "--no-quic"];

    let first = audit(&exits, &db, &flags);
    let far_trip = round_trip(&first, "far");
    assert_eq!(far_trip["verdict"], "likely", "{far_trip}");
    assert!(
        has_reason(&first, "far", "latency_gap"),
        "{}",
        first.exit("far")
    );
    // Reason only, by default: the route is what the voices say.
    assert_eq!(first.exit("far")["route"], first.exit("near")["route"]);
    let near_trip = round_trip(&first, "near");
    assert_eq!(near_trip["verdict"], "direct", "{near_trip}");
    assert!(
        !has_reason(&first, "near", "latency_gap"),
        "{}",
        first.exit("near")
    );
    assert!(near_trip["baseline_gap_us"].is_u64(), "{near_trip}");

    // The rustls persona's own samples: each echo's gap is the 80 ms leg, within 20 % + 2 ms.
    let records = probes(&db);
    let far_gaps: Vec<u64> = records
        .iter()
        .filter(|r| r["exit"] == "far")
        .filter_map(|r| r["sample"]["echo"]["latency"]["gap_us"].as_u64())
        .collect();
    assert_eq!(far_gaps.len(), 3, "{records:?}");
    for gap in &far_gaps {
        assert!(gap.abs_diff(80_000) <= 18_000, "gap {gap} us: {far_gaps:?}");
    }
    assert_eq!(
        micros(far_trip, "gap_min_us"),
        *far_gaps.iter().min().unwrap()
    );
    assert_eq!(far_trip["moved"], false, "{far_trip}");
    assert_eq!(first.exit("far")["flags"]["gap_moved"], false);

    // The same exit's hidden leg grows from 80 to 240 ms between runs: the gap moved.
    relay.set_delay(120);
    let second = audit(&exits, &db, &flags);
    let far_trip = round_trip(&second, "far");
    assert_eq!(far_trip["moved"], true, "{far_trip}");
    assert_eq!(second.exit("far")["flags"]["gap_moved"], true);
    let before = micros(far_trip, "previous_run_gap_min_us");
    assert!(before.abs_diff(80_000) <= 18_000, "{far_trip}");
    let newest: Vec<u64> = probes(&db)
        .iter()
        .filter(|r| r["exit"] == "far")
        .filter_map(|r| r["sample"]["echo"]["latency"]["gap_us"].as_u64())
        .skip(3)
        .collect();
    assert_eq!(newest.len(), 3, "{newest:?}");
    for gap in &newest {
        assert!(gap.abs_diff(240_000) <= 50_000, "gap {gap} us: {newest:?}");
    }
    assert_eq!(second.exit("near")["flags"]["gap_moved"], false);
    assert!(has_reason(&second, "far", "latency_gap"));
}
