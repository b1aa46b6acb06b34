//! The egress addresses that checks saw through leases.

use exitvoice_lease::EgressRecord;

use super::transaction::clock;
use super::BrokerTables;
use crate::handle::{Engine, StoreError};

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
