//! The SQLite store: one file, WAL, migrations embedded from `schema/migrations` and run at open.

mod legacy;
mod observations;
mod retention;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;

mod probes;

pub use observations::Batch;
pub use retention::{DbSize, Pruned};

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
}

/// A handle on the database shared by the echo server and the auditor.
#[derive(Clone, Debug)]
pub struct Store {
    pool: SqlitePool,
    path: std::path::PathBuf,
}

impl Store {
    /// Opens (creating if needed) the SQLite database at `path` in WAL mode and runs migrations.
    ///
    /// # Errors
    /// Fails if the file cannot be opened or a migration fails.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        legacy::move_observations(&pool).await?;
        Ok(Self {
            pool,
            path: path.to_owned(),
        })
    }

    /// The connection pool, for the table modules.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}
