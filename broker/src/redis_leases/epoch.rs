//! A Redis that forgets: after Redis loses the pool's state (a restart without persistence, a
//! failover to an empty replica), no grant may be made until every lease of the lost state has
//! run out, and no fence may go backwards.
//!
//! Every script but `init` answers `FORGOTTEN` once the pool's `meta` hash is gone. The instance
//! that meets it locks the pool's epoch row in the broker's SQL database (durable, shared by
//! the instances) and checks under the lock that the state is still gone. Then it takes the
//! next epoch there (committed before Redis hears of it, so an epoch is never used twice),
//! starts it in Redis (`init`: only if no other instance has; with a hold of `--max-life`, the
//! longest life any lost lease had left, unless no epoch was ever taken) and writes the units it
//! knows again. Fences carry the epoch in their high bits, so the new epoch's are above the lost
//! one's. Another instance meeting `FORGOTTEN` meanwhile finds the state there, or an epoch
//! taken moments ago, which it waits for rather than take another.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use exitvoice_store::{Store, UnitSpec};

/// An epoch younger than this whose state is missing from Redis is being started by the
/// instance that took it (its `init` follows within a round trip, or fails within the client's
/// timeouts): others wait for it instead of taking another.
pub(super) const STARTING: Duration = Duration::from_secs(5);
/// How often a waiting instance looks again.
pub(super) const STARTING_POLL: Duration = Duration::from_millis(100);

/// Where the epochs live, and how long a new one holds its grants.
pub struct Epochs {
    /// The broker's SQL database (`--database`).
    pub store: Store,
    /// The longest life of a lease (`--max-life`).
    pub hold: Duration,
}

/// What an instance needs to start a new epoch.
pub(super) struct Recovery {
    pub(super) epochs: Epochs,
    /// The pool's name: its epoch row.
    pub(super) pool: String,
    /// The units this instance was told of, written again into a new epoch.
    pub(super) known: Mutex<HashMap<String, UnitSpec>>,
    /// One recovery at a time per instance.
    pub(super) turn: tokio::sync::Mutex<()>,
}

impl Recovery {
    pub(super) fn new(epochs: Epochs, pool: &str) -> Self {
        Self {
            epochs,
            pool: pool.to_owned(),
            known: Mutex::default(),
            turn: tokio::sync::Mutex::default(),
        }
    }

    /// Notes `units` as written (with `whole`, the whole pool).
    pub(super) fn note(&self, units: &[UnitSpec], whole: bool) {
        let mut known = self
            .known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if whole {
            known.clear();
        }
        known.extend(units.iter().map(|spec| (spec.unit.clone(), spec.clone())));
    }

    /// The units known, to write again.
    pub(super) fn known(&self) -> Vec<UnitSpec> {
        let known = self
            .known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        known.values().cloned().collect()
    }

    /// The hold of a new epoch, ms.
    pub(super) fn hold_ms(&self) -> i64 {
        i64::try_from(self.epochs.hold.as_millis()).unwrap_or(i64::MAX)
    }
}

/// Whether Redis answered that the pool's state is gone.
pub(super) fn forgotten(error: &redis::RedisError) -> bool {
    error.code() == Some("FORGOTTEN")
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use exitvoice_store::{LeaseClass, Refusal};

    use super::*;
    use crate::lease_store::suite::{ask, unit};
    use crate::lease_store::LeaseStore;
    use crate::redis_leases::RedisLeases;

    const HOLD: Duration = Duration::from_millis(1500);
    const IDENTITY: Option<LeaseClass> = Some(LeaseClass::Identity);

    /// Two instances on one Redis, killed (`kill -9`) and started again empty: no grant before
    /// the hold has passed since the loss, one new epoch for both, fences above the lost ones,
    /// the lost leases unknown, and the units written again.
    #[tokio::test]
    async fn after_redis_forgets_grants_wait_for_the_lost_leases_and_fences_grow() {
        let server = exitvoice_redistest::private_server();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("epochs.db")).await.unwrap();
        let url = server.url().parse().unwrap();
        let connect = || {
            let epochs = Epochs {
                store: store.clone(),
                hold: HOLD,
            };
            RedisLeases::connect(&url, None, "forget", epochs)
        };
        let (one, two) = (connect().await.unwrap(), connect().await.unwrap());
        for instance in [&one, &two] {
            instance
                .sync_units(&[unit("a", IDENTITY), unit("b", IDENTITY)], true)
                .await
                .unwrap();
        }
        let first = one
            .acquire(&ask("l1", LeaseClass::Anonymous, None))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.fence, 1);
        let before = one.now_ms().await.unwrap();

        server.restart_empty();
        let started = Instant::now();
        let mut held = 0;
        let mut granted = Vec::new();
        for n in 0.. {
            assert!(started.elapsed() < Duration::from_secs(30), "no grant");
            let instance = if n % 2 == 0 { &one } else { &two };
            match instance
                .acquire(&ask(&format!("n{n}"), LeaseClass::Anonymous, None))
                .await
            {
                Ok(Some(lease)) => granted.push(lease),
                Ok(None) => held += 1,
                // The clients reconnecting.
                Err(_) => {}
            }
            if granted.len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(held > 0, "the hold refused grants");
        let hold_ms = i64::try_from(HOLD.as_millis()).unwrap();
        for lease in &granted {
            // The loss came after `before`: so did the new epoch, and its hold.
            assert!(lease.now_ms >= before + hold_ms, "granted during the hold");
            assert!(lease.fence > first.fence, "a fence went backwards");
            assert_eq!(
                lease.fence,
                (1 << 32) + 1,
                "epoch 1, each exit's first grant"
            );
        }
        let mut units: Vec<&str> = granted.iter().map(|lease| lease.unit.as_str()).collect();
        units.sort_unstable();
        assert_eq!(units, ["a", "b"], "the units were written again");
        assert_eq!(
            two.renew("l1", first.fence, 1000).await.unwrap(),
            Err(Refusal::Unknown)
        );
        let lock = store.broker_epoch_lock("forget").await.unwrap();
        assert_eq!(lock.current(), Some(1), "one new epoch for both instances");
        lock.release().await.unwrap();
    }
}
