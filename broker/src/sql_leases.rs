//! The lease store on SQLite and PostgreSQL (`exitvoice-store`'s broker tables), watched for a
//! database that came back older than it was: a failover to an asynchronous standby, a
//! restore, a crash of a server that does not flush its commits, a power loss under a SQLite
//! file. Each shows as a new lineage of the database (the store's `lineage` module) on the
//! first connection that reaches it, before that connection serves a grant. Then the first
//! instance to see it moves every fence past any the lost history can have issued and holds
//! grants for the longest time to live a holder can have been told; every instance, and every
//! instance started later, holds until the same end.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use exitvoice_lease::{
    Acquire, Effect, EgressRecord, ExitReport, Gauges, Granted, Refusal, Released, UnitSpec,
};
use exitvoice_store::{BrokerTables, Engine, Store, StoreError};

use crate::durability::{self, Durability};
use crate::lease_store::{LeaseStore, StoreFailure};

/// The broker's state in its SQL database.
#[derive(Clone)]
pub struct SqlLeases {
    store: BrokerTables,
    /// How long grants wait after the database went back in time, ms.
    hold_ms: i64,
    /// No grant before this instant: the database's hold, on this machine's clock.
    held_until: Arc<Mutex<Option<Instant>>>,
    /// One confirmation at a time per instance.
    turn: Arc<tokio::sync::Mutex<()>>,
}

impl SqlLeases {
    /// The broker's state in `store`, a new history of it held for `hold` (the longest time
    /// to live a holder can have been told). Confirms the history the store reaches now: a
    /// store that went back in time while no broker ran is found here.
    ///
    /// # Errors
    /// Database failures.
    pub async fn open(store: Store, hold: Duration) -> Result<Self, StoreFailure> {
        let leases = Self {
            store: BrokerTables::new(store),
            hold_ms: i64::try_from(hold.as_millis()).unwrap_or(i64::MAX),
            held_until: Arc::default(),
            turn: Arc::default(),
        };
        leases.confirm().await?;
        Ok(leases)
    }

    /// Takes the history the store reaches now as the one to grant on (see
    /// [`BrokerTables::broker_confirm_lineage`]) and the hold it carries.
    async fn confirm(&self) -> Result<(), StoreFailure> {
        let _turn = self.turn.lock().await;
        let sent = Instant::now();
        let confirmed = self.store.broker_confirm_lineage(self.hold_ms).await?;
        if confirmed.moved {
            tracing::warn!(
                hold_ms = self.hold_ms,
                "the broker's database is on another history than it granted on (a failover, \
                 a restore or a crash that lost commits): every fence moved past the old \
                 history's, no grants until every lease it may have granted has run out"
            );
        }
        let left = u64::try_from(confirmed.hold_until_ms - confirmed.now_ms).unwrap_or(0);
        if left > 0 {
            // The database's time was at least `now_ms` when the reading left: its hold cannot
            // end sooner than `left` after that.
            let until = sent + Duration::from_millis(left);
            let mut held = self
                .held_until
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *held = held.max(Some(until));
        }
        Ok(())
    }

    /// Whether grants wait for the hold.
    fn holding(&self) -> bool {
        let held = self
            .held_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        held.is_some_and(|until| Instant::now() < until)
    }

    /// Runs `step`; when its connection reached another history, confirms it and runs it again.
    async fn run<T, F>(&self, step: impl Fn() -> F) -> Result<T, StoreFailure>
    where
        F: std::future::Future<Output = Result<T, StoreError>>,
    {
        match step().await {
            Err(StoreError::LineageMoved) => {
                self.confirm().await?;
                Ok(step().await?)
            }
            answer => Ok(answer?),
        }
    }
}

impl LeaseStore for SqlLeases {
    async fn now_ms(&self) -> Result<i64, StoreFailure> {
        Ok(self.store.broker_now_ms().await?)
    }

    async fn sync_units(&self, units: &[UnitSpec], whole: bool) -> Result<u64, StoreFailure> {
        self.run(|| self.store.broker_sync_units(units, whole))
            .await
    }

    async fn acquire(&self, request: &Acquire<'_>) -> Result<Option<Granted>, StoreFailure> {
        if self.holding() {
            return Ok(None);
        }
        match self.store.broker_acquire(request).await {
            Err(StoreError::LineageMoved) => {
                self.confirm().await?;
                if self.holding() {
                    return Ok(None);
                }
                Ok(self.store.broker_acquire(request).await?)
            }
            answer => Ok(answer?),
        }
    }

    async fn renew(
        &self,
        lease_id: &str,
        fence: i64,
        ttl_ms: i64,
    ) -> Result<Result<i64, Refusal>, StoreFailure> {
        self.run(|| self.store.broker_renew(lease_id, fence, ttl_ms))
            .await
    }

    async fn release(
        &self,
        lease_id: &str,
        fence: i64,
        outcome: &str,
        latency_ms: Option<i64>,
        effect: Effect,
    ) -> Result<Result<Released, Refusal>, StoreFailure> {
        self.run(|| {
            self.store
                .broker_release(lease_id, fence, outcome, latency_ms, effect)
        })
        .await
    }

    async fn record_egress(
        &self,
        lease_id: &str,
        ip: &str,
        country: Option<&str>,
    ) -> Result<EgressRecord, StoreFailure> {
        self.run(|| self.store.broker_record_egress(lease_id, ip, country))
            .await
    }

    async fn exit_reports(
        &self,
        since_ms: i64,
        most: i64,
    ) -> Result<Vec<ExitReport>, StoreFailure> {
        Ok(self.store.broker_exit_reports(since_ms, most).await?)
    }

    async fn gauges(&self) -> Result<Gauges, StoreFailure> {
        Ok(self.store.broker_gauges().await?)
    }

    async fn durability(&self) -> Durability {
        let settings: HashMap<String, String> = self
            .store
            .durability_settings()
            .await
            .unwrap_or_default()
            .into_iter()
            .collect();
        match self.store.engine() {
            Engine::Postgres => durability::postgres(&settings),
            Engine::Sqlite => durability::sqlite(&settings),
        }
    }

    async fn prune(&self, keep_ms: i64, batch: i64) -> Result<u64, StoreFailure> {
        Ok(self.store.broker_prune(keep_ms, batch).await?)
    }

    async fn live(&self, leases: &[(String, i64)]) -> Result<Vec<bool>, StoreFailure> {
        Ok(self.store.broker_live(leases).await?)
    }

    async fn task_lease(&self, task: &str) -> Result<Option<(String, i64)>, StoreFailure> {
        Ok(self.store.broker_task_lease(task).await?)
    }
}
