//! A fleet on one PostgreSQL database (a throwaway cluster, `exitvoice-pgtest`): two
//! `exitvoice serve` and two `exitvoice audit` processes at once, each auditor probing its own
//! simulated exits (`bench/exitsim`, real tunnels) through its own echo server. Every probe
//! must be stored exactly once by the auditors and its request exactly once by the echo
//! servers; the database's password must not appear in anything the processes print, nor in
//! the error of a connection it refuses.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use support::simulated;

const EXITS_PER_AUDITOR: usize = 12;
const SAMPLES: usize = 2;
const EXIT_PASSWORD: &str = "fleet-exit-pw";

/// `exitvoice audit --once` on `exits`, the database given by `--database` (`flag`) or by the
/// environment.
fn audit(exits: &Path, url: &str, flag: bool) -> std::process::Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_exitvoice"));
    command
        .arg("audit")
        .arg("--exits")
        .arg(exits)
        .arg("--once")
        .args(["--samples", &SAMPLES.to_string(), "--concurrency", "8"])
        .args(["--spacing", "20ms", "--jitter", "20ms"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if flag {
        command.args(["--database", url]);
    } else {
        command.env("EXITVOICE_DATABASE_URL", url);
    }
    command.spawn().expect("spawn exitvoice audit")
}

fn text(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn two_servers_and_two_auditors_store_every_probe_once() {
    let cluster = exitvoice_pgtest::cluster();
    let url = cluster.fresh_database("fleet");
    let echo_a = simulated::unlimited_echo(Some(&url));
    let echo_b = simulated::unlimited_echo(Some(&url));
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let sim = simulated::simulator(&runtime, EXITS_PER_AUDITOR, EXIT_PASSWORD, true);
    let work = tempfile::tempdir().unwrap();
    let exits = |prefix: &str, echo| {
        let path = work.path().join(format!("{prefix}.toml"));
        simulated::exits_file(&path, prefix, EXITS_PER_AUDITOR, &sim, EXIT_PASSWORD, echo)
    };
    let exits_a = exits("a-", &echo_a);
    let exits_b = exits("b-", &echo_b);

    // Both auditors at once, on one database.
    let runs = [audit(&exits_a, &url, true), audit(&exits_b, &url, false)]
        .map(|child| child.wait_with_output().expect("audit output"));
    for run in &runs {
        assert!(run.status.success(), "audit failed:\n{}", text(run));
        assert!(
            !text(run).contains(cluster.password()),
            "the database password was printed:\n{}",
            text(run)
        );
    }

    let (probes, requests, snapshots) = runtime.block_on(async {
        let pool = sqlx::PgPool::connect(&url).await.expect("connect");
        let probes: Vec<(Option<String>, String, Option<String>)> =
            sqlx::query_as("SELECT exit_name, token, error_class FROM probes")
                .fetch_all(&pool)
                .await
                .expect("probes");
        // The echo servers batch their writes: wait until every probe's request is in.
        let mut requests: HashMap<String, i64> = HashMap::new();
        for _ in 0..50 {
            requests = sqlx::query_as::<_, (String, i64)>(
                "SELECT token, count(*) FROM requests WHERE token IS NOT NULL GROUP BY token",
            )
            .fetch_all(&pool)
            .await
            .expect("requests")
            .into_iter()
            .collect();
            if requests.len() >= probes.len() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let snapshots: i64 = sqlx::query_scalar("SELECT count(*) FROM label_snapshots")
            .fetch_one(&pool)
            .await
            .expect("snapshots");
        (probes, requests, snapshots)
    });

    // The auditors' rows: a baseline each, then SAMPLES probes of each of their exits.
    let mut per_exit: HashMap<Option<&str>, usize> = HashMap::new();
    let mut tokens: HashMap<&str, usize> = HashMap::new();
    for (exit, token, error) in &probes {
        assert_eq!(error, &None, "probe {token} of {exit:?} failed");
        *per_exit.entry(exit.as_deref()).or_default() += 1;
        *tokens.entry(token).or_default() += 1;
    }
    assert_eq!(per_exit.remove(&None), Some(2), "one baseline per auditor");
    assert_eq!(per_exit.len(), 2 * EXITS_PER_AUDITOR, "{per_exit:?}");
    assert!(per_exit.values().all(|&n| n == SAMPLES), "{per_exit:?}");
    assert!(
        tokens.values().all(|&n| n == 1),
        "a probe stored twice: {tokens:?}"
    );
    assert_eq!(snapshots, 2, "one labels snapshot per auditor");

    // The echo servers' rows: each probe's request exactly once, from both servers together.
    let mut sent: Vec<&str> = tokens.keys().copied().collect();
    let mut stored: Vec<&str> = requests.keys().map(String::as_str).collect();
    sent.sort_unstable();
    stored.sort_unstable();
    assert_eq!(stored, sent, "the echo servers stored other tokens");
    assert!(
        requests.values().all(|&n| n == 1),
        "a request stored twice: {requests:?}"
    );
    for echo in [&echo_a, &echo_b] {
        assert!(
            !echo.log().contains(cluster.password()),
            "the echo server logged the database password"
        );
    }
}

#[test]
fn a_refused_connection_does_not_print_its_password() {
    let cluster = exitvoice_pgtest::cluster();
    let url = cluster.fresh_database("refused");
    let wrong = url.replace(cluster.password(), "wrong-pw-5e1f");
    let output = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .args(["labels", "--database", &wrong])
        .output()
        .expect("run exitvoice labels");
    let printed = text(&output);
    assert!(!output.status.success(), "a wrong password was accepted");
    assert!(
        printed.contains("exitvoice:***@127.0.0.1"),
        "the error names the database: {printed}"
    );
    assert!(!printed.contains("wrong-pw-5e1f"), "{printed}");

    // A URL that does not parse is refused without being quoted.
    let output = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .args(["labels", "--database", "postgres://u:bad-pw-77@[::1/x"])
        .output()
        .expect("run exitvoice labels");
    assert!(!output.status.success());
    assert!(!text(&output).contains("bad-pw-77"), "{}", text(&output));
}
