//! Bounded disk: rows older than the retention are pruned, and the oldest rows go first while the
//! database is over its size cap. Each call deletes at most one small batch per table, so the
//! writer calling it between its inserts never stalls them for long.

use std::path::Path;

use sqlx::any::{Any, AnyArguments};
use sqlx::query::Query;

use crate::{Engine, Store, StoreError};

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
        let older = if before_unix_ms.is_some() {
            "time_unix_ms < $2"
        } else {
            "TRUE"
        };
        let mut requests = 0;
        let mut connections = 0;
        // TCP's tables, then QUIC's (docs/quic.md), each requests first.
        for (requests_table, connections_table) in [
            ("requests", "connections"),
            ("quic_requests", "quic_connections"),
        ] {
            let requests_sql = format!(
                "DELETE FROM {requests_table} WHERE id IN (SELECT id FROM {requests_table} \
                 WHERE {older} ORDER BY id LIMIT $1)"
            );
            let connections_sql = format!(
                "DELETE FROM {connections_table} WHERE id IN (SELECT id FROM {connections_table} c \
                 WHERE {older} AND NOT EXISTS \
                 (SELECT 1 FROM {requests_table} r WHERE r.conn_id = c.conn_id) ORDER BY id LIMIT $1)"
            );
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
                     pg_total_relation_size('label_snapshots') AS BIGINT)",
                )
                .await?,
                file_bytes: read("SELECT pg_database_size(current_database())").await?,
            }),
        }
    }
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
