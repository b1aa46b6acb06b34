//! The connection a batching task works on: taken from the pool for a run of batches and given
//! back when the queue runs dry.
//!
//! sqlx's pool hands out its idle connections oldest first, so statements taken from it one at
//! a time go round every PostgreSQL backend it holds; a batching task that keeps one connection
//! while batches follow one another keeps its statements in one backend, whose caches they
//! found warm.

use sqlx::any::Any;
use sqlx::pool::PoolConnection;
use sqlx::{AnyConnection, AnyPool};

use crate::handle::StoreError;

pub(super) struct BatchConnection {
    pool: AnyPool,
    held: Option<PoolConnection<Any>>,
}

impl BatchConnection {
    pub(super) fn new(pool: AnyPool) -> Self {
        Self { pool, held: None }
    }

    /// The connection, taken from the pool if none is held.
    pub(super) async fn get(&mut self) -> Result<&mut AnyConnection, StoreError> {
        if self.held.is_none() {
            self.held = Some(self.pool.acquire().await?);
        }
        Ok(self.held.as_deref_mut().expect("held just above"))
    }

    /// Gives the connection back to the pool: when the queue is empty, or after a failure
    /// (which may have left it broken; the pool checks it when it is next taken).
    pub(super) fn give_back(&mut self) {
        self.held = None;
    }
}
