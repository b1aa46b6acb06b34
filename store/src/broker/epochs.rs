//! The epochs of broker pools whose state lives elsewhere (Redis): a durable counter per pool,
//! advanced under a lock while the caller checks that the state really is gone, so that of
//! several instances finding it gone at once, one starts the new epoch and the others see it.

use sqlx::Row as _;

use super::transaction::{now_ms, Locked};
use super::BrokerTables;
use crate::handle::{Engine, StoreError};

/// A pool's epoch row, locked until [`EpochLock::advance`] or [`EpochLock::release`].
pub struct EpochLock {
    tx: Locked,
    pool: String,
    epoch: Option<i64>,
    /// How long ago the epoch was taken (ms, the database's clock).
    age_ms: Option<i64>,
    engine: Engine,
}

impl BrokerTables {
    /// Locks the epoch row of `pool` (made if missing) for the caller to decide on it.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_epoch_lock(&self, pool: &str) -> Result<EpochLock, StoreError> {
        let mut tx = self.broker_transaction().await?;
        sqlx::query("INSERT INTO broker_epochs (pool, epoch) VALUES ($1, NULL) ON CONFLICT (pool) DO NOTHING")
            .bind(pool)
            .execute(&mut *tx)
            .await?;
        let lock = match self.engine() {
            Engine::Sqlite => "",
            Engine::Postgres => " FOR UPDATE",
        };
        let row = sqlx::query(&format!(
            "SELECT epoch, {now} - reserved_ms FROM broker_epochs WHERE pool = $1{lock}",
            now = now_ms(self.engine())
        ))
        .bind(pool)
        .fetch_one(&mut *tx)
        .await?;
        Ok(EpochLock {
            epoch: row.try_get(0)?,
            age_ms: row.try_get(1)?,
            engine: self.engine(),
            tx,
            pool: pool.to_owned(),
        })
    }
}

impl BrokerTables {
    /// Marks epoch `epoch` of `pool` as spent: taken, but perhaps never started, so that no
    /// instance waits for it to start (it takes the next one). Nothing when another epoch was
    /// taken since.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_epoch_spent(&self, pool: &str, epoch: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE broker_epochs SET reserved_ms = 0 WHERE pool = $1 AND epoch = $2")
            .bind(pool)
            .bind(epoch)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}

impl EpochLock {
    /// The pool's epoch: `None` while its state was never written.
    pub fn current(&self) -> Option<i64> {
        self.epoch
    }

    /// How long ago the current epoch was taken, ms (`None` with no epoch).
    pub fn age_ms(&self) -> Option<i64> {
        self.age_ms
    }

    /// Takes the pool's next epoch (0 for its first) and unlocks: the new epoch.
    ///
    /// # Errors
    /// Database failures.
    pub async fn advance(self) -> Result<i64, StoreError> {
        self.advance_past(None).await
    }

    /// Takes the pool's next epoch, above `seen` too (an epoch the pool's state elsewhere
    /// carries: should this database have gone back in time, its own count may be behind),
    /// and unlocks: the new epoch.
    ///
    /// # Errors
    /// Database failures.
    pub async fn advance_past(mut self, seen: Option<i64>) -> Result<i64, StoreError> {
        let next = self.epoch.max(seen).map_or(0, |epoch| epoch + 1);
        let sql = format!(
            "UPDATE broker_epochs SET epoch = $1, reserved_ms = {now} WHERE pool = $2",
            now = now_ms(self.engine)
        );
        sqlx::query(&sql)
            .bind(next)
            .bind(&self.pool)
            .execute(&mut *self.tx)
            .await?;
        self.tx.commit().await?;
        Ok(next)
    }

    /// Unlocks without a change.
    ///
    /// # Errors
    /// Database failures.
    pub async fn release(self) -> Result<(), StoreError> {
        self.tx.commit().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Store;

    on_both_engines! {
        async fn epochs_start_at_zero_and_only_grow(store: Store) {
            let store = BrokerTables::new(store);
            let lock = store.broker_epoch_lock("p").await.unwrap();
            assert_eq!(lock.current(), None);
            assert_eq!(lock.advance().await.unwrap(), 0);
            let lock = store.broker_epoch_lock("p").await.unwrap();
            assert_eq!(lock.current(), Some(0));
            let age = lock.age_ms().unwrap();
            assert!((0..60_000).contains(&age), "taken just now: {age} ms ago");
            lock.release().await.unwrap();
            let lock = store.broker_epoch_lock("p").await.unwrap();
            assert_eq!(lock.advance().await.unwrap(), 1);
            let lock = store.broker_epoch_lock("p").await.unwrap();
            assert_eq!(lock.advance_past(Some(6)).await.unwrap(), 7, "past the epoch seen");
            let lock = store.broker_epoch_lock("p").await.unwrap();
            assert_eq!(lock.advance_past(Some(3)).await.unwrap(), 8, "past its own");
            store.broker_epoch_spent("p", 8).await.unwrap();
            let lock = store.broker_epoch_lock("p").await.unwrap();
            assert!(lock.age_ms().unwrap() > 1_000_000_000, "spent: taken long ago");
            lock.release().await.unwrap();
            let other = store.broker_epoch_lock("q").await.unwrap();
            assert_eq!(other.current(), None, "pools count apart");
            other.release().await.unwrap();
        }
    }
}
