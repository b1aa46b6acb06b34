//! `exitvoice audit --every` (the built-in scheduler), a plain-list exits file with
//! `--echo-url/--echo-pin`, and `exitvoice labels` reading the stored snapshot back.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use exitvoice_schema::Store;
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
            snapshots = sqlx::query_scalar("SELECT COUNT(*) FROM label_snapshots")
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
    assert_eq!(printed["schema_version"], 2);
    support::assert_valid_labels(&printed);
    let name = format!("http://127.0.0.1:{}", tiny.port);
    let label = &printed["exits"][0];
    assert_eq!(label["name"], name.as_str());
    // The label's history spans the runs.
    assert!(label["samples"].as_u64().unwrap() >= 2);
}
