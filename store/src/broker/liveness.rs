//! What a forward proxy asks of the broker's tables to keep no tunnel beyond its lease: which
//! leases are still live, and a task's live lease. Reads only, by primary key or the task's
//! index.

use std::collections::HashSet;

use sqlx::Row as _;

use super::transaction::now_ms;
use super::BrokerTables;
use crate::handle::StoreError;

/// Leases one statement asks about at most (bound parameters stay far below every engine's
/// limit).
const CHUNK: usize = 400;

impl BrokerTables {
    /// Which of `leases` (id, fence) are live at the store's now: not ended, not expired, and
    /// still carrying that fence. In order.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_live(&self, leases: &[(String, i64)]) -> Result<Vec<bool>, StoreError> {
        let mut live = HashSet::new();
        for chunk in leases.chunks(CHUNK) {
            let list = (1..=chunk.len())
                .map(|i| format!("${i}"))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "SELECT lease_id, fence FROM broker_leases WHERE lease_id IN ({list}) \
                 AND state = 'live' AND expires_ms > (SELECT {now})",
                now = now_ms(self.engine())
            );
            let mut query = sqlx::query(&sql);
            for (id, _) in chunk {
                query = query.bind(id);
            }
            for row in query.fetch_all(self.pool()).await? {
                let id: String = row.try_get(0)?;
                let fence: i64 = row.try_get(1)?;
                live.insert((id, fence));
            }
        }
        Ok(leases.iter().map(|lease| live.contains(lease)).collect())
    }

    /// The live lease (id, fence) of `task`, of any class, newest first.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_task_lease(&self, task: &str) -> Result<Option<(String, i64)>, StoreError> {
        let sql = format!(
            "SELECT lease_id, fence FROM broker_leases WHERE task = $1 AND state = 'live' \
             AND expires_ms > (SELECT {now}) ORDER BY granted_ms DESC LIMIT 1",
            now = now_ms(self.engine())
        );
        let row = sqlx::query(&sql)
            .bind(task)
            .fetch_optional(self.pool())
            .await?;
        row.map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .transpose()
    }
}
