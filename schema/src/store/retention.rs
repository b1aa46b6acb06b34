//! Bounded disk: rows older than the retention are pruned, and the oldest rows go first while the
//! database is over its size cap. Each call deletes at most one small batch per table, so the
//! writer calling it between its inserts never stalls them for long.

use super::{Store, StoreError};

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
    /// Pages in use (`page_count - freelist_count`) times the page size: what the rows take.
    /// Pruned pages go to the free list and are reused, so this is what the size cap bounds.
    pub used_bytes: u64,
    /// The database file plus its write-ahead log, as on disk.
    pub file_bytes: u64,
}

impl Store {
    /// Deletes the oldest `batch` requests, then the oldest `batch` connections that no stored
    /// request refers to any more; with `before_unix_ms`, only rows older than that (retention),
    /// without, whatever is oldest (the size cap).
    ///
    /// # Errors
    /// Fails if a statement fails.
    pub async fn prune(
        &self,
        before_unix_ms: Option<i64>,
        batch: u32,
    ) -> Result<Pruned, StoreError> {
        let requests = sqlx::query(
            "DELETE FROM requests WHERE id IN (SELECT id FROM requests \
             WHERE ?1 IS NULL OR time_unix_ms < ?1 ORDER BY id LIMIT ?2)",
        )
        .bind(before_unix_ms)
        .bind(i64::from(batch))
        .execute(self.pool())
        .await?
        .rows_affected();
        let connections = sqlx::query(
            "DELETE FROM connections WHERE id IN (SELECT id FROM connections c \
             WHERE (?1 IS NULL OR time_unix_ms < ?1) AND NOT EXISTS \
             (SELECT 1 FROM requests r WHERE r.conn_id = c.conn_id) ORDER BY id LIMIT ?2)",
        )
        .bind(before_unix_ms)
        .bind(i64::from(batch))
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok(Pruned {
            requests,
            connections,
        })
    }

    /// The database's size now.
    ///
    /// # Errors
    /// Fails if the pragmas cannot be read.
    pub async fn size(&self) -> Result<DbSize, StoreError> {
        let pragma = |name: &'static str| async move {
            let value: i64 = sqlx::query_scalar(name).fetch_one(self.pool()).await?;
            Ok::<u64, StoreError>(u64::try_from(value).unwrap_or(0))
        };
        let page_size = pragma("PRAGMA page_size").await?;
        let pages = pragma("PRAGMA page_count").await?;
        let free = pragma("PRAGMA freelist_count").await?;
        let file = |path: &std::path::Path| std::fs::metadata(path).map_or(0, |m| m.len());
        let wal = {
            let mut name = self.path.clone().into_os_string();
            name.push("-wal");
            std::path::PathBuf::from(name)
        };
        Ok(DbSize {
            used_bytes: pages.saturating_sub(free) * page_size,
            file_bytes: file(&self.path) + file(&wal),
        })
    }
}
