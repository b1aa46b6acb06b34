//! A Redis that forgets or goes back in time: after Redis loses the pool's state (a restart
//! without persistence, a failover to an empty replica), or may have lost its last writes (a
//! restart from an RDB snapshot or from an AOF that missed its last second, a failover to a
//! replica that had not received them), no grant may be made until every lease the lost writes
//! may have granted has run out, and no fence may repeat.
//!
//! Every script but `init` answers `FORGOTTEN` once the pool's `meta` hash is gone, and the
//! ones that grant or change the pool answer `OLDER` once `meta` was last written by another
//! server process than the one answering (its run id, which every restart and every failover
//! changes: common.lua). The instance that meets either locks the pool's epoch row in the
//! broker's SQL database (durable, shared by the instances) and asks Redis under the lock
//! whether the state is still lost. Then it takes the next epoch there, above Redis's own too
//! (committed before Redis hears of it, so an epoch is never used twice), and starts it in
//! Redis: `init` over a forgotten pool, writing the units it knows again; `rebase` over an
//! older one, keeping its state. Either holds grants for the longest time to live a holder can
//! have been told (`--max-ttl`, or the reserve's lease time if longer), from now: a lost
//! lease's holder was told an expiry no later than that, and learns of the loss at its next
//! renewal (`unknown_lease`). Fences carry the epoch in their high bits, so the new epoch's are
//! above every lost one's. Another instance meeting the loss meanwhile finds it mended, or an
//! epoch taken moments ago, which it waits for rather than take another. An instance that took
//! an epoch but could not start it (Redis went away again) cannot tell whether Redis heard it:
//! the epoch is spent, and marked so, so that the next instance takes another at once.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use exitvoice_lease::UnitSpec;
use exitvoice_store::{BrokerTables, Store};

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
    /// How long a new epoch grants nothing: the longest time to live a holder can have been
    /// told.
    pub hold: Duration,
}

/// What an instance needs to start a new epoch.
pub(super) struct Recovery {
    /// The broker's tables in `--database`, where the epochs are.
    pub(super) tables: BrokerTables,
    /// How long a new epoch holds its grants.
    pub(super) hold: Duration,
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
            tables: BrokerTables::new(epochs.store),
            hold: epochs.hold,
            pool: pool.to_owned(),
            known: Mutex::default(),
            turn: tokio::sync::Mutex::default(),
        }
    }

    /// Notes `units` as written (with `whole`, the whole pool).
    pub(super) fn note(&self, units: &[UnitSpec], whole: bool) {
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        if whole {
            known.clear();
        }
        known.extend(units.iter().map(|spec| (spec.unit.clone(), spec.clone())));
    }

    /// The units known, to write again.
    pub(super) fn known(&self) -> Vec<UnitSpec> {
        let known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        known.values().cloned().collect()
    }

    /// The hold of a new epoch, ms.
    pub(super) fn hold_ms(&self) -> i64 {
        i64::try_from(self.hold.as_millis()).unwrap_or(i64::MAX)
    }
}

/// How the pool's state was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lost {
    /// Gone: Redis has no state of the pool.
    Forgotten,
    /// Written by a server process that is gone: maybe older than it was.
    Older,
}

impl Lost {
    /// What happened, for the log.
    pub(super) fn what(self) -> &'static str {
        match self {
            Self::Forgotten => "Redis lost the broker pool's state",
            Self::Older => {
                "Redis restarted or failed over: the broker pool's state may be older than it was"
            }
        }
    }
}

/// Whether Redis answered that the pool's state is gone or may be older than it was.
pub(super) fn lost(error: &redis::RedisError) -> bool {
    matches!(error.code(), Some("FORGOTTEN" | "OLDER"))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use exitvoice_lease::{LeaseClass, Refusal};

    use super::*;
    use crate::lease_store::suite::{ask, unit};
    use crate::lease_store::LeaseStore;
    use crate::redis_leases::RedisLeases;

    const HOLD: Duration = Duration::from_millis(1500);
    const IDENTITY: Option<LeaseClass> = Some(LeaseClass::Identity);

    /// A broker instance's store of `pool` on `server`, its epochs in `store`.
    async fn instance(
        server: &exitvoice_redistest::Server,
        store: &Store,
        pool: &str,
    ) -> RedisLeases {
        let epochs = Epochs {
            store: store.clone(),
            hold: HOLD,
        };
        RedisLeases::connect(&server.url().parse().unwrap(), None, pool, epochs)
            .await
            .unwrap()
    }

    /// The epoch `pool` is in, as `store` keeps it.
    async fn epoch(store: Store, pool: &str) -> Option<i64> {
        let lock = BrokerTables::new(store)
            .broker_epoch_lock(pool)
            .await
            .unwrap();
        let epoch = lock.current();
        lock.release().await.unwrap();
        epoch
    }

    /// Two instances on one Redis, killed (`kill -9`) and started again empty: no grant before
    /// the hold has passed since the loss, one new epoch for both, fences above the lost ones,
    /// the lost leases unknown, and the units written again.
    #[tokio::test]
    async fn after_redis_forgets_grants_wait_for_the_lost_leases_and_fences_grow() {
        let server = exitvoice_redistest::private_server();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("epochs.db")).await.unwrap();
        let (one, two) = (
            instance(&server, &store, "forget").await,
            instance(&server, &store, "forget").await,
        );
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
        assert_eq!(
            epoch(store, "forget").await,
            Some(1),
            "one new epoch for both instances"
        );
    }

    /// Redis killed (`kill -9`) after a `SAVE` and more grants, and started again from that
    /// snapshot: the pool's state is there, older than it was. No grant before the hold has
    /// passed, one new epoch for both instances with fences above the lost ones, the lost
    /// lease unknown, the one the snapshot kept still its holder's.
    #[tokio::test]
    async fn after_redis_comes_back_older_grants_wait_and_fences_grow() {
        let server = exitvoice_redistest::private_server();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("epochs.db")).await.unwrap();
        let (one, two) = (
            instance(&server, &store, "older").await,
            instance(&server, &store, "older").await,
        );
        one.sync_units(&[unit("a", IDENTITY), unit("b", IDENTITY)], true)
            .await
            .unwrap();
        let kept = one
            .acquire(&ask("kept", LeaseClass::Anonymous, None))
            .await
            .unwrap()
            .unwrap();
        let client = redis::Client::open(server.url()).unwrap();
        let mut connection = client.get_multiplexed_async_connection().await.unwrap();
        redis::cmd("SAVE")
            .query_async::<()>(&mut connection)
            .await
            .unwrap();
        let lost = two
            .acquire(&ask("lost", LeaseClass::Anonymous, None))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((kept.fence, lost.fence), (1, 1), "one grant on each unit");
        let before = one.now_ms().await.unwrap();

        server.start_again();
        let started = Instant::now();
        let mut held = 0;
        let granted = loop {
            assert!(started.elapsed() < Duration::from_secs(30), "no grant");
            match two.acquire(&ask("next", LeaseClass::Anonymous, None)).await {
                Ok(Some(lease)) => break lease,
                Ok(None) => held += 1,
                // The clients reconnecting.
                Err(_) => {}
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(held > 0, "the hold refused grants");
        let hold_ms = i64::try_from(HOLD.as_millis()).unwrap();
        assert!(
            granted.now_ms >= before + hold_ms,
            "granted during the hold"
        );
        // The other instance's client finds the connection it had broken, once.
        let _ = one.now_ms().await;
        assert_eq!(granted.unit, lost.unit, "the unit the snapshot shows free");
        assert_eq!(
            granted.fence,
            (1 << 32) + 1,
            "epoch 1, the exit's first grant"
        );
        assert_eq!(
            one.renew("lost", lost.fence, 1000).await.unwrap(),
            Err(Refusal::Unknown),
            "the lost lease's holder learns at its renewal"
        );
        assert!(
            one.renew("kept", kept.fence, 60_000).await.unwrap().is_ok(),
            "the lease the snapshot kept is still its holder's"
        );
        assert_eq!(
            epoch(store, "older").await,
            Some(1),
            "one new epoch for both instances"
        );
    }
}
