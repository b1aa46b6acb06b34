//! Audits at scale, end to end at a modest size: `exitvoice serve` (per-source limits lifted, as
//! for the benchmark), 200 simulated exits (`bench/exitsim`, half HTTP `CONNECT`, half SOCKS5,
//! really tunnelling to the echo server) and `exitvoice audit --once` through all of them.
//!
//! Every exit must be probed exactly `SAMPLES` times, one tunnel at a time; every probe must reach
//! the auditor's store exactly once and the echo server's store exactly once. Speed is the
//! benchmark's business (`scripts/bench-audit-scale.sh`), not this test's.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use support::{audit, probes, simulated};

const EXITS: usize = 200;
const SAMPLES: u64 = 3;
const PASSWORD: &str = "scale-pw";

/// How many requests the echo server stored per probe token, once its writer has caught up
/// with `expected` tokens (it batches; a few seconds at most).
fn echo_tokens(db: &Path, expected: usize) -> HashMap<String, u64> {
    let url = format!("sqlite://{}?mode=ro", db.display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        use sqlx::Connection;
        let mut tokens = HashMap::new();
        for _ in 0..50 {
            let mut conn = sqlx::SqliteConnection::connect(&url)
                .await
                .expect("open the echo database");
            let rows: Vec<(String, i64)> = sqlx::query_as(
                "SELECT token, count(*) FROM requests WHERE token IS NOT NULL GROUP BY token",
            )
            .fetch_all(&mut conn)
            .await
            .expect("requests by token");
            tokens = rows
                .into_iter()
                .map(|(token, n)| (token, u64::try_from(n).unwrap_or(0)))
                .collect();
            if tokens.len() >= expected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tokens
    })
}

#[test]
fn every_exit_is_probed_k_times_and_every_probe_is_stored_once() {
    let echo = simulated::unlimited_echo(None);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let sim = simulated::simulator(&runtime, EXITS, PASSWORD, true);
    let work = tempfile::tempdir().unwrap();
    let exits = simulated::exits_file(
        &work.path().join("exits.toml"),
        "",
        EXITS,
        &sim,
        PASSWORD,
        &echo,
    );

    let db = work.path().join("audit.db");
    let run = audit(
        &exits,
        &db,
        &["--samples", &SAMPLES.to_string(), "--concurrency", "32"],
    );

    // The labels: one per exit, each from all its samples.
    let labels = run.labels["exits"].as_array().expect("exits");
    assert_eq!(labels.len(), EXITS, "{}", run.stdout);
    for (index, label) in labels.iter().enumerate() {
        assert_eq!(label["name"], format!("sim-{index}"));
        assert_eq!(label["samples"], SAMPLES, "{label}");
        assert_eq!(label["errors"], serde_json::json!({}), "{label}");
    }
    assert!(!run.stdout.contains(PASSWORD) && !run.stderr.contains(PASSWORD));

    // The auditor's store: the baseline, then exactly SAMPLES probes of each exit, each token
    // once, none failed.
    let records = probes(&db);
    assert_eq!(records.len(), 1 + EXITS * usize::try_from(SAMPLES).unwrap());
    let mut per_exit: HashMap<&str, u64> = HashMap::new();
    let mut tokens: HashMap<&str, u64> = HashMap::new();
    for record in &records {
        assert!(record["error"].is_null(), "{record}");
        *per_exit
            .entry(record["exit"].as_str().unwrap_or(""))
            .or_default() += 1;
        *tokens
            .entry(record["token"].as_str().expect("token"))
            .or_default() += 1;
    }
    assert_eq!(per_exit.remove(""), Some(1), "one baseline");
    assert_eq!(per_exit.len(), EXITS);
    assert!(per_exit.values().all(|&n| n == SAMPLES), "{per_exit:?}");
    assert!(tokens.values().all(|&n| n == 1), "a token stored twice");

    // The echo server's store: every probe's request exactly once, and nothing else.
    let echoed = echo_tokens(&echo.dir.path().join("echo.db"), tokens.len());
    let mut stored: Vec<_> = echoed.keys().map(String::as_str).collect();
    let mut sent: Vec<_> = tokens.keys().copied().collect();
    stored.sort_unstable();
    sent.sort_unstable();
    assert_eq!(
        stored, sent,
        "the echo stored other tokens than the auditor sent"
    );
    assert!(echoed.values().all(|&n| n == 1), "a request stored twice");

    // The simulator: one tunnel per probe, SAMPLES per exit, never two at once on one exit.
    let stats = sim.snapshot(true);
    assert_eq!(
        stats.tunnels,
        EXITS as u64 * SAMPLES,
        "retries or extra tunnels"
    );
    assert_eq!(stats.refused, 0);
    // One QUIC probe per SOCKS5 exit, refused: the simulator carries no UDP.
    let socks = labels
        .iter()
        .filter(|l| l["h3"]["via"] == "socks5_udp_associate")
        .inspect(|l| assert_eq!(l["h3"]["udp_carried"], false, "{l}"))
        .count();
    assert!(socks > 0, "no SOCKS5 exit among the simulated ones");
    assert_eq!(stats.udp_refused, socks as u64);
    assert_eq!(stats.max_in_flight_per_exit, 1);
    let per_exit = stats.per_exit.expect("per-exit counters");
    assert!(per_exit
        .iter()
        .all(|&[tunnels, max]| tunnels == SAMPLES && max == 1));
}
