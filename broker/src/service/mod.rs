//! The broker: leases from the store, the pool and its labels, waiting acquires, outcomes.
//!
//! Each file imports only files below it, in this order (bottom first): the settings, requests,
//! answers and errors (`types`); the wait queues (`queue`); the units a refresh writes
//! (`sync`); the [`Broker`] itself (here); and its parts, each an `impl Broker` of its own:
//! refreshes of labels and units (`refresh`), the store out of reach (`outage`), acquires
//! (`acquire`), renewals and releases (`renew_release`).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use exitvoice_exits::Exit;
use exitvoice_lease::Granted;
use exitvoice_store::Store;
use tokio::sync::Notify;

use crate::lease_store::LeaseStore;
use crate::metrics::Metrics;
use crate::pool::{Labels, Pool};
use crate::reserve::Reserve;
use queue::{Queue, QueueKey};
use sync::Synced;

mod acquire;
mod outage;
mod queue;
mod refresh;
mod renew_release;
mod sync;
mod types;

pub use types::{BrokerConfig, BrokerError, EgressSeen, Ended, Lease, LeaseRequest};

/// One broker instance over a lease store `S`; labels come from the SQL store.
pub struct Broker<S> {
    leases: S,
    labels: Store,
    pool: RwLock<Arc<Pool>>,
    config: BrokerConfig,
    /// One queue per class, country and gap limit asked for (those no request holds are
    /// dropped past [`queue::MOST_IDLE_QUEUES`]).
    queues: std::sync::Mutex<HashMap<QueueKey, Arc<Queue>>>,
    released: Notify,
    metrics: Metrics,
    /// One refresh at a time (the timer's and a SIGHUP's): each writes what changed since
    /// the last.
    refreshing: tokio::sync::Mutex<()>,
    /// The units as this instance last wrote them, and what from; `None` before its first
    /// refresh. Locked only to read or swap it, never across a store call: a grant in an
    /// outage reads it.
    synced: std::sync::Mutex<Option<Synced>>,
    /// What the pool reads of the labels snapshot last read, with its id.
    snapshot: tokio::sync::Mutex<Option<(i64, Arc<Labels>)>>,
    reserve: Reserve,
}

impl<S: LeaseStore> Broker<S> {
    /// A broker leasing `pool` through `leases`, judged by `labels`' snapshots.
    pub fn new(leases: S, labels: Store, pool: Pool, config: BrokerConfig) -> Self {
        let metrics = Metrics::new(&config.instance);
        let reserve = Reserve::new(config.reserve, config.reserve_ttl);
        Self {
            leases,
            labels,
            pool: RwLock::new(Arc::new(pool)),
            config,
            queues: std::sync::Mutex::default(),
            released: Notify::new(),
            metrics,
            refreshing: tokio::sync::Mutex::new(()),
            synced: std::sync::Mutex::new(None),
            snapshot: tokio::sync::Mutex::new(None),
            reserve,
        }
    }

    /// The settings.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The lease store.
    pub fn leases(&self) -> &S {
        &self.leases
    }

    /// The exit a granted lease goes out through: its unit's, carrying the lease's gateway
    /// session id. `None` for a unit no exits file names.
    pub fn exit_of(&self, granted: &Granted) -> Option<Exit> {
        let mut exit = self.pool().exit(&granted.unit)?.clone();
        if let (Some(session), Some(id)) = (exit.session.as_mut(), &granted.session) {
            session.id.clone_from(id);
        }
        Some(exit)
    }

    fn pool(&self) -> Arc<Pool> {
        self.pool.read().map_or_else(
            |poisoned| poisoned.into_inner().clone(),
            |pool| pool.clone(),
        )
    }

    fn ttl(&self, ttl_ms: Option<u64>) -> Result<Duration, BrokerError> {
        match ttl_ms {
            None => Ok(self.config.default_ttl),
            Some(0) => Err(BrokerError::BadRequest(
                "ttl_ms must be positive".to_owned(),
            )),
            Some(ms) if Duration::from_millis(ms) > self.config.max_ttl => {
                Err(BrokerError::BadRequest(format!(
                    "ttl_ms is at most {}",
                    self.config.max_ttl.as_millis()
                )))
            }
            Some(ms) => Ok(Duration::from_millis(ms)),
        }
    }
}

/// Milliseconds of `duration`, saturating.
fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
