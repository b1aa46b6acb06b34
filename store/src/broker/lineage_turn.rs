//! The broker's turn at a new lineage of its database (see the store's `lineage` module): when
//! the history a connection reaches is not the one the broker last granted on, the database
//! may be older than what it acknowledged. Under the lineage row's lock, the first instance to
//! see it moves every exit's fence past any fence the lost history can have issued and starts
//! a hold; the others, and instances started later, find the row mended and read the hold.
//!
//! Fences are per-exit counts. A lost history can have issued any count above the one kept,
//! so the new floor comes from the clock: the database's time in microseconds, which no count
//! reaches (an exit granted a million times a second for as long as it has existed), and
//! which every later move exceeds, since time goes on (with the hold between two moves). It
//! stays below 2^53, exact in a JavaScript client's numbers, until the year 2255.

use sqlx::Row as _;

use super::transaction::now_ms;
use super::BrokerTables;
use crate::handle::{Engine, StoreError};
use crate::lineage;

/// What [`BrokerTables::broker_confirm_lineage`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Confirmed {
    /// Whether this call found the database on another history than the one last granted on,
    /// and moved the fences and started the hold.
    pub moved: bool,
    /// No grant before this time (the database's clock, ms).
    pub hold_until_ms: i64,
    /// The database's clock when it was read, ms.
    pub now_ms: i64,
}

impl BrokerTables {
    /// Takes the history this connection reaches as the broker's, first moving every fence
    /// past the old history's and holding grants for `hold_ms` when it is another one.
    ///
    /// # Errors
    /// Database failures.
    pub async fn broker_confirm_lineage(&self, hold_ms: i64) -> Result<Confirmed, StoreError> {
        let engine = self.engine();
        let mut tx = self.broker_transaction_anywhere().await?;
        let live = lineage::read(&mut tx, engine == Engine::Postgres).await?;
        sqlx::query(
            "INSERT INTO broker_lineage (id, lineage, hold_until_ms) VALUES (0, $1, 0) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(&live)
        .execute(&mut *tx)
        .await?;
        let lock = match engine {
            Engine::Sqlite => "",
            Engine::Postgres => " FOR UPDATE",
        };
        let row = sqlx::query(&format!(
            "SELECT lineage, hold_until_ms, {now} FROM broker_lineage WHERE id = 0{lock}",
            now = now_ms(engine)
        ))
        .fetch_one(&mut *tx)
        .await?;
        let (known, mut hold_until_ms, now_ms): (String, i64, i64) =
            (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
        let moved = known != live;
        if moved {
            let larger = match engine {
                Engine::Sqlite => "MAX",
                Engine::Postgres => "GREATEST",
            };
            sqlx::query(&format!(
                "UPDATE broker_exits SET fence = {larger}(fence, $1)"
            ))
            .bind(now_ms.saturating_mul(1000))
            .execute(&mut *tx)
            .await?;
            hold_until_ms = now_ms.saturating_add(hold_ms);
            sqlx::query("UPDATE broker_lineage SET lineage = $1, hold_until_ms = $2 WHERE id = 0")
                .bind(&live)
                .bind(hold_until_ms)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.store.lineage.confirm(live);
        Ok(Confirmed {
            moved,
            hold_until_ms,
            now_ms,
        })
    }
}

impl BrokerTables {
    /// The settings that decide what a crash or a failover of the database loses (see
    /// `lineage::durability`), by name.
    ///
    /// # Errors
    /// Database failures.
    pub async fn durability_settings(&self) -> Result<Vec<(String, String)>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(lineage::durability(&mut conn, self.engine() == Engine::Postgres).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Store;

    on_both_engines! {
        async fn another_lineage_moves_every_fence_past_the_clock_and_holds(store: Store) {
            let store = BrokerTables::new(store);
            let first = store.broker_confirm_lineage(5_000).await.unwrap();
            assert!(!first.moved, "a first lineage is taken as it is");
            assert_eq!(first.hold_until_ms, 0);
            store.broker_lineage_check().unwrap();
            sqlx::query("INSERT INTO broker_exits (exit_name, fence) VALUES ('x', 7)")
                .execute(store.pool())
                .await
                .unwrap();
            // Another history, as a promoted standby's row would read.
            sqlx::query("UPDATE broker_lineage SET lineage = 'another' WHERE id = 0")
                .execute(store.pool())
                .await
                .unwrap();
            let again = store.broker_confirm_lineage(5_000).await.unwrap();
            assert!(again.moved);
            assert_eq!(again.hold_until_ms, again.now_ms + 5_000);
            let fence: i64 = sqlx::query_scalar("SELECT fence FROM broker_exits WHERE exit_name = 'x'")
                .fetch_one(store.pool())
                .await
                .unwrap();
            assert_eq!(fence, again.now_ms * 1000, "past any count, by the clock");
            let third = store.broker_confirm_lineage(5_000).await.unwrap();
            assert!(!third.moved, "mended once");
            assert_eq!(third.hold_until_ms, again.hold_until_ms, "the hold is read back");
        }

        async fn the_durability_settings_are_read(store: Store) {
            let store = BrokerTables::new(store);
            let settings = store.durability_settings().await.unwrap();
            let names: Vec<&str> = settings.iter().map(|(name, _)| name.as_str()).collect();
            match store.engine() {
                // The throwaway cluster's own flags (exitvoice-pgtest), as the server says.
                Engine::Postgres => {
                    assert_eq!(names, ["fsync", "standbys", "synchronous_commit", "synchronous_standby_names"]);
                    assert!(settings.contains(&("fsync".to_owned(), "off".to_owned())), "{settings:?}");
                }
                Engine::Sqlite => {
                    assert_eq!(settings, [("journal_mode".to_owned(), "wal".to_owned()), ("synchronous".to_owned(), "1".to_owned())]);
                }
            }
        }
    }
}
