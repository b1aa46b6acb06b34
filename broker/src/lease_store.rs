//! The one interface the broker keeps its state behind. Everything in it is atomic in the store
//! and timed by the store's clock; nothing in it is SQL, so another store (Redis) can fill it.
//! [`crate::sql_leases::SqlLeases`] fills it on SQLite and PostgreSQL.

use std::future::Future;

use crate::durability::Durability;

use exitvoice_lease::{
    Acquire, Effect, EgressRecord, ExitReport, Gauges, Granted, Refusal, Released, UnitSpec,
};

/// A failure of the store itself (not a refused request): counted, answered `503`.
#[derive(Debug, thiserror::Error)]
#[error("lease store: {0}")]
pub struct StoreFailure(#[source] Box<dyn std::error::Error + Send + Sync>);

impl StoreFailure {
    /// A failure of the store's own kind.
    pub(crate) fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Box::new(error))
    }

    /// A failure told in words (the store answered something it should not have).
    pub(crate) fn message(text: String) -> Self {
        Self(text.into())
    }
}

impl From<exitvoice_store::StoreError> for StoreFailure {
    fn from(error: exitvoice_store::StoreError) -> Self {
        Self(Box::new(error))
    }
}

/// The broker's state: units, leases with fences, bans, retired sessions.
pub trait LeaseStore: Clone + Send + Sync + 'static {
    /// The store's clock, ms since the Unix epoch.
    fn now_ms(&self) -> impl Future<Output = Result<i64, StoreFailure>> + Send;
    /// Writes `units` (labels refreshed; with `whole`, the whole pool: others admit nothing);
    /// revokes the live leases a unit no longer admits. How many were revoked.
    fn sync_units(
        &self,
        units: &[UnitSpec],
        whole: bool,
    ) -> impl Future<Output = Result<u64, StoreFailure>> + Send;
    /// Grants a lease on a free unit, or a task's live one; `None` when nothing is free.
    fn acquire(
        &self,
        request: &Acquire<'_>,
    ) -> impl Future<Output = Result<Option<Granted>, StoreFailure>> + Send;
    /// Extends a live lease: its new expiry, or why not.
    fn renew(
        &self,
        lease_id: &str,
        fence: i64,
        ttl_ms: i64,
    ) -> impl Future<Output = Result<Result<i64, Refusal>, StoreFailure>> + Send;
    /// Ends a live lease with its outcome's effect.
    fn release(
        &self,
        lease_id: &str,
        fence: i64,
        outcome: &str,
        latency_ms: Option<i64>,
        effect: Effect,
    ) -> impl Future<Output = Result<Result<Released, Refusal>, StoreFailure>> + Send;
    /// Notes the egress a check saw through a lease: the one its task (or it) had before, and
    /// whether another live exclusive lease leaves from it too.
    fn record_egress(
        &self,
        lease_id: &str,
        ip: &str,
        country: Option<&str>,
    ) -> impl Future<Output = Result<EgressRecord, StoreFailure>> + Send;
    /// Every exit with its live leases, bans and the outcomes since `since_ms` of the newest
    /// `most` ended leases.
    fn exit_reports(
        &self,
        since_ms: i64,
        most: i64,
    ) -> impl Future<Output = Result<Vec<ExitReport>, StoreFailure>> + Send;
    /// Live leases by class, bans in force, collisions.
    fn gauges(&self) -> impl Future<Output = Result<Gauges, StoreFailure>> + Send;
    /// What a crash or a failover of the store would cost, from its settings (for the log at
    /// start; unreadable settings are said so).
    fn durability(&self) -> impl Future<Output = Durability> + Send;
    /// Deletes up to `batch` leases that ended (or expired) more than `keep_ms` ago by the
    /// store's clock; how many.
    fn prune(
        &self,
        keep_ms: i64,
        batch: i64,
    ) -> impl Future<Output = Result<u64, StoreFailure>> + Send;
    /// Which of `leases` (id, fence) are live now, in order: the proxy closes the tunnels of
    /// the others.
    fn live(
        &self,
        leases: &[(String, i64)],
    ) -> impl Future<Output = Result<Vec<bool>, StoreFailure>> + Send;
    /// The live lease (id, fence) of `task`, of any class, if it holds one.
    fn task_lease(
        &self,
        task: &str,
    ) -> impl Future<Output = Result<Option<(String, i64)>, StoreFailure>> + Send;
}

#[cfg(test)]
pub(crate) mod suite;
