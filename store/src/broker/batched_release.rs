//! PostgreSQL's plain releases (an outcome that neither bans nor retires nor counts a failure)
//! from many requests at once, in one statement: group commit for releases.
//!
//! A statement's fixed costs (the round trip, waking the server's backend, setting up the
//! plan's nodes, the commit) are most of what a release costs the server; a release changes a
//! lease row and its unit's row. So one task per store takes every release queued while the
//! previous statement ran and ends them together, after waiting [`LINGER`] for more to come.
//! Under load the queue fills while a statement runs; at a moderate rate the wait gathers the
//! releases a statement per release would have ended one by one; alone, a release goes after
//! the wait, as a single release's statement.
//!
//! The statement keeps [`one_statement`](super::one_statement)'s rules, per unit: its ended
//! exclusive lease sets `exclusive_until` to 0, its ended stateless leases come off
//! `shared_count` together (one `UPDATE … FROM` changes a row once, so the leases are counted
//! per unit first). A release the statement did not end (a stale fence, an expired lease, a
//! lease named twice in one batch) is told why, read afterwards as a single release's refusal
//! is: a lease only ever moves away from `live`, so the statement again would change nothing.
//! The releases of a batch that failed (a deadlock with another instance's batch) go again
//! alone, through the one-statement path.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use exitvoice_lease::{Refusal, Released};
use sqlx::{AnyConnection, AnyPool, Row as _};
use tokio::sync::{mpsc, oneshot};

use super::batch_connection::BatchConnection;
use super::one_statement::{end_lease, released};
use super::transaction::now_ms;
use super::BrokerTables;
use crate::handle::{Engine, StoreError};

/// At most this many releases go in one statement.
const MAX_BATCH: usize = 64;

/// How long a batch waits for more releases before its statement goes. A release's answer
/// comes this much later and its unit is free this much later; in exchange, at half the
/// saturation rate (~2,000 cycles/s) a statement ends ~12 releases instead of one or two,
/// which takes a sixth to a quarter of PostgreSQL's CPU off a cycle and lowers the acquire
/// latency of everything else (docs/benchmarks.md).
const LINGER: Duration = Duration::from_millis(3);

/// The queue of a store's releases, and the task that ends them (started by the first).
#[derive(Debug, Default)]
pub(crate) struct ReleaseQueue(OnceLock<mpsc::UnboundedSender<Job>>);

/// One release waiting for its statement.
struct Job {
    lease_id: String,
    fence: i64,
    outcome: String,
    latency_ms: Option<i64>,
    success: bool,
    answer: oneshot::Sender<Answer>,
}

/// What a batch did with one release.
enum Answer {
    Ended(Released),
    /// The statement ran and did not end the lease.
    NotEnded,
    /// The statement failed.
    Failed,
}

impl BrokerTables {
    /// Ends lease `lease_id` in the next batch, as
    /// [`release_in_one_statement`](Self::release_in_one_statement) would: what it held, or
    /// why not.
    pub(super) async fn release_in_batch(
        &self,
        lease_id: &str,
        fence: i64,
        outcome: &str,
        latency_ms: Option<i64>,
        success: bool,
    ) -> Result<Result<Released, Refusal>, StoreError> {
        let jobs = self.release_queue.0.get_or_init(|| {
            let (jobs, queued) = mpsc::unbounded_channel();
            tokio::spawn(end_batches(self.pool().clone(), queued));
            jobs
        });
        let (answer, answered) = oneshot::channel();
        let job = Job {
            lease_id: lease_id.to_owned(),
            fence,
            outcome: outcome.to_owned(),
            latency_ms,
            success,
            answer,
        };
        // The task is gone only with the runtime that started it: the caller goes alone.
        let answer = match jobs.send(job) {
            Ok(()) => answered.await.unwrap_or(Answer::Failed),
            Err(_) => Answer::Failed,
        };
        match answer {
            Answer::Ended(released) => Ok(Ok(released)),
            Answer::NotEnded => {
                let mut conn = self.pool().acquire().await?;
                Ok(Err(self.refusal(&mut conn, lease_id, fence).await?))
            }
            Answer::Failed => {
                self.release_in_one_statement(lease_id, fence, outcome, latency_ms, success)
                    .await
            }
        }
    }
}

/// Ends the queued releases, a batch per statement, until every sender is gone.
async fn end_batches(pool: AnyPool, mut queued: mpsc::UnboundedReceiver<Job>) {
    let mut conn = BatchConnection::new(pool);
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queued.recv_many(&mut batch, MAX_BATCH).await > 0 {
        linger(&mut queued, &mut batch).await;
        let mut ended = match conn.get().await {
            Ok(held) => end_all(held, &batch).await,
            Err(error) => Err(error),
        };
        if let Err(error) = &ended {
            conn.give_back();
            tracing::debug!(%error, releases = batch.len(), "a batch of releases failed; each goes alone");
        }
        for job in batch.drain(..) {
            let answer = match &mut ended {
                Ok(ended) => ended
                    .remove(&job.lease_id)
                    .map_or(Answer::NotEnded, Answer::Ended),
                Err(_) => Answer::Failed,
            };
            // The caller may have gone (its request dropped); its lease is ended all the same.
            let _ = job.answer.send(answer);
        }
        if queued.is_empty() {
            conn.give_back();
        }
    }
}

/// Adds to `batch` what is queued within [`LINGER`], until it is full.
async fn linger(queued: &mut mpsc::UnboundedReceiver<Job>, batch: &mut Vec<Job>) {
    let until = tokio::time::Instant::now() + LINGER;
    while batch.len() < MAX_BATCH {
        let room = MAX_BATCH - batch.len();
        match tokio::time::timeout_at(until, queued.recv_many(batch, room)).await {
            Ok(received) if received > 0 => {}
            _ => return,
        }
    }
}

/// Ends the leases of `batch` that are live and fenced as their job says: each one's release,
/// by lease id. A batch of one goes as a single release's statement, which costs the server a
/// third of what the batch's statement does for one lease (PostgreSQL 15, measured with
/// `pg_stat_statements`: 127 against 350 µs).
async fn end_all(
    conn: &mut AnyConnection,
    batch: &[Job],
) -> Result<HashMap<String, Released>, StoreError> {
    if let [job] = batch {
        let ended = end_lease(
            conn,
            &job.lease_id,
            job.fence,
            &job.outcome,
            job.latency_ms,
            job.success,
        )
        .await?;
        return Ok(ended
            .map(|lease| (job.lease_id.clone(), lease))
            .into_iter()
            .collect());
    }
    let releases: Vec<_> = batch
        .iter()
        .map(|job| {
            serde_json::json!({
                "lease_id": job.lease_id,
                "fence": job.fence,
                "outcome": job.outcome,
                "latency_ms": job.latency_ms,
                "success": job.success,
            })
        })
        .collect();
    // The leases are found through their primary key (`= ANY`): joined to the JSON rows alone,
    // the planner reads the whole table. Each expired ban a success forgets is counted once,
    // for one of the leases that forgot it (a `DELETE … USING` returns a deleted row once).
    let sql = format!(
        "WITH n AS (SELECT {now} AS ms), \
         r AS (SELECT * FROM json_to_recordset($1::json) AS r(lease_id TEXT, fence BIGINT, \
           outcome TEXT, latency_ms BIGINT, success BOOLEAN)), \
         l AS (UPDATE broker_leases SET state = 'released', outcome = r.outcome, \
           latency_ms = r.latency_ms, ended_ms = n.ms FROM n, r \
           WHERE broker_leases.lease_id = ANY (ARRAY(SELECT lease_id FROM r)) \
           AND broker_leases.lease_id = r.lease_id AND broker_leases.fence = r.fence \
           AND state = 'live' AND expires_ms > n.ms \
           RETURNING broker_leases.lease_id, unit, exit_name, class, origin, ended_ms, r.success), \
         u AS (SELECT unit, COUNT(*) FILTER (WHERE class = 'stateless') AS shared, \
           bool_or(class <> 'stateless') AS exclusive, MAX(ended_ms) AS ended FROM l GROUP BY unit), \
         s AS (UPDATE broker_units SET \
           exclusive_until = CASE WHEN u.exclusive THEN 0 ELSE exclusive_until END, \
           shared_count = GREATEST(shared_count - u.shared, 0), free_at = u.ended \
           FROM u WHERE broker_units.unit = u.unit), \
         e AS (UPDATE broker_exits SET error_streak = 0 FROM l \
           WHERE l.success AND broker_exits.exit_name = l.exit_name AND error_streak <> 0), \
         b AS (DELETE FROM broker_bans USING l WHERE l.success \
           AND broker_bans.exit_name = l.exit_name \
           AND broker_bans.origin IN ('', COALESCE(l.origin, '')) \
           AND broker_bans.until_ms <= l.ended_ms RETURNING l.lease_id) \
         SELECT l.lease_id, l.unit, l.exit_name, l.ended_ms, \
         (SELECT COUNT(*) FROM b WHERE b.lease_id = l.lease_id), \
         set_config('synchronous_commit', 'off', true) FROM l",
        now = now_ms(Engine::Postgres),
    );
    // Its commit does not wait for the WAL flush, as a single release's does not (see
    // `end_lease`).
    let rows = sqlx::query(&sql)
        .bind(serde_json::Value::Array(releases).to_string())
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|row| Ok((row.try_get(0)?, released(row, 1)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Store;
    use exitvoice_lease::{Acquire, LeaseClass, UnitSpec};

    fn unit(name: &str) -> UnitSpec {
        UnitSpec {
            unit: name.into(),
            exit_name: name.into(),
            admits: Some(LeaseClass::Identity),
            capacity: 2,
            gateway: false,
            life_ms: 600_000,
            draining: false,
            country: None,
            gap_ms: None,
        }
    }

    fn ask(lease_id: &str, class: LeaseClass) -> Acquire<'_> {
        Acquire {
            lease_id,
            class,
            holder: "w",
            task: None,
            origin: None,
            ttl_ms: 60_000,
            life_ms: 600_000,
            session_nonce: "n",
            stateless_per_origin: None,
            fences: 1,
            country: None,
            max_gap_ms: None,
        }
    }

    async fn take(store: &BrokerTables, lease_id: &str, class: LeaseClass) -> (String, i64) {
        let granted = store
            .broker_acquire(&ask(lease_id, class))
            .await
            .unwrap()
            .expect("a free unit");
        (granted.unit, granted.fence)
    }

    fn job(lease_id: &str, fence: i64) -> Job {
        Job {
            lease_id: lease_id.into(),
            fence,
            outcome: "ok".into(),
            latency_ms: Some(12),
            success: true,
            answer: oneshot::channel().0,
        }
    }

    /// Releases queued within the wait join the batch; one queued after it waits for the next.
    #[tokio::test(start_paused = true)]
    async fn a_batch_waits_for_the_releases_that_follow_within_its_linger() {
        let (jobs, mut queued) = mpsc::unbounded_channel();
        let sender = tokio::spawn(async move {
            for (lease, after) in [("a", 0), ("b", 1), ("c", 1), ("late", 5)] {
                tokio::time::sleep(Duration::from_millis(after)).await;
                jobs.send(job(lease, 1)).unwrap();
            }
        });
        let mut batch = Vec::new();
        assert_eq!(queued.recv_many(&mut batch, MAX_BATCH).await, 1);
        linger(&mut queued, &mut batch).await;
        let leases: Vec<_> = batch.iter().map(|job| job.lease_id.as_str()).collect();
        assert_eq!(leases, ["a", "b", "c"]);
        sender.await.unwrap();
        assert_eq!(queued.recv().await.unwrap().lease_id, "late");
    }

    /// Two stateless leases on one unit, an exclusive one named twice, one with a stale fence
    /// and an unknown one, in one statement: the first three end, and their units are free.
    #[tokio::test]
    async fn a_batch_ends_its_live_leases_and_counts_shared_ones_per_unit() {
        let url = exitvoice_pgtest::fresh_database("batched_release");
        let store = BrokerTables::new(Store::connect(&url.parse().unwrap()).await.unwrap());
        store.broker_sync_units(&[unit("a")], true).await.unwrap();
        let (a1, s1) = take(&store, "s1", LeaseClass::Stateless).await;
        let (a2, s2) = take(&store, "s2", LeaseClass::Stateless).await;
        assert_eq!((a1.as_str(), a2.as_str()), ("a", "a"));
        store
            .broker_sync_units(&[unit("a"), unit("b"), unit("c")], true)
            .await
            .unwrap();
        let (b, x) = take(&store, "x", LeaseClass::Identity).await;
        let (c, y) = take(&store, "y", LeaseClass::Identity).await;
        assert_eq!((b.as_str(), c.as_str()), ("b", "c"));

        let batch = [
            job("s1", s1),
            job("s2", s2),
            job("x", x),
            job("x", x),
            job("y", y + 7),
            job("nobody", 1),
        ];
        let ended = end_all(&mut store.pool().acquire().await.unwrap(), &batch)
            .await
            .unwrap();
        let mut names: Vec<_> = ended.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["s1", "s2", "x"]);
        assert_eq!(ended["x"].unit, "b");

        let units: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT unit, exclusive_until, shared_count FROM broker_units ORDER BY unit",
        )
        .fetch_all(store.pool())
        .await
        .unwrap();
        assert_eq!(
            units[0],
            ("a".into(), 0, 0),
            "both stateless leases came off"
        );
        assert_eq!((units[1].1, units[1].2), (0, 0), "b is free");
        assert!(units[2].1 > 0, "y's stale fence left c held: {units:?}");
        let outcomes: Vec<(String, String, Option<String>, Option<i64>)> = sqlx::query_as(
            "SELECT lease_id, state, outcome, latency_ms FROM broker_leases ORDER BY lease_id",
        )
        .fetch_all(store.pool())
        .await
        .unwrap();
        for (lease, state, outcome, latency) in &outcomes {
            if lease == "y" {
                assert_eq!((state.as_str(), outcome, latency), ("live", &None, &None));
            } else {
                assert_eq!(
                    (state.as_str(), outcome.as_deref(), latency),
                    ("released", Some("ok"), &Some(12)),
                    "{lease}"
                );
            }
        }
        // Both freed units take an exclusive lease again; c does not.
        take(&store, "after-1", LeaseClass::Identity).await;
        take(&store, "after-2", LeaseClass::Identity).await;
        let third = ask("after-3", LeaseClass::Identity);
        assert!(store.broker_acquire(&third).await.unwrap().is_none());
    }
}
