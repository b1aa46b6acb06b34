//! `exitvoice audit --every` (the built-in scheduler), a plain-list exits file with
//! `--echo-url/--echo-pin`, and `exitvoice labels` reading the stored snapshot back.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use exitvoice_store::Store;
use support::{EchoServer, Proxy};

#[tokio::test]
async fn every_runs_repeatedly_and_labels_reads_the_latest() {
    let echo = EchoServer::start();
    let tiny = Proxy::tinyproxy();
    let work = tempfile::tempdir().unwrap();
    let exits = work.path().join("exits.txt");
    std::fs::write(
        &exits,
        format!("# a plain list\nhttp://127.0.0.1:{}\n", tiny.port),
    )
    .unwrap();
    let db = work.path().join("audit.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .arg("audit")
        .arg("--exits")
        .arg(&exits)
        .arg("--db")
        .arg(&db)
        .args(["--every", "1s", "--samples", "1", "--echo-url"])
        .arg(format!("https://localhost:{}", echo.port))
        .arg("--echo-pin")
        .arg(&echo.pin)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut snapshots = 0i64;
    while started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        if let Ok(store) = Store::open(&db).await {
            // Published ones: a run still under way has a draft of its own.
            snapshots =
                sqlx::query_scalar("SELECT COUNT(*) FROM label_snapshots WHERE published = 1")
                    .fetch_one(store.pool())
                    .await
                    .unwrap_or(0);
            if snapshots >= 2 {
                break;
            }
        }
    }
    let still_running = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert!(still_running, "--every must keep running");
    assert!(snapshots >= 2, "only {snapshots} runs in 30 s");

    let output = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .arg("labels")
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(output.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let stored = Store::open(&db)
        .await
        .unwrap()
        .latest_labels()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(printed, serde_json::to_value(&stored).unwrap());
    assert_eq!(printed["schema_version"], 5);
    support::assert_valid_labels(&printed);
    let name = format!("http://127.0.0.1:{}", tiny.port);
    let label = &printed["exits"][0];
    assert_eq!(label["name"], name.as_str());
    // The label's history spans the runs.
    assert!(label["samples"].as_u64().unwrap() >= 2);
}

/// Under `--every`, an exit whose label changed (here: a new exit) is probed again
/// after `--recheck` instead of a full period later, and once it settles it waits for the period.
#[tokio::test]
async fn every_rechecks_changed_exits_until_they_settle() {
    let echo = EchoServer::start();
    let tiny = Proxy::tinyproxy();
    let work = tempfile::tempdir().unwrap();
    let exits = support::exits_file(
        work.path(),
        &echo,
        &[("tiny", format!("http://127.0.0.1:{}", tiny.port))],
    );
    let db = work.path().join("audit.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .arg("audit")
        .arg("--exits")
        .arg(&exits)
        .arg("--db")
        .arg(&db)
        .args(["--every", "1h", "--recheck", "1s", "--samples", "3"])
        .args(["--spacing", "10ms", "--jitter", "10ms"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(work.path().join("stderr")).unwrap())
        .spawn()
        .unwrap();
    // Read-only: opening it as a `Store` would migrate it under the running audit.
    let count = |sql: &'static str| {
        let url = format!("sqlite://{}?mode=ro", db.display());
        async move {
            use sqlx::Connection;
            match sqlx::SqliteConnection::connect(&url).await {
                Ok(mut conn) => sqlx::query_scalar::<_, i64>(sql)
                    .fetch_one(&mut conn)
                    .await
                    .unwrap_or(0),
                Err(_) => 0,
            }
        }
    };
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30)
        && count("SELECT COUNT(*) FROM label_snapshots").await < 2
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Settled: the same state and route twice. Nothing more until the hour is over.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let snapshots = count("SELECT COUNT(*) FROM label_snapshots").await;
    let samples = count("SELECT COUNT(*) FROM probes WHERE exit_name = 'tiny'").await;
    let _ = child.kill();
    let _ = child.wait();
    assert!(started.elapsed() < Duration::from_secs(40));
    let log = std::fs::read_to_string(work.path().join("stderr")).unwrap_or_default();
    assert_eq!(snapshots, 2, "one full run and one re-check:\n{log}");
    assert_eq!(samples, 6, "three samples each");
}

/// After a run, `--retain` deletes the probes and labels snapshots older than it, and keeps the
/// run's own (its snapshot is the latest published one).
#[tokio::test]
async fn a_run_prunes_what_is_older_than_retain() {
    let echo = EchoServer::start();
    let tiny = Proxy::tinyproxy();
    let work = tempfile::tempdir().unwrap();
    let exits = work.path().join("exits.txt");
    std::fs::write(&exits, format!("http://127.0.0.1:{}\n", tiny.port)).unwrap();
    let db = work.path().join("audit.db");
    let audit = |retain: &str| {
        let status = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
            .arg("audit")
            .arg("--exits")
            .arg(&exits)
            .arg("--db")
            .arg(&db)
            .args(["--once", "--samples", "1", "--retain", retain, "--echo-url"])
            .arg(format!("https://localhost:{}", echo.port))
            .arg("--echo-pin")
            .arg(&echo.pin)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "audit --retain {retain}");
    };
    let runs = |store: Store| async move {
        let probes: Vec<String> =
            sqlx::query_scalar("SELECT DISTINCT run_id FROM probes ORDER BY run_id")
                .fetch_all(store.pool())
                .await
                .unwrap();
        let snapshots: Vec<i64> = sqlx::query_scalar("SELECT id FROM label_snapshots")
            .fetch_all(store.pool())
            .await
            .unwrap();
        (probes, snapshots)
    };

    audit("30d");
    audit("30d");
    let (probes, snapshots) = runs(Store::open(&db).await.unwrap()).await;
    assert_eq!(
        (probes.len(), snapshots.len()),
        (2, 2),
        "30 days keep both runs"
    );
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    audit("2s");
    let store = Store::open(&db).await.unwrap();
    let latest = store.latest_labels_id().await.unwrap();
    let (kept, snapshots) = runs(store).await;
    assert_eq!(
        kept.len(),
        1,
        "only the last run's probes are left: {kept:?}"
    );
    assert!(!probes.contains(&kept[0]), "and they are the new run's");
    assert_eq!(snapshots.len(), 1);
    assert_eq!(Some(snapshots[0]), latest, "the latest snapshot stays");
}
