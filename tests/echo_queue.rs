//! The accept path never waits on the database: with the database write-locked by another
//! process, echoes are still answered at full speed, the full queue drops observations (counted
//! in `/healthz`), and the writer catches up once the lock is gone.
//!
//! Run with `cargo test --test echo_queue`; needs curl (scripts/install-test-deps.sh).

mod echo_support;

use std::time::{Duration, Instant};

use echo_support::{curl, json_stream, EchoServer};
use sqlx::Connection as _;

/// Requests made while the database is locked.
const REQUESTS: usize = 20;

#[tokio::test]
async fn locked_database_drops_observations_instead_of_stalling_connections() {
    let server = EchoServer::start(&["--queue-size", "2", "--batch-size", "1"]);
    // Warm up: the store is open and migrated once the first observation is in.
    let out = curl(&["-sk", &server.url("/api/clean")]);
    assert!(out.status.success());
    server.rows_until(|rows| !rows.is_empty()).await;

    let url = format!("sqlite://{}", server.db().display());
    let mut locker = sqlx::SqliteConnection::connect(&url)
        .await
        .expect("open db");
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut locker)
        .await
        .expect("write lock");

    let start = Instant::now();
    for i in 0..REQUESTS {
        let out = curl(&[
            "-sk",
            "--http1.1",
            &server.url(&format!("/probe/locked-{i}")),
        ]);
        assert_eq!(json_stream(&out.stdout)[0]["token"], format!("locked-{i}"));
    }
    let took = start.elapsed();
    // curl itself costs a few tens of ms per run here; a stalled writer would cost seconds.
    assert!(
        took < Duration::from_secs(4),
        "echoes waited on the database: {took:?}"
    );

    let health = server.healthz();
    let drops = health["observations"]["queue_drops"].as_u64().unwrap_or(0);
    assert!(drops >= 1, "a full queue drops and counts: {health}");

    sqlx::query("ROLLBACK")
        .execute(&mut locker)
        .await
        .expect("unlock");
    locker.close().await.expect("close");

    // The writer resumes: everything queued (not dropped) lands; nothing else is lost.
    let locked = |rows: &[echo_support::Row]| {
        rows.iter()
            .filter(|r| r.token.as_deref().is_some_and(|t| t.starts_with("locked-")))
            .count()
    };
    let drops = usize::try_from(drops).expect("small");
    let rows = server
        .rows_until(|rows| locked(rows) + drops >= REQUESTS)
        .await;
    assert_eq!(locked(&rows) + drops, REQUESTS, "stored + dropped = sent");
    assert!(locked(&rows) >= 1);
    assert_eq!(server.healthz()["observations"]["write_failures"], 0);
}
