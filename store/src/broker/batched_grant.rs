//! PostgreSQL's grants from many requests at once, in one statement: what
//! [`batched_release`](super::batched_release) does for releases, for acquires.
//!
//! One task per store takes every acquire queued while its previous statement ran. Acquires
//! that ask alike (class, origin, country, gap limit, fences) go together: one walk of the free units
//! takes as many as there are requests (`LIMIT n … FOR UPDATE SKIP LOCKED`: distinct units,
//! none that another statement holds), and the i-th request in arrival order gets the i-th
//! least recently touched. Requests that ask differently go in statements of their own, one
//! after the other, so each sees what the one before it granted. A group of one runs
//! [`acquire_in_one_statement`], which costs the server less for one lease.
//!
//! Per unit the statement keeps the single statement's rules (see
//! [`one_statement`](super::one_statement)): each unit takes one lease. Fences are per exit and
//! a gateway's sessions are units of one exit, so the exit's counter grows once by every
//! fence its units take, and the k-th of its units in the batch gets the k-th range (`UPDATE …
//! FROM` changes a row once). A batch that failed (a deadlock with another instance's batch
//! on two gateways' counters) leaves nothing behind; each of its requests goes again alone.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use exitvoice_lease::{Acquire, Granted, LeaseClass};
use sqlx::{AnyConnection, AnyPool};
use tokio::sync::{mpsc, oneshot};

use super::acquire::granted;
use super::batch_connection::BatchConnection;
use super::one_statement::{acquire_in_one_statement, free_for, grant_end, GRANTED, NEW_LEASES};
use super::transaction::now_ms;
use super::BrokerTables;
use crate::handle::{Engine, StoreError};
use crate::lineage::Watch;

/// At most this many acquires are taken from the queue at once.
const MAX_BATCH: usize = 64;

/// The queue of a store's acquires, and the task that grants them (started by the first).
#[derive(Debug, Default)]
pub(crate) struct GrantQueue(OnceLock<mpsc::UnboundedSender<Ask>>);

/// One acquire waiting for its statement: the request, owned.
struct Ask {
    lease_id: String,
    class: LeaseClass,
    holder: String,
    task: Option<String>,
    origin: Option<String>,
    ttl_ms: i64,
    life_ms: i64,
    session_nonce: String,
    fences: i64,
    country: Option<String>,
    max_gap_ms: Option<u32>,
    answer: oneshot::Sender<Answer>,
}

impl Ask {
    fn request(&self) -> Acquire<'_> {
        Acquire {
            lease_id: &self.lease_id,
            class: self.class,
            holder: &self.holder,
            task: self.task.as_deref(),
            origin: self.origin.as_deref(),
            ttl_ms: self.ttl_ms,
            life_ms: self.life_ms,
            session_nonce: &self.session_nonce,
            stateless_per_origin: None,
            fences: self.fences,
            country: self.country.as_deref(),
            max_gap_ms: self.max_gap_ms,
        }
    }

    /// What requests must share to be granted by one statement.
    fn alike(&self, other: &Self) -> bool {
        self.class == other.class
            && self.origin == other.origin
            && self.country == other.country
            && self.max_gap_ms == other.max_gap_ms
            && self.fences == other.fences
    }
}

/// What a statement did with one acquire.
enum Answer {
    Granted(Option<Granted>),
    /// The statement failed.
    Failed,
}

impl BrokerTables {
    /// Grants `request` (which has no per-origin cap) in the next batch, as
    /// [`acquire_in_one_statement`] would: the lease, or `None` when no unit is free.
    pub(super) async fn acquire_in_batch(
        &self,
        request: &Acquire<'_>,
    ) -> Result<Option<Granted>, StoreError> {
        let asks = self.grant_queue.0.get_or_init(|| {
            let (asks, queued) = mpsc::unbounded_channel();
            tokio::spawn(grant_batches(
                self.pool().clone(),
                Arc::clone(&self.store.lineage),
                queued,
            ));
            asks
        });
        let (answer, answered) = oneshot::channel();
        let ask = Ask {
            lease_id: request.lease_id.to_owned(),
            class: request.class,
            holder: request.holder.to_owned(),
            task: request.task.map(str::to_owned),
            origin: request.origin.map(str::to_owned),
            ttl_ms: request.ttl_ms,
            life_ms: request.life_ms,
            session_nonce: request.session_nonce.to_owned(),
            fences: request.fences,
            country: request.country.map(str::to_owned),
            max_gap_ms: request.max_gap_ms,
            answer,
        };
        // The task is gone only with the runtime that started it: the caller goes alone.
        let answer = match asks.send(ask) {
            Ok(()) => answered.await.unwrap_or(Answer::Failed),
            Err(_) => Answer::Failed,
        };
        match answer {
            Answer::Granted(granted) => Ok(granted),
            Answer::Failed => {
                let mut conn = self.pool().acquire().await?;
                self.broker_lineage_check()?;
                acquire_in_one_statement(&mut conn, request).await
            }
        }
    }
}

/// Grants the queued acquires, a group of alike ones per statement, until every sender is
/// gone.
async fn grant_batches(
    pool: AnyPool,
    lineage: Arc<Watch>,
    mut queued: mpsc::UnboundedReceiver<Ask>,
) {
    let mut conn = BatchConnection::new(pool);
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queued.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let mut left = std::mem::take(&mut batch);
        while !left.is_empty() {
            let first = left.remove(0);
            let (mut group, rest): (Vec<Ask>, Vec<Ask>) =
                left.into_iter().partition(|ask| ask.alike(&first));
            group.insert(0, first);
            left = rest;
            answer_group(&mut conn, &lineage, group).await;
        }
        if queued.is_empty() {
            conn.give_back();
        }
    }
}

/// Grants one group and answers each of its requests; none on a connection to another
/// history of the database than the broker's (each caller then learns it alone).
async fn answer_group(conn: &mut BatchConnection, lineage: &Watch, group: Vec<Ask>) {
    let mut granted = match conn.get().await {
        Ok(_) if lineage.moved() => Err(StoreError::LineageMoved),
        Ok(held) => grant_all(held, &group).await,
        Err(error) => Err(error),
    };
    if let Err(error) = &granted {
        conn.give_back();
        tracing::debug!(%error, acquires = group.len(), "a batch of grants failed; each goes alone");
    }
    for ask in group {
        let answer = match &mut granted {
            Ok(granted) => Answer::Granted(granted.remove(&ask.lease_id)),
            Err(_) => Answer::Failed,
        };
        // The caller may have gone (its request dropped); its lease runs out unused.
        let _ = ask.answer.send(answer);
    }
}

/// Grants a lease to each request of `group` (alike requests, in arrival order) while free
/// units last: the leases by lease id.
async fn grant_all(
    conn: &mut AnyConnection,
    group: &[Ask],
) -> Result<HashMap<String, Granted>, StoreError> {
    if let [ask] = group {
        let granted = acquire_in_one_statement(conn, &ask.request()).await?;
        return Ok(granted
            .map(|lease| (lease.lease_id.clone(), lease))
            .into_iter()
            .collect());
    }
    let first = &group[0];
    let asks: Vec<_> = group
        .iter()
        .map(|ask| {
            serde_json::json!({
                "lease_id": ask.lease_id,
                "holder": ask.holder,
                "task": ask.task,
                "ttl_ms": ask.ttl_ms.max(1),
                "life_ms": ask.life_ms,
                "nonce": ask.session_nonce,
            })
        })
        .collect();
    let max_gap = first.request().max_gap_ms.map(i64::from);
    let free = free_for(
        first.class,
        first.country.is_some(),
        [2, 3, 6],
        max_gap.map(|_| 9),
    );
    let end = grant_end(first.class);
    // `p.i` numbers the units as the walk found them, `r.i` the requests as they came; `p.k`
    // numbers the units of one exit, for their fences.
    let sql = format!(
        "WITH n AS (SELECT {now} AS ms), \
         r AS (SELECT row_number() OVER () AS i, * FROM json_to_recordset($1::json) \
           AS r(lease_id TEXT, holder TEXT, task TEXT, ttl_ms BIGINT, life_ms BIGINT, nonce TEXT)), \
         c AS (SELECT u.unit, u.exit_name, u.gateway, u.life_ms, u.free_at, n.ms AS now_ms \
           FROM broker_units u, n WHERE {free} \
           ORDER BY u.free_at LIMIT $7 FOR UPDATE OF u SKIP LOCKED), \
         p AS (SELECT c.*, row_number() OVER (ORDER BY c.free_at, c.unit) AS i, \
           row_number() OVER (PARTITION BY c.exit_name ORDER BY c.free_at, c.unit) AS k FROM c), \
         f AS (UPDATE broker_exits e SET fence = e.fence + $5 * g.taken \
           FROM (SELECT exit_name, COUNT(*) AS taken FROM p GROUP BY exit_name) g \
           WHERE e.exit_name = g.exit_name RETURNING e.exit_name, e.fence - $5 * g.taken AS base), \
         q AS (SELECT r.lease_id, r.holder, r.task, r.nonce, p.unit, p.exit_name, p.gateway, \
           p.now_ms, f.base + (p.k - 1) * $5 + 1 AS fence, \
           p.now_ms + GREATEST(LEAST(r.life_ms, p.life_ms), 1) AS life_ends, r.ttl_ms \
           FROM p JOIN r ON r.i = p.i JOIN f ON f.exit_name = p.exit_name), \
         l AS ({NEW_LEASES} SELECT q.lease_id, q.unit, q.exit_name, $4, q.holder, q.task, $8, \
           q.fence, CASE WHEN q.gateway <> 0 THEN q.nonce || q.fence END, q.now_ms, \
           LEAST(q.now_ms + q.ttl_ms, q.life_ends), q.life_ends, 'live' FROM q \
           RETURNING {GRANTED}), {end}",
        now = now_ms(Engine::Postgres),
    );
    let mut query = sqlx::query(&sql)
        .bind(serde_json::Value::Array(asks).to_string())
        .bind(first.class.rank())
        .bind(first.origin.as_deref().unwrap_or(""))
        .bind(first.class.as_str())
        .bind(first.fences.max(1))
        .bind(first.country.as_deref().unwrap_or(""))
        .bind(i64::try_from(group.len()).unwrap_or(i64::MAX))
        .bind(first.origin.as_deref());
    if let Some(max_gap) = max_gap {
        query = query.bind(max_gap);
    }
    let rows = query.fetch_all(conn).await?;
    rows.iter()
        .map(|row| {
            let lease = granted(row, false)?;
            Ok((lease.lease_id.clone(), lease))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Store;
    use exitvoice_lease::UnitSpec;

    fn unit(name: &str, exit_name: &str, gateway: bool) -> UnitSpec {
        UnitSpec {
            unit: name.into(),
            exit_name: exit_name.into(),
            admits: Some(LeaseClass::Identity),
            capacity: 2,
            gateway,
            life_ms: 600_000,
            draining: false,
            country: None,
            gap_ms: None,
        }
    }

    fn ask(lease_id: &str, fences: i64) -> Ask {
        Ask {
            lease_id: lease_id.into(),
            class: LeaseClass::Identity,
            holder: "w".into(),
            task: None,
            origin: None,
            ttl_ms: 60_000,
            life_ms: 600_000,
            session_nonce: "n".into(),
            fences,
            country: None,
            max_gap_ms: None,
            answer: oneshot::channel().0,
        }
    }

    /// Acquires queued together, some with a gap limit and some without, in one batch: those
    /// with the limit form a group of their own (arrival order), get only the unit measured
    /// within it and, past it, nothing; those without take the rest, the unmeasured unit
    /// included.
    #[tokio::test]
    async fn a_batch_groups_acquires_by_their_gap_limit() {
        let url = exitvoice_pgtest::fresh_database("batched_grant_gap");
        let store = BrokerTables::new(Store::connect(&url.parse().unwrap()).await.unwrap());
        let with_gap = |name: &str, gap_ms: Option<u32>| UnitSpec {
            gap_ms,
            ..unit(name, name, false)
        };
        let units = [
            with_gap("near", Some(5)),
            with_gap("far", Some(30)),
            with_gap("unmeasured", None),
        ];
        store.broker_sync_units(&units, true).await.unwrap();
        let ids = ["l1", "u1", "l2", "u2", "l3"];
        let requests: Vec<Acquire<'_>> = ids
            .iter()
            .map(|id| Acquire {
                lease_id: id,
                class: LeaseClass::Identity,
                holder: "w",
                task: None,
                origin: None,
                ttl_ms: 60_000,
                life_ms: 600_000,
                session_nonce: "n",
                stateless_per_origin: None,
                fences: 1,
                country: None,
                max_gap_ms: id.starts_with('l').then_some(10),
            })
            .collect();
        // Polled in turn on this one thread, every request is queued before the batch task
        // runs: they reach it as one batch.
        let answers = tokio::join!(
            store.acquire_in_batch(&requests[0]),
            store.acquire_in_batch(&requests[1]),
            store.acquire_in_batch(&requests[2]),
            store.acquire_in_batch(&requests[3]),
            store.acquire_in_batch(&requests[4]),
        );
        let units: Vec<Option<String>> = [answers.0, answers.1, answers.2, answers.3, answers.4]
            .into_iter()
            .map(|answer| answer.unwrap().map(|lease| lease.unit))
            .collect();
        assert_eq!(
            units[0].as_deref(),
            Some("near"),
            "the first limited request gets the unit within the limit: {units:?}"
        );
        assert_eq!(
            (units[2].as_deref(), units[4].as_deref()),
            (None, None),
            "no other unit meets the limit: {units:?}"
        );
        let mut unlimited = [units[1].as_deref(), units[3].as_deref()];
        unlimited.sort_unstable();
        assert_eq!(unlimited, [Some("far"), Some("unmeasured")]);
        let live: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM broker_leases")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(live, 3);
    }

    /// Five alike acquires in one statement on a plain exit and a gateway of three sessions:
    /// the first four get the four units in the order the walk finds them, the fifth nothing;
    /// the gateway's sessions get fence ranges that follow one another, and the exits'
    /// counters end past every range.
    #[tokio::test]
    async fn a_batch_grants_distinct_units_and_fence_ranges_per_exit() {
        let url = exitvoice_pgtest::fresh_database("batched_grant");
        let store = BrokerTables::new(Store::connect(&url.parse().unwrap()).await.unwrap());
        let units = [
            unit("a", "a", false),
            unit("g#1", "g", true),
            unit("g#2", "g", true),
            unit("g#3", "g", true),
        ];
        store.broker_sync_units(&units, true).await.unwrap();
        let group: Vec<_> = (1..=5).map(|i| ask(&format!("l{i}"), 2)).collect();
        let granted = grant_all(&mut store.pool().acquire().await.unwrap(), &group)
            .await
            .unwrap();

        let mut names: Vec<_> = granted.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["l1", "l2", "l3", "l4"], "four units for five asks");
        let held: Vec<(&str, &str, i64, Option<&str>)> = (1..=4)
            .map(|i| {
                let lease = &granted[&format!("l{i}")];
                (
                    lease.unit.as_str(),
                    lease.exit_name.as_str(),
                    lease.fence,
                    lease.session.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            held,
            [
                ("a", "a", 1, None),
                ("g#1", "g", 1, Some("n1")),
                ("g#2", "g", 3, Some("n3")),
                ("g#3", "g", 5, Some("n5")),
            ]
        );
        let counters: Vec<(String, i64)> =
            sqlx::query_as("SELECT exit_name, fence FROM broker_exits ORDER BY exit_name")
                .fetch_all(store.pool())
                .await
                .unwrap();
        assert_eq!(counters, [("a".into(), 2), ("g".into(), 6)]);
        let rows: Vec<(String, String, i64)> =
            sqlx::query_as("SELECT lease_id, state, fence FROM broker_leases ORDER BY lease_id")
                .fetch_all(store.pool())
                .await
                .unwrap();
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert!(rows.iter().all(|(_, state, _)| state == "live"));

        // Every unit is held: a batch of two more finds nothing, and neither does one alone.
        let more = [ask("m1", 1), ask("m2", 1)];
        assert!(grant_all(&mut store.pool().acquire().await.unwrap(), &more)
            .await
            .unwrap()
            .is_empty());
        assert!(
            grant_all(&mut store.pool().acquire().await.unwrap(), &more[..1])
                .await
                .unwrap()
                .is_empty()
        );
    }
}
