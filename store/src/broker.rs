//! The lease broker's state: units (a plain exit, or one session slot of a gateway), leases with
//! fences, bans and retired gateway session ids (migration `broker`).
//!
//! Every change locks what it decides on before it reads it: PostgreSQL locks the unit's row
//! (`FOR UPDATE`, and `SKIP LOCKED` when an acquire picks among free units, so concurrent
//! acquires take different ones), SQLite takes its one write lock at `BEGIN IMMEDIATE`. The
//! unit's row decides, through columns that err only towards "held" (see [`one_statement`]),
//! and lets an acquire find candidates through an index, without reading the pool. The
//! transactions here also count the unit's live leases under the lock, and recompute the
//! columns from them;
//! PostgreSQL's common cases are one statement each ([`one_statement`]). Every time is the
//! store's clock (`now_ms`), never a caller's.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use exitvoice_lease::{
    Acquire, Backoff, Effect, EgressRecord, ExitReport, Gauges, Granted, LeaseClass, Refusal,
    Released, UnitSpec,
};
use sqlx::any::AnyRow;
use sqlx::{Any, AnyConnection, Row as _, Transaction};
use tokio::sync::OwnedMutexGuard;

use crate::handle::{Engine, Store, StoreError};

mod batch_connection;
mod batched_grant;
mod batched_release;
mod epochs;
mod lineage_turn;
mod liveness;
mod one_statement;

pub(crate) use batched_grant::GrantQueue;
pub(crate) use batched_release::ReleaseQueue;
pub use epochs::EpochLock;
pub use lineage_turn::Confirmed;

/// The store's clock in milliseconds since the Unix epoch, as SQL.
fn now_ms(engine: Engine) -> &'static str {
    match engine {
        Engine::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
        Engine::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
    }
}

/// [`BrokerTables::broker_prune`]'s statement: `$1` the age, `$2` the batch. The clock is read once,
/// in a subquery: compared directly, PostgreSQL's `clock_timestamp()` is volatile, read for
/// every row, and keeps the planner off `broker_leases_end` (the whole table was read at every
/// refresh, ~40 ms at 50,000 leases).
fn prune_statement(engine: Engine) -> String {
    format!(
        "DELETE FROM broker_leases WHERE lease_id IN (SELECT lease_id FROM broker_leases \
         WHERE COALESCE(ended_ms, expires_ms) < (SELECT {now}) - $1 LIMIT $2)",
        now = now_ms(engine)
    )
}

/// The store's clock, read on `conn`.
async fn clock(conn: &mut AnyConnection, engine: Engine) -> Result<i64, StoreError> {
    let sql = format!("SELECT {}", now_ms(engine));
    Ok(sqlx::query_scalar(&sql).fetch_one(conn).await?)
}

/// A broker transaction and, on SQLite, this process's turn at the file's write lock.
struct Locked {
    tx: Transaction<'static, Any>,
    _turn: Option<OwnedMutexGuard<()>>,
}

impl Locked {
    async fn commit(self) -> Result<(), StoreError> {
        Ok(self.tx.commit().await?)
    }

    async fn rollback(self) -> Result<(), StoreError> {
        Ok(self.tx.rollback().await?)
    }
}

impl Deref for Locked {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        &self.tx
    }
}

impl DerefMut for Locked {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.tx
    }
}

/// The broker's tables in one store, with what this process's broker transactions share
/// there. Clones share them; the echo server's and the auditor's [`Store`] carry none of it.
#[derive(Clone, Debug)]
pub struct BrokerTables {
    store: Store,
    /// SQLite has one write lock per file; this process's broker transactions queue for it
    /// here, in arrival order, rather than in SQLite's busy handler, which sleeps 1, 2, 5,
    /// 10… ms between tries and so turns a short wait into a long tail.
    writer_turn: Arc<tokio::sync::Mutex<()>>,
    /// PostgreSQL's plain broker releases, ended a batch per statement.
    release_queue: Arc<ReleaseQueue>,
    /// PostgreSQL's broker grants, a batch of alike acquires per statement.
    grant_queue: Arc<GrantQueue>,
}

impl BrokerTables {
    /// The broker's tables in `store`. One per process and store: its transactions queue on
    /// it (SQLite) and its grants and releases are batched through it (PostgreSQL).
    pub fn new(store: Store) -> Self {
        Self {
            store,
            writer_turn: Arc::default(),
            release_queue: Arc::default(),
            grant_queue: Arc::default(),
        }
    }

    /// The store's connection pool.
    pub fn pool(&self) -> &sqlx::AnyPool {
        self.store.pool()
    }

    /// The store's engine.
    pub fn engine(&self) -> Engine {
        self.store.engine()
    }

    /// A transaction holding the lock broker changes need (see the module docs), on a
    /// connection to the lineage the broker confirmed ([`StoreError::LineageMoved`] if not).
    async fn broker_transaction(&self) -> Result<Locked, StoreError> {
        let tx = self.broker_transaction_anywhere().await?;
        self.broker_lineage_check()?;
        Ok(tx)
    }

    /// Fails with [`StoreError::LineageMoved`] once a connection reached another history of
    /// the database than the broker's: checked after a grant's connection is taken, since
    /// that connection is the one a failover may have made new.
    pub(super) fn broker_lineage_check(&self) -> Result<(), StoreError> {
        if self.store.lineage.moved() {
            return Err(StoreError::LineageMoved);
        }
        Ok(())
    }

    /// A transaction holding the lock broker changes need, on whichever lineage.
    async fn broker_transaction_anywhere(&self) -> Result<Locked, StoreError> {
        Ok(match self.engine() {
            Engine::Sqlite => {
                let turn = Arc::clone(&self.writer_turn).lock_owned().await;
                Locked {
                    tx: self.pool().begin_with("BEGIN IMMEDIATE").await?,
                    _turn: Some(turn),
                }
            }
            Engine::Postgres => Locked {
                tx: self.pool().begin().await?,
                _turn: None,
            },
        })
    }

    /// The store's clock, ms since the Unix epoch.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_now_ms(&self) -> Result<i64, StoreError> {
        let mut conn = self.pool().acquire().await?;
        clock(&mut conn, self.engine()).await
    }

    /// Writes `units`: new ones are added, known ones get their label's class, capacity and life
    /// cap; when `whole` is set, `units` is the whole pool and units not in it drain (a refresh
    /// passes only what changed). The live leases of a unit whose label no longer admits their
    /// class are revoked; a draining unit's run out. How many were revoked.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_sync_units(
        &self,
        units: &[UnitSpec],
        whole: bool,
    ) -> Result<u64, StoreError> {
        let mut tx = self.broker_transaction().await?;
        if whole {
            sqlx::query("UPDATE broker_units SET rank = -1")
                .execute(&mut *tx)
                .await?;
        }
        for spec in units {
            let rank = spec.rank();
            sqlx::query(
                "INSERT INTO broker_units (unit, exit_name, rank, capacity, gateway, life_ms, \
                 country) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (unit) DO UPDATE SET \
                 exit_name = excluded.exit_name, rank = excluded.rank, \
                 capacity = excluded.capacity, gateway = excluded.gateway, \
                 life_ms = excluded.life_ms, country = excluded.country",
            )
            .bind(&spec.unit)
            .bind(&spec.exit_name)
            .bind(rank)
            .bind(i64::from(spec.capacity))
            .bind(i64::from(spec.gateway))
            .bind(spec.life_ms)
            .bind(spec.country.as_deref().unwrap_or(""))
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO broker_exits (exit_name, fence) VALUES ($1, 0) \
                 ON CONFLICT (exit_name) DO NOTHING",
            )
            .bind(&spec.exit_name)
            .execute(&mut *tx)
            .await?;
        }
        // A lease of a class its unit no longer admits (rank below the class's) is revoked; a
        // draining unit's (rank -1) run out.
        let sql = format!(
            "UPDATE broker_leases SET state = 'revoked', ended_ms = {now} \
             WHERE state = 'live' AND expires_ms > {now} AND unit IN \
             (SELECT u.unit FROM broker_units u WHERE u.unit = broker_leases.unit AND u.rank >= 0 \
             AND u.rank < \
             CASE broker_leases.class WHEN 'identity' THEN 3 WHEN 'anonymous' THEN 2 ELSE 1 END)",
            now = now_ms(self.engine())
        );
        let revoked = sqlx::query(&sql).execute(&mut *tx).await?.rows_affected();
        tx.commit().await?;
        Ok(revoked)
    }

    /// Grants a lease of `request.class` on a free unit that admits it, or, for a task that
    /// holds a live lease of that class, returns that lease. `None` when no unit is free.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_acquire(
        &self,
        request: &Acquire<'_>,
    ) -> Result<Option<Granted>, StoreError> {
        if self.engine() == Engine::Postgres && self.origin_cap(request).is_none() {
            if let Some(task) = request.task {
                let mut conn = self.pool().acquire().await?;
                let now = clock(&mut conn, self.engine()).await?;
                if let Some(granted) = sticky(&mut conn, task, request.class, now).await? {
                    return Ok(Some(granted));
                }
            }
            return self.acquire_in_batch(request).await;
        }
        let mut tx = self.broker_transaction().await?;
        let now = clock(&mut tx, self.engine()).await?;
        if let Some(task) = request.task {
            if let Some(granted) = sticky(&mut tx, task, request.class, now).await? {
                tx.commit().await?;
                return Ok(Some(granted));
            }
        }
        let Some((unit, exit_name, gateway, unit_life)) =
            self.candidate(&mut tx, request, now).await?
        else {
            tx.rollback().await?;
            return Ok(None);
        };
        let fence: i64 = sqlx::query_scalar(
            "UPDATE broker_exits SET fence = fence + $2 WHERE exit_name = $1 \
             RETURNING fence - $2 + 1",
        )
        .bind(&exit_name)
        .bind(request.fences.max(1))
        .fetch_one(&mut *tx)
        .await?;
        let expires = now.saturating_add(request.ttl_ms.max(1));
        let life_ends = now.saturating_add(request.life_ms.min(unit_life).max(1));
        let session = gateway.then(|| format!("{}{fence}", request.session_nonce));
        sqlx::query(
            "INSERT INTO broker_leases (lease_id, unit, exit_name, class, holder, task, origin, \
             fence, session, granted_ms, expires_ms, life_ends_ms, state) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'live')",
        )
        .bind(request.lease_id)
        .bind(&unit)
        .bind(&exit_name)
        .bind(request.class.as_str())
        .bind(request.holder)
        .bind(request.task)
        .bind(request.origin)
        .bind(fence)
        .bind(&session)
        .bind(now)
        .bind(expires.min(life_ends))
        .bind(life_ends)
        .execute(&mut *tx)
        .await?;
        refresh_unit(&mut tx, &unit, now).await?;
        tx.commit().await?;
        Ok(Some(Granted {
            lease_id: request.lease_id.to_owned(),
            unit,
            exit_name,
            fence,
            expires_ms: expires.min(life_ends),
            life_ends_ms: life_ends,
            session,
            now_ms: now,
            sticky: false,
        }))
    }

    /// A unit free for `request`, locked: found through the index, then checked against its
    /// live leases under the lock (a candidate whose columns were stale is skipped).
    async fn candidate(
        &self,
        tx: &mut Locked,
        request: &Acquire<'_>,
        now: i64,
    ) -> Result<Option<(String, String, bool, i64)>, StoreError> {
        let free = if request.class.exclusive() {
            "exclusive_until <= $2 AND (shared_until <= $2 OR shared_count = 0)"
        } else {
            "exclusive_until <= $2 AND (shared_until <= $2 OR shared_count < capacity)"
        };
        // A stateless lease with an origin under a cap skips the units at the cap for it.
        let cap = self.origin_cap(request);
        let per_origin = if cap.is_some() {
            " AND (SELECT COUNT(*) FROM broker_leases l WHERE l.unit = u.unit \
             AND l.state = 'live' AND l.expires_ms > $2 AND l.class = 'stateless' \
             AND l.origin = $3) < $4"
        } else {
            ""
        };
        // `country <> ''` lets the planner use the partial index of the units with a country.
        let in_country = match (request.country, cap) {
            (None, _) => "",
            (Some(_), None) => " AND country = $4 AND country <> ''",
            (Some(_), Some(_)) => " AND country = $5 AND country <> ''",
        };
        let lock = match self.engine() {
            Engine::Sqlite => "",
            Engine::Postgres => " FOR UPDATE SKIP LOCKED",
        };
        let sql = format!(
            "SELECT unit, exit_name, gateway, life_ms FROM broker_units u \
             WHERE rank > 0 AND rank >= $1 AND {free}{per_origin}{in_country} \
             AND NOT EXISTS (SELECT 1 FROM broker_bans b \
             WHERE b.exit_name = u.exit_name AND b.origin IN ('', $3) AND b.until_ms > $2) \
             ORDER BY free_at LIMIT 4{lock}"
        );
        let mut query = sqlx::query(&sql)
            .bind(request.class.rank())
            .bind(now)
            .bind(request.origin.unwrap_or(""));
        if let Some(cap) = cap {
            query = query.bind(i64::from(cap));
        }
        if let Some(country) = request.country {
            query = query.bind(country);
        }
        let rows = query.fetch_all(&mut **tx).await?;
        for row in rows {
            let unit: String = row.try_get(0)?;
            let exit_name: String = row.try_get(1)?;
            let gateway: i64 = row.try_get(2)?;
            let life: i64 = row.try_get(3)?;
            let live = live_on(tx, &unit, request.origin.unwrap_or(""), now).await?;
            let fits = if request.class.exclusive() {
                live.exclusive == 0 && live.shared == 0
            } else {
                live.exclusive == 0
                    && live.shared < live.capacity
                    && cap.is_none_or(|cap| live.same_origin < i64::from(cap))
            };
            if fits {
                return Ok(Some((unit, exit_name, gateway != 0, life)));
            }
            refresh_unit(tx, &unit, now).await?;
        }
        Ok(None)
    }

    /// The stateless-per-origin cap that applies to `request`, if any.
    fn origin_cap(&self, request: &Acquire<'_>) -> Option<u32> {
        (!request.class.exclusive() && request.origin.is_some())
            .then_some(request.stateless_per_origin)
            .flatten()
    }

    /// Extends a live lease by `ttl_ms` from the store's now, never past its life's end. The new
    /// expiry, or why not.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_renew(
        &self,
        lease_id: &str,
        fence: i64,
        ttl_ms: i64,
    ) -> Result<Result<i64, Refusal>, StoreError> {
        if self.engine() == Engine::Postgres {
            return self.renew_in_one_statement(lease_id, fence, ttl_ms).await;
        }
        let (mut tx, now, lease) = match self.live_lease(lease_id, fence).await? {
            Ok(live) => live,
            Err(refusal) => return Ok(Err(refusal)),
        };
        if lease.expires_ms >= lease.life_ends_ms {
            tx.rollback().await?;
            return Ok(Err(Refusal::LifeCap));
        }
        let expires = now.saturating_add(ttl_ms.max(1)).min(lease.life_ends_ms);
        sqlx::query("UPDATE broker_leases SET expires_ms = $1 WHERE lease_id = $2")
            .bind(expires)
            .bind(lease_id)
            .execute(&mut *tx)
            .await?;
        refresh_unit(&mut tx, &lease.unit, now).await?;
        tx.commit().await?;
        Ok(Ok(expires))
    }

    /// Ends a live lease with the worker's `outcome` (and the latency it reported), and applies
    /// the outcome's `effect` in the same transaction: bans with exponential back-off, the
    /// exit's error streak, a gateway session retired. The exit and unit it held, or why not.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_release(
        &self,
        lease_id: &str,
        fence: i64,
        outcome: &str,
        latency_ms: Option<i64>,
        effect: Effect,
    ) -> Result<Result<Released, Refusal>, StoreError> {
        let plain = matches!(effect, Effect::Success | Effect::Neutral);
        if self.engine() == Engine::Postgres && plain {
            let success = effect == Effect::Success;
            return self
                .release_in_batch(lease_id, fence, outcome, latency_ms, success)
                .await;
        }
        let (mut tx, now, lease) = match self.live_lease(lease_id, fence).await? {
            Ok(live) => live,
            Err(refusal) => return Ok(Err(refusal)),
        };
        sqlx::query(
            "UPDATE broker_leases SET state = 'released', outcome = $1, latency_ms = $2, \
             ended_ms = $3 WHERE lease_id = $4",
        )
        .bind(outcome)
        .bind(latency_ms)
        .bind(now)
        .bind(lease_id)
        .execute(&mut *tx)
        .await?;
        let (banned_until, recovered_bans) = apply(&mut tx, &lease, effect, now).await?;
        refresh_unit(&mut tx, &lease.unit, now).await?;
        tx.commit().await?;
        Ok(Ok(Released {
            unit: lease.unit,
            exit_name: lease.exit_name,
            banned_until_ms: banned_until,
            recovered_bans,
            retired_session: matches!(effect, Effect::Blocked { .. })
                .then_some(lease.session)
                .flatten(),
            now_ms: now,
        }))
    }

    /// A transaction holding the live lease `lease_id` (its unit locked) with the store's now,
    /// if `fence` is the lease's; else why not, the transaction rolled back.
    async fn live_lease(
        &self,
        lease_id: &str,
        fence: i64,
    ) -> Result<Result<(Locked, i64, LeaseRow), Refusal>, StoreError> {
        let mut tx = self.broker_transaction().await?;
        let (now, lease) = self.locked_lease(&mut tx, lease_id).await?;
        match judge(lease, fence, now) {
            Ok(lease) => Ok(Ok((tx, now, lease))),
            Err(refusal) => {
                tx.rollback().await?;
                Ok(Err(refusal))
            }
        }
    }

    /// The lease `lease_id` with the store's now, its unit locked (PostgreSQL).
    async fn locked_lease(
        &self,
        tx: &mut Locked,
        lease_id: &str,
    ) -> Result<(i64, Option<LeaseRow>), StoreError> {
        if self.engine() == Engine::Postgres {
            sqlx::query(
                "SELECT 1 FROM broker_units WHERE unit = \
                 (SELECT unit FROM broker_leases WHERE lease_id = $1) FOR UPDATE",
            )
            .bind(lease_id)
            .fetch_optional(&mut **tx)
            .await?;
        }
        self.read_lease(tx, lease_id).await
    }

    /// The lease `lease_id` with the store's now.
    async fn read_lease(
        &self,
        conn: &mut AnyConnection,
        lease_id: &str,
    ) -> Result<(i64, Option<LeaseRow>), StoreError> {
        let now = clock(conn, self.engine()).await?;
        let row = sqlx::query(
            "SELECT unit, exit_name, fence, expires_ms, life_ends_ms, state, origin, session \
             FROM broker_leases WHERE lease_id = $1",
        )
        .bind(lease_id)
        .fetch_optional(conn)
        .await?;
        let lease = row
            .map(|row| -> Result<LeaseRow, sqlx::Error> {
                Ok(LeaseRow {
                    unit: row.try_get(0)?,
                    exit_name: row.try_get(1)?,
                    fence: row.try_get(2)?,
                    expires_ms: row.try_get(3)?,
                    life_ends_ms: row.try_get(4)?,
                    state: row.try_get(5)?,
                    origin: row.try_get(6)?,
                    session: row.try_get(7)?,
                })
            })
            .transpose()?;
        Ok((now, lease))
    }
}

impl BrokerTables {
    /// Notes the egress address `ip` a check saw through lease `lease_id` (and the `country` it
    /// was placed in, if known): the address and country its task (or, without a task, the
    /// lease itself) was last seen leaving from before, if any, and
    /// whether another live exclusive lease leaves from `ip` too (two sessions a provider put on
    /// one address: one exit, really). Checks of one address are serialized (PostgreSQL: an
    /// advisory lock on it; SQLite: its write lock), so of two such leases only the later one
    /// is told it shares.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_record_egress(
        &self,
        lease_id: &str,
        ip: &str,
        country: Option<&str>,
    ) -> Result<EgressRecord, StoreError> {
        let mut tx = self.broker_transaction().await?;
        if self.engine() == Engine::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
                .bind(ip)
                .execute(&mut *tx)
                .await?;
        }
        let now = clock(&mut tx, self.engine()).await?;
        let previous: Option<(String, Option<String>)> = sqlx::query_as(
            "SELECT egress, egress_country FROM broker_leases WHERE egress IS NOT NULL AND \
             (lease_id = $1 OR task = (SELECT task FROM broker_leases WHERE lease_id = $1)) \
             ORDER BY granted_ms DESC LIMIT 1",
        )
        .bind(lease_id)
        .fetch_optional(&mut *tx)
        .await?;
        let others: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM broker_leases WHERE egress = $1 AND lease_id <> $2 \
             AND state = 'live' AND expires_ms > $3 AND class <> 'stateless'",
        )
        .bind(ip)
        .bind(lease_id)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE broker_leases SET egress = $1, egress_country = $3 WHERE lease_id = $2",
        )
        .bind(ip)
        .bind(lease_id)
        .bind(country)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        let (previous, previous_country) = previous.unzip();
        Ok(EgressRecord {
            previous,
            previous_country: previous_country.flatten(),
            shared: others > 0,
        })
    }
}

impl BrokerTables {
    /// Every exit of the broker with its live leases, bans and the outcomes of the leases that
    /// ended since `since_ms` (store ms), the newest `most` of them at most: a busy broker
    /// ends millions of leases an hour, and the report reads them through the index on their
    /// end, newest first, without reading the table.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_exit_reports(
        &self,
        since_ms: i64,
        most: i64,
    ) -> Result<Vec<ExitReport>, StoreError> {
        let now = self.broker_now_ms().await?;
        let mut reports: Vec<ExitReport> = Vec::new();
        let mut index = std::collections::HashMap::new();
        // Every grant takes the exit's next fence: the fence counts the leases served, pruned
        // ones included.
        let exits = sqlx::query("SELECT exit_name, fence FROM broker_exits ORDER BY exit_name")
            .fetch_all(self.pool())
            .await?;
        for row in exits {
            let exit_name: String = row.try_get(0)?;
            index.insert(exit_name.clone(), reports.len());
            reports.push(ExitReport {
                exit_name,
                served: row.try_get(1)?,
                ..ExitReport::default()
            });
        }
        let live = sqlx::query(
            "SELECT exit_name, unit, class, holder, expires_ms FROM broker_leases \
             WHERE state = 'live' AND expires_ms > $1 ORDER BY granted_ms",
        )
        .bind(now)
        .fetch_all(self.pool())
        .await?;
        for row in live {
            let exit_name: String = row.try_get(0)?;
            if let Some(report) = index.get(&exit_name).and_then(|&i| reports.get_mut(i)) {
                report.live.push((
                    row.try_get(1)?,
                    row.try_get(2)?,
                    row.try_get(3)?,
                    row.try_get(4)?,
                ));
            }
        }
        let bans = sqlx::query(
            "SELECT exit_name, origin, until_ms FROM broker_bans WHERE until_ms > $1 \
             ORDER BY until_ms",
        )
        .bind(now)
        .fetch_all(self.pool())
        .await?;
        for row in bans {
            let exit_name: String = row.try_get(0)?;
            if let Some(report) = index.get(&exit_name).and_then(|&i| reports.get_mut(i)) {
                report.bans.push((row.try_get(1)?, row.try_get(2)?));
            }
        }
        let ended = sqlx::query(
            "SELECT exit_name, outcome, latency_ms FROM broker_leases \
             WHERE COALESCE(ended_ms, expires_ms) >= $1 AND state = 'released' \
             ORDER BY COALESCE(ended_ms, expires_ms) DESC LIMIT $2",
        )
        .bind(since_ms)
        .bind(most)
        .fetch_all(self.pool())
        .await?;
        for row in ended {
            let exit_name: String = row.try_get(0)?;
            if let Some(report) = index.get(&exit_name).and_then(|&i| reports.get_mut(i)) {
                let outcome: Option<String> = row.try_get(1)?;
                report.outcomes.extend(outcome);
                let latency: Option<i64> = row.try_get(2)?;
                report.latencies_ms.extend(latency);
            }
        }
        Ok(reports)
    }

    /// Deletes up to `batch` leases that ended (or, never ended, expired) more than `keep_ms`
    /// ago by the store's clock; how many. Fences live on in `broker_exits`, retired session ids
    /// in their own table, so nothing a later lease depends on goes.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_prune(&self, keep_ms: i64, batch: i64) -> Result<u64, StoreError> {
        Ok(sqlx::query(&prune_statement(self.engine()))
            .bind(keep_ms)
            .bind(batch)
            .execute(self.pool())
            .await?
            .rows_affected())
    }

    /// Live leases by class, bans in force, and units held by more than one exclusive lease
    /// (a collision: must be 0), at the store's now.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_gauges(&self) -> Result<Gauges, StoreError> {
        let now = self.broker_now_ms().await?;
        let mut gauges = Gauges::default();
        let rows = sqlx::query(
            "SELECT class, COUNT(*) FROM broker_leases WHERE state = 'live' AND expires_ms > $1 \
             GROUP BY class",
        )
        .bind(now)
        .fetch_all(self.pool())
        .await?;
        for row in rows {
            gauges.live.push((row.try_get(0)?, row.try_get(1)?));
        }
        gauges.bans = sqlx::query_scalar("SELECT COUNT(*) FROM broker_bans WHERE until_ms > $1")
            .bind(now)
            .fetch_one(self.pool())
            .await?;
        gauges.collisions = sqlx::query_scalar(
            "SELECT COUNT(*) FROM (SELECT unit FROM broker_leases WHERE state = 'live' \
             AND expires_ms > $1 AND class <> 'stateless' GROUP BY unit HAVING COUNT(*) > 1) c",
        )
        .bind(now)
        .fetch_one(self.pool())
        .await?;
        Ok(gauges)
    }
}

struct LeaseRow {
    unit: String,
    exit_name: String,
    origin: Option<String>,
    session: Option<String>,
    fence: i64,
    expires_ms: i64,
    life_ends_ms: i64,
    state: String,
}

/// The lease if `fence` is its own and it is live at `now`, else why not.
fn judge(lease: Option<LeaseRow>, fence: i64, now: i64) -> Result<LeaseRow, Refusal> {
    let lease = lease.ok_or(Refusal::Unknown)?;
    if lease.fence != fence {
        return Err(Refusal::StaleFence);
    }
    match lease.state.as_str() {
        "released" => Err(Refusal::Released),
        "revoked" => Err(Refusal::Revoked),
        _ if lease.expires_ms <= now => Err(Refusal::Expired),
        _ => Ok(lease),
    }
}

/// Applies a released lease's `effect` at `now`: until when it banned, if it did, and how many
/// expired bans it forgot.
async fn apply(
    tx: &mut Locked,
    lease: &LeaseRow,
    effect: Effect,
    now: i64,
) -> Result<(Option<i64>, u64), StoreError> {
    let origin = lease.origin.as_deref().unwrap_or("");
    match effect {
        Effect::Success => {
            sqlx::query("UPDATE broker_exits SET error_streak = 0 WHERE exit_name = $1")
                .bind(&lease.exit_name)
                .execute(&mut **tx)
                .await?;
            let recovered = sqlx::query(
                "DELETE FROM broker_bans WHERE exit_name = $1 AND origin IN ('', $2) \
                 AND until_ms <= $3",
            )
            .bind(&lease.exit_name)
            .bind(origin)
            .bind(now)
            .execute(&mut **tx)
            .await?
            .rows_affected();
            Ok((None, recovered))
        }
        Effect::Blocked(backoff) => match &lease.session {
            // A gateway: the session id goes, never the whole gateway.
            Some(session) => {
                retire(tx, &lease.exit_name, session, now).await?;
                Ok((None, 0))
            }
            None => Ok((
                Some(ban(tx, &lease.exit_name, origin, backoff, now).await?),
                0,
            )),
        },
        Effect::Failed { backoff, streak } => {
            let reached: i64 = sqlx::query_scalar(
                "UPDATE broker_exits SET error_streak = error_streak + 1 WHERE exit_name = $1 \
                 RETURNING error_streak",
            )
            .bind(&lease.exit_name)
            .fetch_one(&mut **tx)
            .await?;
            if reached < i64::from(streak.max(1)) {
                return Ok((None, 0));
            }
            sqlx::query("UPDATE broker_exits SET error_streak = 0 WHERE exit_name = $1")
                .bind(&lease.exit_name)
                .execute(&mut **tx)
                .await?;
            Ok((Some(ban(tx, &lease.exit_name, "", backoff, now).await?), 0))
        }
        Effect::Neutral => Ok((None, 0)),
        Effect::Retire => {
            if let Some(session) = &lease.session {
                retire(tx, &lease.exit_name, session, now).await?;
            }
            Ok((None, 0))
        }
    }
}

/// Retires the gateway session id `session` of `exit_name`: never issued again.
async fn retire(
    tx: &mut Locked,
    exit_name: &str,
    session: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO broker_retired_sessions (exit_name, session, retired_ms) \
         VALUES ($1, $2, $3) ON CONFLICT (exit_name, session) DO NOTHING",
    )
    .bind(exit_name)
    .bind(session)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Bans `exit_name` for `origin` (`''`: for every origin) from `now`; until when.
async fn ban(
    tx: &mut Locked,
    exit_name: &str,
    origin: &str,
    backoff: Backoff,
    now: i64,
) -> Result<i64, StoreError> {
    let strikes: i64 = sqlx::query_scalar(
        "INSERT INTO broker_bans (exit_name, origin, until_ms, strikes) VALUES ($1, $2, 0, 1) \
         ON CONFLICT (exit_name, origin) DO UPDATE SET strikes = broker_bans.strikes + 1 \
         RETURNING strikes",
    )
    .bind(exit_name)
    .bind(origin)
    .fetch_one(&mut **tx)
    .await?;
    let doubled = 1_i64 << (strikes - 1).clamp(0, 6);
    #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
    let length =
        (backoff.ttl_ms.saturating_mul(doubled) as f64 * backoff.jitter.clamp(1.0, 2.0)) as i64;
    let until = now.saturating_add(length.max(1));
    sqlx::query("UPDATE broker_bans SET until_ms = $1 WHERE exit_name = $2 AND origin = $3")
        .bind(until)
        .bind(exit_name)
        .bind(origin)
        .execute(&mut **tx)
        .await?;
    Ok(until)
}

/// The live lease of `task` in `class`, if it holds one.
async fn sticky(
    conn: &mut AnyConnection,
    task: &str,
    class: LeaseClass,
    now: i64,
) -> Result<Option<Granted>, StoreError> {
    let row = sqlx::query(
        "SELECT lease_id, unit, exit_name, fence, expires_ms, life_ends_ms, session, $2 \
         FROM broker_leases \
         WHERE task = $1 AND state = 'live' AND expires_ms > $2 AND class = $3 \
         ORDER BY granted_ms DESC LIMIT 1",
    )
    .bind(task)
    .bind(now)
    .bind(class.as_str())
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|row| granted(&row, true)).transpose()?)
}

/// A lease from a row of `lease_id, unit, exit_name, fence, expires_ms, life_ends_ms, session`
/// and the store's now.
fn granted(row: &AnyRow, sticky: bool) -> Result<Granted, sqlx::Error> {
    Ok(Granted {
        lease_id: row.try_get(0)?,
        unit: row.try_get(1)?,
        exit_name: row.try_get(2)?,
        fence: row.try_get(3)?,
        expires_ms: row.try_get(4)?,
        life_ends_ms: row.try_get(5)?,
        session: row.try_get(6)?,
        now_ms: row.try_get(7)?,
        sticky,
    })
}

/// What holds a unit at a moment.
struct Live {
    /// Live exclusive leases.
    exclusive: i64,
    /// Live stateless leases.
    shared: i64,
    /// Live stateless leases for the origin asked about.
    same_origin: i64,
    /// The stateless leases the unit carries at once.
    capacity: i64,
}

/// What holds `unit` at `now`, stateless leases for `origin` counted apart.
async fn live_on(
    conn: &mut AnyConnection,
    unit: &str,
    origin: &str,
    now: i64,
) -> Result<Live, StoreError> {
    let row = sqlx::query(
        "SELECT \
         (SELECT COUNT(*) FROM broker_leases WHERE unit = $1 AND state = 'live' \
          AND expires_ms > $2 AND class <> 'stateless'), \
         (SELECT COUNT(*) FROM broker_leases WHERE unit = $1 AND state = 'live' \
          AND expires_ms > $2 AND class = 'stateless'), \
         (SELECT COUNT(*) FROM broker_leases WHERE unit = $1 AND state = 'live' \
          AND expires_ms > $2 AND class = 'stateless' AND origin = $3), \
         (SELECT capacity FROM broker_units WHERE unit = $1)",
    )
    .bind(unit)
    .bind(now)
    .bind(origin)
    .fetch_one(&mut *conn)
    .await?;
    Ok(Live {
        exclusive: row.try_get(0)?,
        shared: row.try_get(1)?,
        same_origin: row.try_get(2)?,
        capacity: row.try_get(3)?,
    })
}

/// Brings `unit`'s index columns up to date with its live leases at `now`.
async fn refresh_unit(conn: &mut AnyConnection, unit: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE broker_units SET \
         exclusive_until = COALESCE((SELECT MAX(expires_ms) FROM broker_leases WHERE unit = $1 \
           AND state = 'live' AND expires_ms > $2 AND class <> 'stateless'), 0), \
         shared_until = COALESCE((SELECT MAX(expires_ms) FROM broker_leases WHERE unit = $1 \
           AND state = 'live' AND expires_ms > $2 AND class = 'stateless'), 0), \
         shared_count = (SELECT COUNT(*) FROM broker_leases WHERE unit = $1 \
           AND state = 'live' AND expires_ms > $2 AND class = 'stateless'), \
         free_at = $2 WHERE unit = $1",
    )
    .bind(unit)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every refresh prunes: on PostgreSQL the ended leases are found through their end's
    /// index, never by reading the whole table (the planner is kept off sequential scans, so
    /// the plan names the index only if the statement lets it use one).
    #[tokio::test]
    async fn pruning_reads_the_end_index_on_postgres() {
        let url = exitvoice_pgtest::fresh_database("broker_prune_plan");
        let store = BrokerTables::new(Store::connect(&url.parse().unwrap()).await.unwrap());
        let mut conn = store.pool().acquire().await.unwrap();
        sqlx::query("SET enable_seqscan = off")
            .execute(&mut *conn)
            .await
            .unwrap();
        let explain = format!("EXPLAIN {}", prune_statement(Engine::Postgres));
        let plan: Vec<String> = sqlx::query_scalar(&explain)
            .bind(3_600_000_i64)
            .bind(100_i64)
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        assert!(
            plan.iter().any(|step| step.contains("broker_leases_end")),
            "{plan:#?}"
        );
        sqlx::query("RESET enable_seqscan")
            .execute(&mut *conn)
            .await
            .unwrap();
    }
}
