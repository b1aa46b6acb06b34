//! PostgreSQL's acquire, renew and release in one statement each (data-modifying `WITH`
//! queries, run in autocommit): one round trip instead of a transaction's eight or nine, which
//! is most of a lease's cost on the server and in the broker (see docs/benchmarks.md).
//!
//! They decide on the unit's row alone, never on a count of its leases: the row is locked
//! (`FOR UPDATE … SKIP LOCKED` on acquire, the `UPDATE` on renew and release) and PostgreSQL
//! re-reads a row it waited for before it updates it (READ COMMITTED, "EvalPlanQual"), whereas a
//! sub-select over `broker_leases` would read the statement's older snapshot. So the row's
//! columns are kept in step by every change, each from its own old values:
//! - `exclusive_until` is at least the expiry of every live exclusive lease on the unit, and an
//!   exclusive lease is alone on its unit, so releasing it sets 0;
//! - `shared_until` is at least the expiry of every live stateless lease; `shared_count` counts
//!   them, or more (one that lapsed unreleased stays counted until `shared_until` passes).
//!
//! Both only ever err towards "held", which costs a free unit at worst, never a second holder.
//! The transaction path (SQLite, a per-origin cap, a release that bans or retires) recomputes
//! them from the unit's leases under its lock, which keeps the same two rules.

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row as _};

use exitvoice_lease::{Acquire, Granted, LeaseClass, Refusal, Released};

use super::acquire::granted;
use super::lease_row::judge;
use super::transaction::now_ms;
use super::BrokerTables;
use crate::handle::{Engine, StoreError};

/// The walk's filter over units `u` at the store's now `n.ms`: those that admit `class` (its
/// rank in parameter `$rank`), free for it, not banned for the origin (`$origin`), of the
/// country asked for (`$country`, '' for any; `u.country <> ''` lets the planner use the
/// partial index of the units with a country), and, when `max_gap` names a parameter, whose
/// gap is known and at most its value (ms; a NULL gap fails the comparison). Without a gap
/// limit the filter has no gap term.
pub(super) fn free_for(
    class: LeaseClass,
    by_country: bool,
    [rank, origin, country]: [u8; 3],
    max_gap: Option<u8>,
) -> String {
    let fits = if class.exclusive() {
        "u.exclusive_until <= n.ms AND (u.shared_until <= n.ms OR u.shared_count = 0)"
    } else {
        "u.exclusive_until <= n.ms AND (u.shared_until <= n.ms OR u.shared_count < u.capacity)"
    };
    let in_country = if by_country {
        format!("u.country = ${country} AND u.country <> ''")
    } else {
        format!("${country} = ''")
    };
    let within_gap = match max_gap {
        Some(param) => format!(" AND u.gap_ms <= ${param}"),
        None => String::new(),
    };
    format!(
        "u.rank > 0 AND u.rank >= ${rank} AND {fits} AND {in_country}{within_gap} \
         AND NOT EXISTS (SELECT 1 FROM broker_bans b WHERE b.exit_name = u.exit_name \
           AND b.origin IN ('', ${origin}) AND b.until_ms > n.ms)"
    )
}

/// The start of a grant's `INSERT … SELECT` of its new leases.
pub(super) const NEW_LEASES: &str = "INSERT INTO broker_leases (lease_id, unit, exit_name, \
    class, holder, task, origin, fence, session, granted_ms, expires_ms, life_ends_ms, state)";

/// The columns of a granted lease, in [`granted`]'s order.
pub(super) const GRANTED: &str =
    "lease_id, unit, exit_name, fence, expires_ms, life_ends_ms, session, granted_ms";

/// The end of a grant statement after its new leases `l` (`RETURNING` [`GRANTED`]): their
/// units' rows changed for leases of `class`, and the leases.
pub(super) fn grant_end(class: LeaseClass) -> String {
    let columns = if class.exclusive() {
        "exclusive_until = l.expires_ms"
    } else {
        "shared_count = CASE WHEN broker_units.shared_until <= l.granted_ms THEN 1 \
         ELSE broker_units.shared_count + 1 END, \
         shared_until = GREATEST(broker_units.shared_until, l.expires_ms)"
    };
    format!(
        "s AS (UPDATE broker_units SET {columns}, free_at = l.granted_ms FROM l \
           WHERE broker_units.unit = l.unit) \
         SELECT {GRANTED} FROM l"
    )
}

/// A new lease on the least recently touched free unit that admits `request.class`, or
/// `None`; see the module docs.
pub(super) async fn acquire_in_one_statement(
    conn: &mut AnyConnection,
    request: &Acquire<'_>,
) -> Result<Option<Granted>, StoreError> {
    let max_gap = request.max_gap_ms.map(i64::from);
    let free = free_for(
        request.class,
        request.country.is_some(),
        [2, 3, 12],
        max_gap.map(|_| 13),
    );
    let end = grant_end(request.class);
    let sql = format!(
        "WITH n AS (SELECT {now} AS ms), \
         c AS (SELECT u.unit, u.exit_name, u.gateway, n.ms AS now_ms, \
           n.ms + GREATEST(LEAST($1, u.life_ms), 1) AS life_ends \
           FROM broker_units u, n WHERE {free} \
           ORDER BY u.free_at LIMIT 1 FOR UPDATE OF u SKIP LOCKED), \
         f AS (UPDATE broker_exits e SET fence = e.fence + $11 FROM c \
           WHERE e.exit_name = c.exit_name RETURNING e.fence - $11 + 1 AS fence), \
         l AS ({NEW_LEASES} SELECT $4, c.unit, c.exit_name, $5, $6, $7, $8, f.fence, \
           CASE WHEN c.gateway <> 0 THEN $9 || f.fence END, c.now_ms, \
           LEAST(c.now_ms + $10, c.life_ends), c.life_ends, 'live' FROM c, f \
           RETURNING {GRANTED}), {end}",
        now = now_ms(Engine::Postgres),
    );
    let mut query = sqlx::query(&sql)
        .bind(request.life_ms)
        .bind(request.class.rank())
        .bind(request.origin.unwrap_or(""))
        .bind(request.lease_id)
        .bind(request.class.as_str())
        .bind(request.holder)
        .bind(request.task)
        .bind(request.origin)
        .bind(request.session_nonce)
        .bind(request.ttl_ms.max(1))
        .bind(request.fences.max(1))
        .bind(request.country.unwrap_or(""));
    if let Some(max_gap) = max_gap {
        query = query.bind(max_gap);
    }
    let row = query.fetch_optional(conn).await?;
    Ok(row.map(|row| granted(&row, false)).transpose()?)
}

impl BrokerTables {
    /// Extends lease `lease_id` (if `fence` is its own and it is live below its life cap) by
    /// `ttl_ms` from now, never past its life's end: the new expiry, or why not.
    pub(super) async fn renew_in_one_statement(
        &self,
        lease_id: &str,
        fence: i64,
        ttl_ms: i64,
    ) -> Result<Result<i64, Refusal>, StoreError> {
        let sql = format!(
            "WITH n AS (SELECT {now} AS ms), \
             l AS (UPDATE broker_leases SET expires_ms = LEAST(n.ms + $1, life_ends_ms) FROM n \
               WHERE lease_id = $2 AND fence = $3 AND state = 'live' AND expires_ms > n.ms \
               AND expires_ms < life_ends_ms RETURNING unit, class, expires_ms), \
             s AS (UPDATE broker_units SET \
               exclusive_until = CASE WHEN l.class = 'stateless' THEN exclusive_until \
                 ELSE GREATEST(exclusive_until, l.expires_ms) END, \
               shared_until = CASE WHEN l.class = 'stateless' \
                 THEN GREATEST(shared_until, l.expires_ms) ELSE shared_until END \
               FROM l WHERE broker_units.unit = l.unit) \
             SELECT expires_ms FROM l",
            now = now_ms(Engine::Postgres),
        );
        let mut conn = self.pool().acquire().await?;
        let expires: Option<i64> = sqlx::query_scalar(&sql)
            .bind(ttl_ms.max(1))
            .bind(lease_id)
            .bind(fence)
            .fetch_optional(&mut *conn)
            .await?;
        match expires {
            Some(expires) => Ok(Ok(expires)),
            None => Ok(Err(self.refusal(&mut conn, lease_id, fence).await?)),
        }
    }

    /// Ends lease `lease_id` (if `fence` is its own and it is live) with `outcome`, as
    /// [`end_lease`] does: what it held and how many bans were forgotten, or why not.
    pub(super) async fn release_in_one_statement(
        &self,
        lease_id: &str,
        fence: i64,
        outcome: &str,
        latency_ms: Option<i64>,
        success: bool,
    ) -> Result<Result<Released, Refusal>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        match end_lease(&mut conn, lease_id, fence, outcome, latency_ms, success).await? {
            Some(released) => Ok(Ok(released)),
            None => Ok(Err(self.refusal(&mut conn, lease_id, fence).await?)),
        }
    }

    /// Why a one-statement renew or release of `lease_id` changed nothing, read afterwards.
    pub(super) async fn refusal(
        &self,
        conn: &mut AnyConnection,
        lease_id: &str,
        fence: i64,
    ) -> Result<Refusal, StoreError> {
        let (now, lease) = self.read_lease(conn, lease_id).await?;
        Ok(match judge(lease, fence, now) {
            Err(refusal) => refusal,
            // Live and fenced right: only a renewal at its life's end changes nothing.
            Ok(_) => Refusal::LifeCap,
        })
    }
}

/// Ends lease `lease_id` (if `fence` is its own and it is live) with `outcome`; a `success`
/// also ends its exit's error streak and forgets the expired bans of its pair. What it held and
/// how many bans were forgotten, or `None` when it changed nothing.
///
/// Its commit does not wait for the WAL to reach the disk (`synchronous_commit = off` for this
/// transaction only): a release that a server crash loses leaves its unit held until the lease
/// expires, which costs a free unit for a while, never a second holder. Grants and renewals
/// wait: losing one of those would hand out a unit a worker still uses.
pub(super) async fn end_lease(
    conn: &mut AnyConnection,
    lease_id: &str,
    fence: i64,
    outcome: &str,
    latency_ms: Option<i64>,
    success: bool,
) -> Result<Option<Released>, StoreError> {
    let sql = format!(
        "WITH n AS (SELECT {now} AS ms), \
         l AS (UPDATE broker_leases SET state = 'released', outcome = $1, latency_ms = $2, \
           ended_ms = n.ms FROM n \
           WHERE lease_id = $3 AND fence = $4 AND state = 'live' AND expires_ms > n.ms \
           RETURNING unit, exit_name, class, origin, ended_ms), \
         s AS (UPDATE broker_units SET \
           exclusive_until = CASE WHEN l.class = 'stateless' THEN exclusive_until ELSE 0 END, \
           shared_count = CASE WHEN l.class = 'stateless' \
             THEN GREATEST(shared_count - 1, 0) ELSE shared_count END, \
           free_at = l.ended_ms FROM l WHERE broker_units.unit = l.unit), \
         e AS (UPDATE broker_exits SET error_streak = 0 FROM l \
           WHERE $5 AND broker_exits.exit_name = l.exit_name AND error_streak <> 0), \
         b AS (DELETE FROM broker_bans USING l WHERE $5 AND broker_bans.exit_name = l.exit_name \
           AND broker_bans.origin IN ('', COALESCE(l.origin, '')) \
           AND broker_bans.until_ms <= l.ended_ms RETURNING 1) \
         SELECT unit, exit_name, ended_ms, (SELECT COUNT(*) FROM b), \
         set_config('synchronous_commit', 'off', true) FROM l",
        now = now_ms(Engine::Postgres),
    );
    let row = sqlx::query(&sql)
        .bind(outcome)
        .bind(latency_ms)
        .bind(lease_id)
        .bind(fence)
        .bind(success)
        .fetch_optional(conn)
        .await?;
    Ok(row.map(|row| released(&row, 0)).transpose()?)
}

/// A plain release from a release statement's row: from column `first` on, the unit, the exit,
/// when it ended and how many bans it forgot.
pub(super) fn released(row: &AnyRow, first: usize) -> Result<Released, sqlx::Error> {
    let recovered: i64 = row.try_get(first + 3)?;
    Ok(Released {
        unit: row.try_get(first)?,
        exit_name: row.try_get(first + 1)?,
        banned_until_ms: None,
        recovered_bans: u64::try_from(recovered).unwrap_or(0),
        retired_session: None,
        now_ms: row.try_get(first + 2)?,
    })
}
