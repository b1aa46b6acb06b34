//! Auditors that cooperate through leases in one PostgreSQL database (a throwaway cluster):
//! three `exitvoice audit --once` on the same exits file at once, one killed with SIGKILL
//! mid-run. Afterwards no exit was ever probed by two auditors at once (the exit simulator's
//! own per-exit count of open tunnels, and the probe rows' start and end times), every exit
//! was audited in full by exactly one surviving auditor or by the dead one before it died, and
//! one labels snapshot was written.

mod support;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::simulated;

const EXITS: usize = 24;
const SAMPLES: usize = 3;
const EXIT_PASSWORD: &str = "lease-exit-pw";

fn auditor(exits: &std::path::Path, url: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .arg("audit")
        .arg("--exits")
        .arg(exits)
        .arg("--once")
        .args(["--samples", &SAMPLES.to_string(), "--concurrency", "3"])
        .args([
            "--spacing",
            "150ms",
            "--jitter",
            "50ms",
            "--lease-ttl",
            "2s",
        ])
        .env("EXITVOICE_DATABASE_URL", url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn exitvoice audit")
}

#[test]
fn three_auditors_split_the_exits_and_survive_one_killed() {
    let url = exitvoice_pgtest::fresh_database("leases");
    let echo = simulated::unlimited_echo(None);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let sim = simulated::simulator(&runtime, EXITS, EXIT_PASSWORD, false);
    let work = tempfile::tempdir().unwrap();
    let exits = simulated::exits_file(
        &work.path().join("exits.toml"),
        "",
        EXITS,
        &sim,
        EXIT_PASSWORD,
        &echo,
    );

    let mut auditors: Vec<Child> = (0..3).map(|_| auditor(&exits, &url)).collect();
    // Mid-run: once a sixth of the 72 probes are stored. No auditor can have finished then (it
    // finishes when every exit is done or held), so none is writing its snapshot. A fixed delay
    // could let the first auditor finish its probes and die writing its own (unpublished)
    // snapshot, left behind beside the survivor's.
    runtime.block_on(async {
        let pool = sqlx::PgPool::connect(&url).await.expect("connect");
        for _ in 0..400 {
            let stored: i64 =
                sqlx::query_scalar("SELECT count(*) FROM probes WHERE exit_name IS NOT NULL")
                    .fetch_one(&pool)
                    .await
                    .unwrap_or(0);
            if stored >= i64::try_from(EXITS * SAMPLES / 6).unwrap_or(i64::MAX) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no auditor stored a sixth of the probes in 10 s");
    });
    let killed = auditors.remove(0);
    let mut killed = killed;
    killed.kill().expect("SIGKILL the first auditor");
    let _ = killed.wait();
    // The survivors' run ids, from their JSON logs (`"run":"…"` of `audit run finished`).
    let mut survivors: Vec<String> = Vec::new();
    for child in auditors {
        let output = child.wait_with_output().expect("auditor output");
        let log = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "a surviving auditor failed:\n{}\n{log}",
            String::from_utf8_lossy(&output.stdout)
        );
        let run = log
            .split("\"run\":\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("the run id in the log");
        survivors.push(run.to_owned());
    }

    // The simulator's own count: never two tunnels of one exit open at once.
    let stats = sim.snapshot(true);
    assert!(
        stats.max_in_flight_per_exit <= 1,
        "an exit carried two probes at once: {stats:?}"
    );

    let (rows, overlaps, snapshots) = runtime.block_on(async {
        let pool = sqlx::PgPool::connect(&url).await.expect("connect");
        let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
            "SELECT exit_name, run_id, error_class FROM probes WHERE exit_name IS NOT NULL",
        )
        .fetch_all(&pool)
        .await
        .expect("probes");
        // A probe runs from its start for its latency: two probes of one exit that overlap.
        let overlaps: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT started_at::timestamptz AS s, \
             lag(started_at::timestamptz + make_interval(secs => \
             coalesce((record::jsonb->>'latency_ms')::float8, 0) / 1000)) \
             OVER (PARTITION BY exit_name ORDER BY started_at::timestamptz) AS previous_end \
             FROM probes WHERE exit_name IS NOT NULL) p WHERE previous_end > s",
        )
        .fetch_one(&pool)
        .await
        .expect("overlaps");
        let snapshots: i64 = sqlx::query_scalar("SELECT count(*) FROM label_snapshots")
            .fetch_one(&pool)
            .await
            .expect("snapshots");
        (rows, overlaps, snapshots)
    });
    assert_eq!(overlaps, 0, "probe rows of one exit overlap in time");
    assert_eq!(snapshots, 1, "one labels snapshot for the period");

    // Per exit, the probes of each run: one run probed it in full; another run can only be the
    // killed one, cut off (its lease expired and a survivor took the exit).
    let mut per_exit: HashMap<&str, HashMap<&str, usize>> = HashMap::new();
    for (exit, run, error) in &rows {
        assert_eq!(error, &None, "probe of {exit} failed");
        *per_exit.entry(exit).or_default().entry(run).or_default() += 1;
    }
    assert_eq!(per_exit.len(), EXITS, "every exit audited: {per_exit:?}");
    for (exit, by_run) in &per_exit {
        // The killed run may have finished an exit's samples but not marked it done: then a
        // survivor audits it again. Two survivors never both audit one exit.
        let full = |runs: &mut dyn Iterator<Item = (&&str, &usize)>| {
            runs.filter(|(_, &n)| n == SAMPLES).count()
        };
        let by_survivors = full(
            &mut by_run
                .iter()
                .filter(|(run, _)| survivors.iter().any(|s| s == **run)),
        );
        assert!(
            by_survivors <= 1 && full(&mut by_run.iter()) >= 1,
            "{exit} audited in full once: {by_run:?} (survivors {survivors:?})"
        );
        assert!(
            by_run.values().all(|&n| n <= SAMPLES),
            "{exit} probed more than once by one run: {by_run:?}"
        );
        assert!(by_run.len() <= 2, "{exit}: {by_run:?}");
    }
}
