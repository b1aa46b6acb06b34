//! The handle on a database: [`Store`], the [`Engine`] under it, and [`StoreError`]; every
//! table module adds its own `impl Store` on top.

use std::sync::Arc;

use sqlx::AnyPool;

use crate::database::Database;
use crate::lineage::Watch;

/// Errors from opening or using the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database could not be opened or a statement failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A migration failed to apply.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored JSON column could not be encoded or decoded.
    #[error("stored JSON is malformed: {0}")]
    Json(#[from] serde_json::Error),
    /// A stored row contradicts the schema.
    #[error("stored row is malformed: {0}")]
    Malformed(&'static str),
    /// A connection reached another history of the database than the one the broker granted
    /// on (see `lineage`): it may be older than it was.
    #[error("the database may have gone back in time (a failover, a restore or a crash)")]
    LineageMoved,
}

/// The engine a [`Store`] runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// A SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

impl Engine {
    /// The engine behind `conn`.
    pub(crate) fn of(conn: &sqlx::AnyConnection) -> Self {
        match conn.backend_name() {
            "PostgreSQL" => Self::Postgres,
            _ => Self::Sqlite,
        }
    }
}

/// A handle on the database shared by the echo server, the auditor and the broker.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    /// Shared: the echo's handlers clone the store with their state on every request.
    database: Arc<Database>,
    /// The database's history each new connection reaches, against the broker's.
    pub(crate) lineage: Arc<Watch>,
}

impl Store {
    /// A store on `pool`, opened (see `open`) on `database`, whose connections report the
    /// lineage they reach to `lineage`.
    pub(crate) fn from_parts(pool: AnyPool, database: Database, lineage: Arc<Watch>) -> Self {
        Self {
            pool,
            database: Arc::new(database),
            lineage,
        }
    }

    /// The connection pool, for the table modules and for tests that read rows directly.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The engine this store runs on.
    pub fn engine(&self) -> Engine {
        match *self.database {
            Database::Sqlite(_) => Engine::Sqlite,
            Database::Postgres(_) => Engine::Postgres,
        }
    }

    /// The database this store was opened on.
    pub fn database(&self) -> &Database {
        &self.database
    }

    /// Closes every connection of the pool (a SQLite file's WAL is checkpointed then).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}
