//! The broker's transactions: the store's clock, and the lock every broker change takes (see
//! the module docs of [`broker`](super)).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use sqlx::{Any, AnyConnection, Transaction};
use tokio::sync::OwnedMutexGuard;

use super::BrokerTables;
use crate::handle::{Engine, StoreError};

/// The store's clock in milliseconds since the Unix epoch, as SQL.
pub(super) fn now_ms(engine: Engine) -> &'static str {
    match engine {
        Engine::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
        Engine::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
    }
}

/// The store's clock, read on `conn`.
pub(super) async fn clock(conn: &mut AnyConnection, engine: Engine) -> Result<i64, StoreError> {
    let sql = format!("SELECT {}", now_ms(engine));
    Ok(sqlx::query_scalar(&sql).fetch_one(conn).await?)
}

/// A broker transaction and, on SQLite, this process's turn at the file's write lock.
pub(super) struct Locked {
    tx: Transaction<'static, Any>,
    _turn: Option<OwnedMutexGuard<()>>,
}

impl Locked {
    pub(super) async fn commit(self) -> Result<(), StoreError> {
        Ok(self.tx.commit().await?)
    }

    pub(super) async fn rollback(self) -> Result<(), StoreError> {
        Ok(self.tx.rollback().await?)
    }
}

impl Deref for Locked {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        &self.tx
    }
}

impl DerefMut for Locked {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.tx
    }
}

impl BrokerTables {
    /// A transaction holding the lock broker changes need (see the module docs), on a
    /// connection to the lineage the broker confirmed ([`StoreError::LineageMoved`] if not).
    pub(super) async fn broker_transaction(&self) -> Result<Locked, StoreError> {
        let tx = self.broker_transaction_anywhere().await?;
        self.broker_lineage_check()?;
        Ok(tx)
    }

    /// Fails with [`StoreError::LineageMoved`] once a connection reached another history of
    /// the database than the broker's: checked after a grant's connection is taken, since
    /// that connection is the one a failover may have made new.
    pub(super) fn broker_lineage_check(&self) -> Result<(), StoreError> {
        if self.store.lineage.moved() {
            return Err(StoreError::LineageMoved);
        }
        Ok(())
    }

    /// A transaction holding the lock broker changes need, on whichever lineage.
    pub(super) async fn broker_transaction_anywhere(&self) -> Result<Locked, StoreError> {
        Ok(match self.engine() {
            Engine::Sqlite => {
                let turn = Arc::clone(&self.writer_turn).lock_owned().await;
                Locked {
                    tx: self.pool().begin_with("BEGIN IMMEDIATE").await?,
                    _turn: Some(turn),
                }
            }
            Engine::Postgres => Locked {
                tx: self.pool().begin().await?,
                _turn: None,
            },
        })
    }

    /// The store's clock, ms since the Unix epoch.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_now_ms(&self) -> Result<i64, StoreError> {
        let mut conn = self.pool().acquire().await?;
        clock(&mut conn, self.engine()).await
    }
}
