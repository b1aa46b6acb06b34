//! Bounded disk: rows older than the retention are pruned, and the oldest rows go first while the
//! database is over its size cap. Each call deletes at most one small batch per table, so the
//! writer calling it between its inserts never stalls them for long.

use std::path::Path;

use sqlx::any::{Any, AnyArguments};
use sqlx::query::Query;

use crate::handle::{Engine, Store, StoreError};

/// What one pruning pass removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Request rows deleted.
    pub requests: u64,
    /// Connection rows deleted.
    pub connections: u64,
}

impl Pruned {
    /// Rows deleted in all.
    pub fn rows(self) -> u64 {
        self.requests + self.connections
    }
}

/// How much room the database takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DbSize {
    /// SQLite: pages in use (`page_count - freelist_count`) times the page size, what the rows
    /// take. Pruned pages go to the free list and are reused, so this is what the size cap
    /// bounds. PostgreSQL: the tables with their indexes and TOAST, as allocated.
    pub used_bytes: u64,
    /// SQLite: the database file plus its write-ahead log, as on disk. PostgreSQL: the whole
    /// database (`pg_database_size`).
    pub file_bytes: u64,
}

impl Store {
    /// Deletes the oldest `batch` requests, then the oldest `batch` connections that no stored
    /// request refers to any more, of TCP's tables and of QUIC's; with `before_unix_ms`, only rows older than that (retention),
    /// without, whatever is oldest (the size cap).
    ///
    /// # Errors
    /// Fails if a statement fails.
    pub async fn prune(
        &self,
        before_unix_ms: Option<i64>,
        batch: u32,
    ) -> Result<Pruned, StoreError> {
        let mut requests = 0;
        let mut connections = 0;
        // Each pair's requests first: a connection goes once no request refers to it.
        for tables in TABLES {
            let [requests_sql, connections_sql] =
                prune_statements(tables, before_unix_ms.is_some());
            requests += with_bounds(&requests_sql, batch, before_unix_ms)
                .execute(self.pool())
                .await?
                .rows_affected();
            connections += with_bounds(&connections_sql, batch, before_unix_ms)
                .execute(self.pool())
                .await?
                .rows_affected();
        }
        // Ledger identities unchanged since the cut; the size cap leaves them (one row per
        // client, rewritten in place).
        if before_unix_ms.is_some() {
            with_bounds(
                "DELETE FROM ledger_identities WHERE (client_ip, tls_voice_id) IN \
                 (SELECT client_ip, tls_voice_id FROM ledger_identities \
                 WHERE updated_unix_ms < $2 ORDER BY updated_unix_ms LIMIT $1)",
                batch,
                before_unix_ms,
            )
            .execute(self.pool())
            .await?;
        }
        Ok(Pruned {
            requests,
            connections,
        })
    }

    /// The database's size now.
    ///
    /// # Errors
    /// Fails if the sizes cannot be read.
    pub async fn size(&self) -> Result<DbSize, StoreError> {
        let read = |sql: &'static str| async move {
            let value: i64 = sqlx::query_scalar(sql).fetch_one(self.pool()).await?;
            Ok::<u64, StoreError>(u64::try_from(value).unwrap_or(0))
        };
        match self.engine() {
            Engine::Sqlite => {
                let page_size = read("PRAGMA page_size").await?;
                let pages = read("PRAGMA page_count").await?;
                let free = read("PRAGMA freelist_count").await?;
                let path = self.database().sqlite_path().unwrap_or(Path::new(""));
                let file = |path: &Path| std::fs::metadata(path).map_or(0, |m| m.len());
                let mut wal = path.as_os_str().to_owned();
                wal.push("-wal");
                Ok(DbSize {
                    used_bytes: pages.saturating_sub(free) * page_size,
                    file_bytes: file(path) + file(Path::new(&wal)),
                })
            }
            Engine::Postgres => Ok(DbSize {
                used_bytes: read(
                    "SELECT CAST(pg_total_relation_size('connections') + \
                     pg_total_relation_size('requests') + pg_total_relation_size('probes') + \
                     pg_total_relation_size('label_snapshots') + \
                     pg_total_relation_size('exit_labels') AS BIGINT)",
                )
                .await?,
                file_bytes: read("SELECT pg_database_size(current_database())").await?,
            }),
        }
    }
}

/// The pruned tables, `(requests, their connections)`: TCP's, then QUIC's (docs/quic.md).
const TABLES: [(&str, &str); 2] = [
    ("requests", "connections"),
    ("quic_requests", "quic_connections"),
];

/// The two DELETEs of one pass over `(requests table, connections table)`: with `retention`,
/// rows older than `$2`; else the oldest. Rows go oldest first, found through the time index
/// (`ORDER BY time_unix_ms`): ordered by id, SQLite scanned the whole table for rows older than
/// the cutoff every second, and found none most of the time.
fn prune_statements((requests, connections): (&str, &str), retention: bool) -> [String; 2] {
    let older = if retention {
        "time_unix_ms < $2"
    } else {
        "TRUE"
    };
    [
        format!(
            "DELETE FROM {requests} WHERE id IN (SELECT id FROM {requests} \
             WHERE {older} ORDER BY time_unix_ms LIMIT $1)"
        ),
        format!(
            "DELETE FROM {connections} WHERE id IN (SELECT id FROM {connections} c \
             WHERE {older} AND NOT EXISTS \
             (SELECT 1 FROM {requests} r WHERE r.conn_id = c.conn_id) \
             ORDER BY time_unix_ms LIMIT $1)"
        ),
    ]
}

/// `sql` with its batch size (`$1`) and, when pruning by age, its cutoff (`$2`) bound.
fn with_bounds(
    sql: &str,
    batch: u32,
    before_unix_ms: Option<i64>,
) -> Query<'_, Any, AnyArguments<'_>> {
    let query = sqlx::query(sql).bind(i64::from(batch));
    match before_unix_ms {
        Some(before) => query.bind(before),
        None => query,
    }
}

#[cfg(test)]
mod tests {
    use sqlx::Row as _;

    use super::*;

    /// Every second the writer prunes by age: on SQLite that must read the time index from its
    /// start, never scan a table (which made each pass cost the whole table's size).
    #[tokio::test]
    async fn pruning_by_age_reads_the_time_index_and_scans_no_table() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("plan.db"))
            .await
            .expect("open");
        for tables in TABLES {
            for sql in prune_statements(tables, true) {
                let plan = with_bounds(&format!("EXPLAIN QUERY PLAN {sql}"), 1000, Some(0))
                    .fetch_all(store.pool())
                    .await
                    .expect("plan");
                let steps: Vec<String> = plan
                    .iter()
                    .map(|row| row.try_get::<String, _>(3).expect("detail"))
                    .collect();
                assert!(
                    steps.iter().any(|step| step.contains("_time")),
                    "{sql}: {steps:?}"
                );
                assert!(
                    steps
                        .iter()
                        .all(|step| !step.starts_with("SCAN") || step.contains("INDEX")),
                    "{sql}: {steps:?}"
                );
            }
        }
    }
}
