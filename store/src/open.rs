//! Opening a store: the pool's options for each engine, the migrations, and moving a database
//! written before the connection/request split forward (`legacy`). The layer above the tables.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::{Connection as _, Executor as _};

use crate::database::Database;
use crate::handle::{Store, StoreError};
use crate::legacy;
use crate::lineage::{self, Watch};

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
        Ok(Self::from_parts(pool, database.clone(), watch))
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
