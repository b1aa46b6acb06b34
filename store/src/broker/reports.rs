//! The broker's exits as `GET /v1/exits` shows them, and the pruning of ended leases.

use exitvoice_lease::ExitReport;
use sqlx::Row as _;

use super::transaction::now_ms;
use super::BrokerTables;
use crate::handle::{Engine, StoreError};

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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Store;

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
