//! The broker's units: written from the pool and its labels, and their index columns kept up
//! to date with their live leases.

use exitvoice_lease::UnitSpec;
use sqlx::AnyConnection;

use super::transaction::now_ms;
use super::BrokerTables;
use crate::handle::StoreError;

impl BrokerTables {
    /// Writes `units`: new ones are added, known ones get their label's class, capacity, life
    /// cap, country and gap; when `whole` is set, `units` is the whole pool and units not in it
    /// drain (a refresh passes only what changed). The live leases of a unit whose label no
    /// longer admits their class are revoked; a draining unit's run out. How many were revoked.
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
                 country, gap_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                 ON CONFLICT (unit) DO UPDATE SET \
                 exit_name = excluded.exit_name, rank = excluded.rank, \
                 capacity = excluded.capacity, gateway = excluded.gateway, \
                 life_ms = excluded.life_ms, country = excluded.country, \
                 gap_ms = excluded.gap_ms",
            )
            .bind(&spec.unit)
            .bind(&spec.exit_name)
            .bind(rank)
            .bind(i64::from(spec.capacity))
            .bind(i64::from(spec.gateway))
            .bind(spec.life_ms)
            .bind(spec.country.as_deref().unwrap_or(""))
            .bind(spec.gap_ms.map(i64::from))
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
}

/// Brings `unit`'s index columns up to date with its live leases at `now`.
pub(super) async fn refresh_unit(
    conn: &mut AnyConnection,
    unit: &str,
    now: i64,
) -> Result<(), StoreError> {
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
