//! Renewals and releases of live leases, each judged by its fence and the store's clock.

use exitvoice_lease::{Effect, Refusal, Released};
use sqlx::{AnyConnection, Row as _};

use super::lease_row::{judge, LeaseRow};
use super::outcomes::apply;
use super::transaction::{clock, Locked};
use super::units::refresh_unit;
use super::BrokerTables;
use crate::handle::{Engine, StoreError};

impl BrokerTables {
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
    pub(super) async fn read_lease(
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
