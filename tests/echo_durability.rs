//! Durability of the observation store:
//! - kill -9 while observations are being written: the server restarts on the same database,
//!   `PRAGMA integrity_check` says `ok`, and the observations answered but not stored are at most
//!   one batch (the number is printed: `lost N of M`);
//! - the database filesystem full, or the database files made read-only under the running
//!   server: echoes keep being answered, failed writes are counted, `/healthz` says `degraded`
//!   and the log says why; once space returns (or the files are writable again), writes resume
//!   and `/healthz` says `ok` again.
//!
//! SIGTERM losing nothing is `tests/echo_shutdown.rs`.
//!
//! Run with `cargo test --test echo_durability`. The full-disk test mounts a small tmpfs and the
//! read-only test sets the immutable attribute (`chattr +i`, which even root cannot write
//! through), so both need root (CAP_SYS_ADMIN, CAP_LINUX_IMMUTABLE); they fail, not skip,
//! without it.

mod echo_support;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use echo_support::{read_rows, EchoServer};
use exitvoice_attacks::Target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The writer's batch size in the kill -9 test: the server's default (`--batch-size`).
const BATCH: usize = 256;

/// One `GET /probe/<token>` on a fresh connection; true when answered 200.
async fn probe(target: &Target, token: &str) -> bool {
    let request = async {
        let mut tls = target.tls([127, 0, 0, 1].into(), false).await?;
        let head =
            format!("GET /probe/{token} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        tls.write_all(head.as_bytes()).await?;
        let mut response = Vec::new();
        let _ = tls.read_to_end(&mut response).await;
        std::io::Result::Ok(response.starts_with(b"HTTP/1.1 200"))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(5), request).await,
        Ok(Ok(true))
    )
}

fn target_for(server: &EchoServer) -> Target {
    Target::new(SocketAddr::from(([127, 0, 0, 1], server.port))).expect("loopback")
}

async fn integrity_check(db: &Path) -> String {
    let url = format!("sqlite://{}", db.display());
    let pool = sqlx::SqlitePool::connect(&url).await.expect("open db");
    let result: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&pool)
        .await
        .expect("integrity_check");
    pool.close().await;
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_during_writes_loses_at_most_one_batch() {
    // Default writer settings: batches of 256, committed at the latest 100 ms after their first.
    let mut server = EchoServer::start(&["--per-ip-connections", "1000"]);
    let target = target_for(&server);
    let answered = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut clients = Vec::new();
    for worker in 0..8 {
        let (target, answered, stop) = (target.clone(), Arc::clone(&answered), Arc::clone(&stop));
        clients.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let token = format!("k9-{worker}-{i}");
                if probe(&target, &token).await {
                    answered.lock().expect("lock").push(token);
                }
                i += 1;
            }
        }));
    }
    // Sustained writes for a while, then kill -9 in the middle of them.
    let start = Instant::now();
    while answered.lock().expect("lock").len() < 400 && start.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let health = server.healthz();
    let answered_before_kill: HashSet<String> =
        answered.lock().expect("lock").iter().cloned().collect();
    server.kill9();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for client in clients {
        let _ = client.await;
    }
    assert!(answered_before_kill.len() >= 400, "sustained load reached");

    assert_eq!(integrity_check(&server.db()).await, "ok");
    let stored: HashSet<String> = read_rows(&server.db())
        .await
        .into_iter()
        .filter_map(|row| row.token)
        .collect();
    let lost = answered_before_kill.difference(&stored).count();
    eprintln!(
        "kill -9: lost {lost} of {} answered observations (batch size {BATCH}); just before: \
         queue {}, observations {}",
        answered_before_kill.len(),
        health["queue"],
        health["observations"]
    );
    assert!(lost <= BATCH, "lost {lost} > one batch of {BATCH}");
    assert!(!stored.is_empty(), "batches were committed before the kill");

    // The server restarts on the same database and keeps storing.
    server.restart();
    let target = target_for(&server);
    assert!(probe(&target, "after-restart").await);
    let rows = server
        .rows_until(|rows| {
            rows.iter()
                .any(|r| r.token.as_deref() == Some("after-restart"))
        })
        .await;
    assert!(rows
        .iter()
        .any(|r| r.token.as_deref() == Some("after-restart")));
}

/// A tmpfs mounted over a directory; unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Self {
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "mount -t tmpfs needs root (CAP_SYS_ADMIN)"
        );
        Self(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fills the filesystem holding `dir` with `dir/filler` until no space is left.
fn fill(dir: &Path) {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("filler"))
        .expect("filler");
    let block = vec![0_u8; 64 * 1024];
    while file.write_all(&block).is_ok() {}
    let small = [0_u8; 512];
    while file.write_all(&small).is_ok() {}
    let _ = file.sync_all();
}

async fn health_until(
    server: &EchoServer,
    want: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let health = server.healthz();
        if want(&health) || Instant::now() > deadline {
            return health;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `/healthz` (`health`) while the store refuses writes: the last batch failed and the failed
/// observations are counted (the figures are printed), and the log says a batch was not stored;
/// returns that log line.
fn assert_degraded(server: &EchoServer, health: &serde_json::Value, what: &str) -> String {
    assert_eq!(health["observations"]["store_failing"], true, "{health}");
    let failures = health["observations"]["write_failures"]
        .as_u64()
        .unwrap_or(0);
    assert!(failures > 0, "{health}");
    eprintln!(
        "{what}: {failures} observations failed to write: {}",
        health["observations"]
    );
    let stderr = server.stderr();
    stderr
        .lines()
        .find(|line| line.contains("observation batch not stored"))
        .unwrap_or_else(|| panic!("the log says a batch was not stored: {stderr}"))
        .to_owned()
}

/// After the store's trouble ended: new echoes are stored again, `/healthz` says `ok`, the row
/// stored before the trouble (`before`) is still there, and every observation counted as
/// written is in the database as another connection reads it — a failed write must not leave
/// the writer "committing" into a transaction that is never committed (rows counted, then lost
/// at close).
async fn assert_recovered(server: &EchoServer, target: &Target, before: &str) {
    for i in 0..10 {
        assert!(
            probe(target, &format!("recovered-{i}")).await,
            "echo {i} after recovery"
        );
    }
    let rows = server
        .rows_until(|rows| {
            rows.iter()
                .any(|r| r.token.as_deref() == Some("recovered-9"))
        })
        .await;
    assert!(
        rows.iter().any(|r| r.token.as_deref() == Some(before)),
        "{before} kept"
    );
    let health = health_until(server, |h| h["status"] == "ok").await;
    assert_eq!(health["status"], "ok", "{health}");
    let written = health["observations"]["written"].as_u64().unwrap_or(0);
    let stored = read_rows(&server.db()).await.len() as u64;
    assert!(
        stored >= written,
        "{written} counted as written, {stored} in the database: {health}"
    );
}

#[tokio::test]
async fn full_disk_keeps_echoing_counts_failures_and_recovers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _tmpfs = Tmpfs::mount(dir.path(), "4m");
    let server = EchoServer::start_in(dir, &["--batch-size", "8", "--flush-interval", "20ms"], &[]);
    let target = target_for(&server);
    assert!(probe(&target, "before-full").await);
    let health = health_until(&server, |h| {
        h["observations"]["written"].as_u64() >= Some(1)
    })
    .await;
    assert_eq!(health["status"], "ok", "{health}");

    // SQLite can still overwrite pages it already holds (a restarted WAL), so space freed by a
    // rolled-back write is taken again after every echo: the filesystem stays full.
    fill(server.dir.path());
    let mut degraded = None;
    for i in 0..200 {
        assert!(
            probe(&target, &format!("full-{i}")).await,
            "echo {i} answered on a full disk"
        );
        fill(server.dir.path());
        // Some batches still fit in pages SQLite holds; /healthz says degraded after a failed one.
        tokio::time::sleep(Duration::from_millis(30)).await;
        let health = server.healthz();
        if health["status"] == "degraded" {
            degraded = Some(health);
            break;
        }
    }
    let health = degraded.expect("/healthz said degraded while the disk was full");
    assert_degraded(&server, &health, "full disk");
    let stderr = server.stderr();
    assert!(
        stderr.contains("disk is full"),
        "the log says why: {stderr}"
    );

    std::fs::remove_file(server.dir.path().join("filler")).expect("free the space");
    assert_recovered(&server, &target, "before-full").await;
    drop(server);
}

/// Files marked immutable (`chattr +i`): nobody, root included, can write them, through a new
/// or an already open descriptor (the kernel refuses with EPERM). Cleared on drop, so the
/// temporary directory can be removed whatever the test did.
struct Immutable(Vec<PathBuf>);

impl Immutable {
    fn set(paths: Vec<PathBuf>) -> Self {
        let status = Command::new("chattr")
            .arg("+i")
            .args(&paths)
            .status()
            .expect("chattr is installed (e2fsprogs, scripts/install-test-deps.sh)");
        assert!(
            status.success(),
            "chattr +i failed: needs root and a filesystem with the attribute"
        );
        Self(paths)
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").args(&self.0).status();
    }
}

#[tokio::test]
async fn read_only_database_keeps_echoing_counts_failures_and_recovers() {
    // In the build's own tmp dir: on the checkout's filesystem, which takes `chattr +i`.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let mut server =
        EchoServer::start_in(dir, &["--batch-size", "8", "--flush-interval", "20ms"], &[]);
    let target = target_for(&server);
    assert!(probe(&target, "before-read-only").await);
    let health = health_until(&server, |h| {
        h["observations"]["written"].as_u64() >= Some(1)
    })
    .await;
    assert_eq!(health["status"], "ok", "{health}");

    // The database, its write-ahead log and their directory become read-only under the running
    // server (the directory too, or SQLite would simply create a new log beside them). Not the
    // `-shm` index: SQLite maps it into memory, and a write to a mapped page of a file made
    // immutable after the mapping faults (SIGBUS) — no file system does that to a live file.
    let mut files: Vec<PathBuf> = ["echo.db", "echo.db-wal"]
        .iter()
        .map(|name| server.dir.path().join(name))
        .filter(|path| path.exists())
        .collect();
    files.push(server.dir.path().to_path_buf());
    let read_only = Immutable::set(files);
    for i in 0..20 {
        assert!(
            probe(&target, &format!("read-only-{i}")).await,
            "echo {i} answered on a read-only database"
        );
    }
    let health = health_until(&server, |h| h["status"] == "degraded").await;
    assert_eq!(health["status"], "degraded", "{health}");
    let said = assert_degraded(&server, &health, "read-only database");
    eprintln!("read-only database, the log says: {said}");
    assert!(said.contains("I/O error"), "the log says why: {said}");

    drop(read_only);
    assert_recovered(&server, &target, "before-read-only").await;
    assert!(server.running());
    assert_eq!(
        integrity_check(&server.db()).await,
        "ok",
        "the database is intact after the read-only spell"
    );
}
