//! The handle on a database: [`Store`], the [`Engine`] under it, and [`StoreError`]; every
//! table module adds its own `impl Store` on top.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Connection as _, Executor as _};

use crate::broker::{GrantQueue, ReleaseQueue};
use crate::database::Database;
use crate::legacy;
use crate::lineage::{self, Watch};

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

/// A handle on the database shared by the echo server and the auditor.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    /// Shared: the echo's handlers clone the store with their state on every request.
    database: Arc<Database>,
    /// SQLite has one write lock per file; this process's broker transactions queue for it
    /// here, in arrival order, rather than in SQLite's busy handler, which sleeps 1, 2, 5,
    /// 10… ms between tries and so turns a short wait into a long tail.
    pub(crate) writer_turn: Arc<tokio::sync::Mutex<()>>,
    /// PostgreSQL's plain broker releases, ended a batch per statement.
    pub(crate) release_queue: Arc<ReleaseQueue>,
    /// PostgreSQL's broker grants, a batch of alike acquires per statement.
    pub(crate) grant_queue: Arc<GrantQueue>,
    /// The database's history each new connection reaches, against the broker's.
    pub(crate) lineage: Arc<Watch>,
}

/// How long a pooled connection may sit idle before it is checked with a round trip when it is
/// next taken.
const PING_AFTER_IDLE: Duration = Duration::from_secs(30);

/// The pool's options for both engines: a connection is pinged before use only when it has been
/// idle for [`PING_AFTER_IDLE`], not every time it is taken (sqlx's default). A ping is a round
/// trip to the server (PostgreSQL) or to the connection's thread (SQLite), as much as a
/// broker's one-statement release costs; a connection that broke while busy fails its
/// statement, and the pool drops it.
fn pool_options() -> AnyPoolOptions {
    AnyPoolOptions::new()
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_AFTER_IDLE {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
}

impl Store {
    /// Opens (creating if needed) the SQLite database at `path`; see [`Store::connect`].
    ///
    /// # Errors
    /// Fails if the file cannot be opened or a migration fails.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        Self::connect(&Database::sqlite(path)).await
    }

    /// Opens `database` and runs its engine's migrations. A SQLite file is created if missing
    /// and put in WAL mode; a database written before the connection/request split is moved
    /// forward (see `legacy`).
    ///
    /// # Errors
    /// Fails if the database cannot be reached or a migration fails.
    pub async fn connect(database: &Database) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let watch = Arc::new(Watch::default());
        let pool = match database {
            Database::Sqlite(path) => {
                let watch = Arc::clone(&watch);
                let pool = pool_options()
                    .max_connections(4)
                    .after_connect(move |conn, _| {
                        let watch = Arc::clone(&watch);
                        Box::pin(async move {
                            // WAL lets readers (the API) run beside the writer; NORMAL syncs at
                            // checkpoints only, which WAL keeps consistent across a crash of
                            // the process (a crash of the host may take the last commits).
                            for pragma in
                                ["PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL"]
                            {
                                conn.execute(pragma).await?;
                            }
                            watch.saw(&lineage::read(conn, false).await?);
                            Ok(())
                        })
                    })
                    .connect(&sqlite_url(path))
                    .await?;
                sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
                legacy::move_observations(&pool).await?;
                pool
            }
            Database::Postgres(url) => {
                let watch = Arc::clone(&watch);
                let pool = pool_options()
                    .max_connections(8)
                    .after_connect(move |conn, _| {
                        let watch = Arc::clone(&watch);
                        Box::pin(async move {
                            watch.saw(&lineage::read(conn, true).await?);
                            Ok(())
                        })
                    })
                    .connect(url.expose())
                    .await?;
                sqlx::migrate!("./migrations/postgres").run(&pool).await?;
                pool
            }
        };
        Ok(Self {
            pool,
            database: Arc::new(database.clone()),
            writer_turn: Arc::default(),
            release_queue: Arc::default(),
            grant_queue: Arc::default(),
            lineage: watch,
        })
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

/// `sqlite://<path>?mode=rwc`, the path percent-encoded where a URL would misread it.
fn sqlite_url(path: &Path) -> String {
    let mut url = String::from("sqlite://");
    for c in path.to_string_lossy().chars() {
        match c {
            '%' => url.push_str("%25"),
            '?' => url.push_str("%3F"),
            '#' => url.push_str("%23"),
            c => url.push(c),
        }
    }
    url.push_str("?mode=rwc");
    url
}
