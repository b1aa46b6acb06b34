//! Acquires: a free unit found through the index and checked under the lock, or a task's live
//! lease found again.

use exitvoice_lease::{Acquire, Granted, LeaseClass};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row as _};

use super::transaction::{clock, Locked};
use super::units::refresh_unit;
use super::BrokerTables;
use crate::handle::{Engine, StoreError};

impl BrokerTables {
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
        // A gap limit takes the parameter after the others; without one the statement has no
        // gap term. A NULL gap (never measured) fails the comparison: it meets no limit.
        let max_gap = request.max_gap_ms.map(i64::from);
        let gap_param = 4 + u8::from(cap.is_some()) + u8::from(request.country.is_some());
        let within_gap = match max_gap {
            None => String::new(),
            Some(_) => format!(" AND gap_ms <= ${gap_param}"),
        };
        let lock = match self.engine() {
            Engine::Sqlite => "",
            Engine::Postgres => " FOR UPDATE SKIP LOCKED",
        };
        let sql = format!(
            "SELECT unit, exit_name, gateway, life_ms FROM broker_units u \
             WHERE rank > 0 AND rank >= $1 AND {free}{per_origin}{in_country}{within_gap} \
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
        if let Some(max_gap) = max_gap {
            query = query.bind(max_gap);
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
pub(super) fn granted(row: &AnyRow, sticky: bool) -> Result<Granted, sqlx::Error> {
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
