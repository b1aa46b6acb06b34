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
    // A wide bound: an echo waiting for a queue slot would wait for the writer, which holds each
    // attempt for the store's busy timeout (5 s, store/src/lib.rs) while the lock is held; 18
    // such echoes would take 90 s. 20 curls take about a second here, more under load.
    assert!(
        took < Duration::from_secs(45),
        "echoes waited on the database: {took:?}"
    );

    sqlx::query("ROLLBACK")
        .execute(&mut locker)
        .await
        .expect("unlock");
    locker.close().await.expect("close");

    // The event that shows nothing waited: with the writer stuck on the lock, the queue filled
    // up and the later observations were dropped, not waited for. (Read after the unlock, so
    // /healthz's own connection never competes with them for the queue.)
    let health = server.healthz();
    let drops = health["observations"]["queue_drops"].as_u64().unwrap_or(0);
    assert!(drops >= 1, "a full queue drops and counts: {health}");

    // The writer resumes: everything queued (not dropped) lands. On a slow machine the lock may
    // have outlasted the busy timeout of a write attempt: that batch is lost and counted as a
    // write failure. Nothing is lost uncounted.
    let locked = |rows: &[echo_support::Row]| {
        rows.iter()
            .filter(|r| r.token.as_deref().is_some_and(|t| t.starts_with("locked-")))
            .count()
    };
    let drops = usize::try_from(drops).expect("small");
    let failed = || {
        let health = server.healthz();
        usize::try_from(
            health["observations"]["write_failures"]
                .as_u64()
                .unwrap_or(0),
        )
        .expect("small")
    };
    let rows = server
        .rows_until(|rows| locked(rows) + drops + failed() >= REQUESTS)
        .await;
    let failed = failed();
    assert_eq!(
        locked(&rows) + drops + failed,
        REQUESTS,
        "stored + dropped + failed = sent"
    );
    assert!(locked(&rows) >= 1, "the writer caught up after the lock");
    if took < Duration::from_secs(4) {
        // The lock was held for less than the busy timeout: no write attempt gave up.
        assert_eq!(failed, 0, "write failures with a short lock");
    }
}
