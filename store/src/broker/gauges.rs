//! The broker's gauges as the store sees them.

use exitvoice_lease::Gauges;
use sqlx::Row as _;

use super::BrokerTables;
use crate::handle::StoreError;

impl BrokerTables {
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
