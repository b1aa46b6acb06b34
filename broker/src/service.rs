//! The broker: leases from the store, the pool and its labels, waiting acquires, outcomes.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use exitvoice_exits::dial::Timeouts;
use exitvoice_exits::{EchoTarget, Exit, Secret};
use exitvoice_geo::GeoIp;
use exitvoice_lease::{Acquire, Effect, Granted, LeaseClass, Refusal, Released, UnitSpec};
use exitvoice_store::Store;
use rand::Rng;
use time::OffsetDateTime;
use tokio::sync::{Notify, Semaphore};

use crate::egress::{self, Egress};
use crate::lease_store::{LeaseStore, StoreFailure};
use crate::metrics::Metrics;
use crate::policy::{self, BadOutcome};
use crate::pool::{self, LabelFacts, Labels, Pool};
use crate::reserve::{PendingRelease, Reserve, Turn};

/// Leases an exclusive acquire with an egress check takes before it gives up finding one whose
/// address no other live lease leaves from.
const EGRESS_TRIES: usize = 3;

/// How often a waiting acquire asks the store again (other instances' releases do not wake it).
const POLL: Duration = Duration::from_millis(50);

/// Leases one pruning statement deletes at most, and statements a refresh runs at most: 50,000
/// leases per refresh, some 5,000 a second at the default refresh, beyond any rate measured.
const PRUNE_BATCH: i64 = 5_000;
const PRUNE_BATCHES: usize = 10;

/// With a reserve, how long a store call may take before the store counts as out of reach
/// (without one, a call waits as long as the store's client does).
const STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// The broker's settings (`exitvoice broker --help`).
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// Whose labels count (`rustls/chrome`, `chromium`).
    pub persona: String,
    /// A lease's time to live when the request names none.
    pub default_ttl: Duration,
    /// The longest time to live a request may ask for.
    pub max_ttl: Duration,
    /// The longest life of a lease, renewals included (a gateway's is below its sticky window).
    pub max_life: Duration,
    /// The longest wait a request may ask for.
    pub max_wait: Duration,
    /// Labels whose newest probe is older admit nothing.
    pub labels_max_age: Duration,
    /// How often the labels are read again.
    pub labels_refresh: Duration,
    /// Stateless leases that may share one exit.
    pub stateless_per_exit: u32,
    /// Stateless leases one exit may carry for one origin at once (`None`: no cap of its own).
    pub stateless_per_origin: Option<u32>,
    /// The first ban's length.
    pub ban_ttl: Duration,
    /// `timeout`/`error` outcomes in a row that ban an exit.
    pub error_streak: u32,
    /// This instance's name, in metrics.
    pub instance: String,
    /// The echo server egress checks go to (the exits file's `[echo]`).
    pub echo: Option<EchoTarget>,
    /// Leases that ended longer ago than this are pruned at each labels refresh; zero keeps
    /// them for ever.
    pub retain: Duration,
    /// Units this instance holds in reserve to grant from while the store is out of reach
    /// ([`crate::reserve`]); 0: none, and an outage answers `503`.
    pub reserve: usize,
    /// How long the reserve's leases run between renewals: the longest outage it bridges.
    pub reserve_ttl: Duration,
    /// The broker's own geo databases (`--geoip`): they place the egress check's address, and
    /// the units of exits whose labels have no places ([`crate::pool`]).
    pub geo: Option<Arc<GeoIp>>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            persona: "rustls/chrome".to_owned(),
            default_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(600),
            max_life: Duration::from_secs(3600),
            max_wait: Duration::from_secs(30),
            labels_max_age: Duration::from_secs(2 * 3600),
            labels_refresh: Duration::from_secs(10),
            stateless_per_exit: 2,
            stateless_per_origin: None,
            ban_ttl: Duration::from_secs(3600),
            error_streak: 3,
            instance: "broker".to_owned(),
            echo: None,
            retain: Duration::from_secs(24 * 3600),
            reserve: 0,
            reserve_ttl: Duration::from_secs(60),
            geo: None,
        }
    }
}

impl BrokerConfig {
    /// The longest time to live a holder can have been told at its last grant or renewal: a
    /// request's (at most `max_ttl`; `default_ttl` when it names none), or the reserve's
    /// lease's when there is a reserve, whose sub-leases end before it does. A store that lost
    /// its last writes grants nothing for this long (`redis_leases`, `sql_leases`): the holders
    /// of the lost leases have stopped by then.
    pub fn longest_told_ttl(&self) -> Duration {
        let asked = self.max_ttl.max(self.default_ttl);
        if self.reserve > 0 {
            asked.max(self.reserve_ttl)
        } else {
            asked
        }
    }
}

/// A lease request, as the API takes it.
#[derive(Clone, Debug, Default)]
pub struct LeaseRequest {
    /// `identity`, `anonymous` or `stateless`.
    pub class: String,
    /// Who will hold it.
    pub holder: String,
    /// The task it serves.
    pub task: Option<String>,
    /// The origin it will talk to.
    pub origin: Option<String>,
    /// Its time to live, ms.
    pub ttl_ms: Option<u64>,
    /// How long to wait for a free exit, ms.
    pub wait_ms: Option<u64>,
    /// Check the lease's egress address through the exit ([`crate::egress`]).
    pub egress: bool,
    /// The country the exit must leave from (ISO 3166-1 alpha-2, any case): only units of
    /// that country serve it ([`crate::pool`] says where a unit's country comes from).
    pub country: Option<String>,
}

/// How a release ended.
#[derive(Clone, Debug)]
pub enum Ended {
    /// The lease ended.
    Released(Released),
    /// The store is out of reach: the release is kept and sent when it answers again.
    Kept,
}

/// A granted lease, as the API answers it.
#[derive(Clone, Debug)]
pub struct Lease {
    /// What the store granted.
    pub granted: Granted,
    /// The unit's exit name (`gw#2` for a gateway slot).
    pub exit: String,
    /// The proxy URL with credentials and session.
    pub proxy_url: Secret,
    /// Its time to live, ms.
    pub ttl_ms: i64,
    /// The egress check's answer, when the request asked for one: what it saw, or why it
    /// failed (the lease stands either way).
    pub egress: Option<Result<EgressSeen, String>>,
}

/// What an egress check saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressSeen {
    /// The address and whether an interceptor answered.
    pub egress: Egress,
    /// The task (or the lease) was last seen leaving from another address.
    pub changed: bool,
    /// Another live exclusive lease leaves from the same address.
    pub shared: bool,
    /// The address is placed in another country than the one the lease asked for, else the
    /// exit's `country` (exits file); `None` when either is unknown.
    pub country_mismatch: Option<bool>,
    /// The task (or the lease) was last seen leaving from another country; `None` when either
    /// check could not place its address.
    pub country_changed: Option<bool>,
}

/// Why a request was not served.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// Nothing free within the wait.
    #[error("no exit of class {class}{} is free", .country.as_ref().map(|c| format!(" in {c}")).unwrap_or_default())]
    Unavailable {
        /// The class asked for.
        class: &'static str,
        /// The country asked for, if any.
        country: Option<String>,
        /// When to try again, ms.
        retry_after_ms: u64,
    },
    /// The lease refused the renewal or release.
    #[error("{}", .0.as_str())]
    Refused(Refusal),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreFailure),
    /// The broker failed at something of its own (answered `500`).
    #[error("{0}")]
    Internal(String),
}

impl From<BadOutcome> for BrokerError {
    fn from(error: BadOutcome) -> Self {
        Self::BadRequest(error.to_string())
    }
}

/// The longest holder, task or origin accepted, in bytes.
const MAX_NAME: usize = 256;

/// The waiters for one class in one country (or in any): served in arrival order (tokio's
/// semaphore is fair). A request for a country no unit is free in waits behind others of its
/// own kind only.
struct Queue {
    turn: Semaphore,
    /// Requests in the queue: while there are any, a new request queues behind them instead of
    /// asking the store first.
    queued: AtomicUsize,
}

/// A queue's class and country (`None`: any).
type QueueKey = (LeaseClass, Option<String>);

/// A request counted in its queue until it leaves, however it leaves (a client that hangs up
/// drops it mid-wait).
struct InQueue<'a>(&'a AtomicUsize);

impl<'a> InQueue<'a> {
    fn join(queued: &'a AtomicUsize) -> Self {
        queued.fetch_add(1, Ordering::AcqRel);
        Self(queued)
    }
}

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One broker instance over a lease store `S`; labels come from the SQL store.
pub struct Broker<S> {
    leases: S,
    labels: Store,
    pool: RwLock<Arc<Pool>>,
    config: BrokerConfig,
    /// One queue per class and country asked for (at most 3 × 26², as countries are two
    /// letters).
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

/// The units a refresh wrote, and what it worked them out from. While the labels and the pool
/// are the same ones and no label has aged out since, the units are what they were, and the
/// next refresh has nothing to work out (at 10,000 exits ~14 ms of CPU each time).
struct Synced {
    /// Every unit by name.
    units: Arc<HashMap<String, UnitSpec>>,
    labels: Option<Arc<Labels>>,
    pool: Arc<Pool>,
    /// The store's clock at that refresh.
    at: OffsetDateTime,
    /// When the first label recent then grows older than the max age (`None`: none will).
    until: Option<OffsetDateTime>,
}

impl Synced {
    fn holds(&self, labels: Option<&Arc<Labels>>, pool: &Arc<Pool>, now: OffsetDateTime) -> bool {
        let same_labels = match (&self.labels, labels) {
            (Some(read), Some(now_read)) => Arc::ptr_eq(read, now_read),
            (None, None) => true,
            _ => false,
        };
        // A clock that went back could make an aged label recent again: work it out anew.
        same_labels
            && Arc::ptr_eq(&self.pool, pool)
            && now >= self.at
            && self.until.is_none_or(|until| now <= until)
    }
}

/// The units of `units` whose spec differs from what was last written (`synced`; all of them
/// on the first refresh), the units `synced` has and `units` no longer names as draining, and
/// every unit by name as written after this refresh. Only the changed ones go to the store: at
/// 10,000 exits, a refresh that wrote every unit would cost seconds of the store's time.
fn changed_units(
    mut units: Vec<UnitSpec>,
    synced: Option<&HashMap<String, UnitSpec>>,
) -> (Vec<UnitSpec>, HashMap<String, UnitSpec>) {
    // Units a reloaded exits file no longer names drain.
    if let Some(previous) = synced {
        let named: HashSet<&str> = units.iter().map(|unit| unit.unit.as_str()).collect();
        let gone: Vec<UnitSpec> = previous
            .values()
            .filter(|unit| !named.contains(unit.unit.as_str()))
            .map(|unit| UnitSpec {
                admits: None,
                draining: true,
                ..unit.clone()
            })
            .collect();
        units.extend(gone);
    }
    let changed = match synced {
        None => units.clone(),
        Some(previous) => units
            .iter()
            .filter(|unit| previous.get(&unit.unit) != Some(*unit))
            .cloned()
            .collect(),
    };
    let written = units
        .into_iter()
        .map(|unit| (unit.unit.clone(), unit))
        .collect();
    (changed, written)
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

    /// Reads the persona's newest labels and gives each unit the class its label admits now
    /// (by the store's clock); leases a label stopped admitting are revoked. How many.
    ///
    /// # Errors
    /// Store failures.
    pub async fn refresh(&self) -> Result<u64, BrokerError> {
        let labels = self.labels().await?;
        let now_ms = self.leases.now_ms().await?;
        let now = OffsetDateTime::from_unix_timestamp_nanos(i128::from(now_ms) * 1_000_000)
            .map_err(|_| BrokerError::Internal("the store's clock is out of range".to_owned()))?;
        let pool = self.pool();
        let (max_age, capacity, max_life) = (
            self.config.labels_max_age,
            self.config.stateless_per_exit,
            self.config.max_life,
        );
        let geo = self.config.geo.clone();
        let _turn = self.refreshing.lock().await;
        let synced = {
            let synced = self.synced.lock().unwrap_or_else(PoisonError::into_inner);
            match synced.as_ref() {
                Some(synced) if synced.holds(labels.as_ref(), &pool, now) => return Ok(0),
                synced => synced.map(|synced| synced.units.clone()),
            }
        };
        let whole = synced.is_none();
        let (read_labels, read_pool) = (labels.clone(), pool.clone());
        // At 10,000 exits this is ~14 ms of CPU: off the runtime's workers, which go on
        // answering meanwhile (on one, every request waited for it).
        let planned = tokio::task::spawn_blocking(move || {
            let units = pool.units(
                labels.as_deref(),
                now,
                max_age,
                capacity,
                max_life,
                geo.as_deref(),
            );
            let until = labels
                .as_deref()
                .and_then(|labels| pool::next_age_out(labels, now, max_age));
            (changed_units(units, synced.as_deref()), until)
        })
        .await;
        let ((changed, written), until) = match planned {
            Ok(planned) => planned,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // The runtime is shutting down: nothing to write.
            Err(_) => return Ok(0),
        };
        let revoked = if whole || !changed.is_empty() {
            self.leases.sync_units(&changed, whole).await?
        } else {
            0
        };
        *self.synced.lock().unwrap_or_else(PoisonError::into_inner) = Some(Synced {
            units: Arc::new(written),
            labels: read_labels,
            pool: read_pool,
            at: now,
            until,
        });
        self.metrics.revoked(revoked);
        if revoked > 0 {
            tracing::info!(
                revoked,
                "leases revoked: their exits' labels no longer admit them"
            );
        }
        Ok(revoked)
    }

    /// Leases from the exits of a reloaded exits file: new exits are leased as their labels
    /// admit, exits it no longer names drain (no new lease; live ones run out). How many leases
    /// the refresh that follows revoked.
    ///
    /// # Errors
    /// Store failures (the new pool stays: the next refresh writes it).
    pub async fn reload(&self, exits: Vec<exitvoice_exits::Exit>) -> Result<u64, BrokerError> {
        {
            let mut pool = self.pool.write().unwrap_or_else(PoisonError::into_inner);
            *pool = Arc::new(pool.reloaded(exits));
        }
        self.refresh().await
    }

    /// What the pool reads of the persona's newest labels snapshot, read again only when a
    /// newer one was stored, a page of exits at a time: the broker keeps a few facts per exit,
    /// never the snapshot (at 100,000 exits, hundreds of MB of labels).
    async fn labels(&self) -> Result<Option<Arc<Labels>>, BrokerError> {
        let newest = self
            .labels
            .latest_labels_id_of(&self.config.persona)
            .await
            .map_err(StoreFailure::from)?;
        let mut cached = self.snapshot.lock().await;
        match (newest, cached.as_ref()) {
            (None, _) => return Ok(None),
            (Some(id), Some((known, facts))) if id == *known => return Ok(Some(facts.clone())),
            (Some(id), _) => {
                let reader = self
                    .labels
                    .read_labels(id)
                    .await
                    .map_err(StoreFailure::from)?;
                *cached = match reader {
                    Some(mut reader) => {
                        let mut facts = Labels::new();
                        while let Some(page) =
                            reader.next_page().await.map_err(StoreFailure::from)?
                        {
                            facts.extend(
                                page.iter()
                                    .map(|label| (label.name.clone(), LabelFacts::of(label))),
                            );
                        }
                        Some((id, Arc::new(facts)))
                    }
                    None => None,
                };
                self.metrics.labels_snapshot(id);
            }
        }
        Ok(cached.as_ref().map(|(_, facts)| facts.clone()))
    }

    /// Refreshes the labels every `labels_refresh`, and keeps the reserve, until the task is
    /// dropped.
    pub async fn refresh_forever(self: Arc<Self>) {
        tokio::join!(self.refresh_labels_forever(), self.keep_reserve_forever());
    }

    async fn refresh_labels_forever(&self) {
        let mut every = tokio::time::interval(self.config.labels_refresh);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if let Err(error) = self.refresh().await {
                self.metrics.store_error();
                tracing::warn!(%error, "refreshing the labels failed");
            }
            if let Err(error) = self.prune().await {
                self.metrics.store_error();
                tracing::warn!(%error, "pruning ended leases failed");
            }
        }
    }

    async fn keep_reserve_forever(&self) {
        while self.reserve.enabled() {
            self.keep_reserve().await;
            tokio::time::sleep(self.reserve.period()).await;
        }
    }

    /// Renews the reserve and fills it up (when there is one); the store's answer (or its
    /// silence) starts or ends an outage.
    pub async fn keep_reserve(&self) {
        if !self.reserve.enabled() {
            return;
        }
        let holder = format!("reserve:{}", self.config.instance);
        let life = millis(self.config.max_life);
        let kept = tokio::time::timeout(
            STORE_TIMEOUT,
            self.reserve.keep(&self.leases, &holder, life),
        )
        .await;
        match kept {
            Ok(Ok(_)) => self.store_answered(true).await,
            Ok(Err(error)) => {
                self.metrics.store_error();
                tracing::debug!(%error, "keeping the reserve failed");
                self.store_answered(false).await;
            }
            Err(_) => self.store_answered(false).await,
        }
        let (held, _) = self.reserve.sizes(Instant::now());
        self.metrics.reserved(held);
    }

    /// Notes whether the store answered: an outage starts, or ends and the releases kept
    /// through it are sent.
    async fn store_answered(&self, answered: bool) {
        match self.reserve.store_answered(answered, Instant::now()) {
            Turn::Same => {}
            Turn::Lost => {
                self.metrics.outage(true, Duration::ZERO);
                tracing::warn!("the lease store is out of reach: granting from the reserve");
            }
            Turn::Back(length, kept) => {
                self.metrics.outage(false, length);
                tracing::info!(
                    seconds = length.as_secs_f64(),
                    releases = kept.len(),
                    "the lease store answers again"
                );
                for release in kept {
                    // A refusal means the lease ran out meanwhile: nothing left to end.
                    let _ = Box::pin(self.release(
                        &release.lease_id,
                        release.fence,
                        &release.outcome,
                        release.latency_ms,
                    ))
                    .await;
                }
            }
        }
    }

    /// Deletes the leases that ended more than `retain` ago, a batch at a time, at most
    /// [`PRUNE_BATCHES`] batches a call (a backlog goes over several refreshes); how many.
    ///
    /// # Errors
    /// Store failures.
    pub async fn prune(&self) -> Result<u64, StoreFailure> {
        if self.config.retain.is_zero() {
            return Ok(0);
        }
        let keep = millis(self.config.retain);
        let mut pruned = 0;
        for _ in 0..PRUNE_BATCHES {
            let batch = self.leases.prune(keep, PRUNE_BATCH).await?;
            pruned += batch;
            self.metrics.pruned(batch);
            if batch < PRUNE_BATCH.unsigned_abs() {
                break;
            }
        }
        Ok(pruned)
    }

    /// Grants a lease, waiting up to the request's `wait_ms` for a free exit.
    ///
    /// # Errors
    /// A malformed request, nothing free in time, or a store failure.
    pub async fn acquire(&self, request: &LeaseRequest) -> Result<Lease, BrokerError> {
        let class = LeaseClass::parse(&request.class).ok_or_else(|| {
            BrokerError::BadRequest(format!(
                "class must be identity, anonymous or stateless, not {:?}",
                truncated(&request.class)
            ))
        })?;
        for (field, value) in [
            ("holder", Some(&request.holder)),
            ("task", request.task.as_ref()),
            ("origin", request.origin.as_ref()),
        ] {
            if value.is_some_and(|v| v.len() > MAX_NAME || v.chars().any(char::is_control)) {
                return Err(BrokerError::BadRequest(format!(
                    "{field} is too long or has control characters"
                )));
            }
        }
        if request.holder.trim().is_empty() {
            return Err(BrokerError::BadRequest("holder is required".to_owned()));
        }
        let ttl = self.ttl(request.ttl_ms)?;
        let wait = match request.wait_ms {
            Some(ms) if Duration::from_millis(ms) > self.config.max_wait => {
                return Err(BrokerError::BadRequest(format!(
                    "wait_ms is at most {}",
                    self.config.max_wait.as_millis()
                )))
            }
            Some(ms) => Duration::from_millis(ms),
            None => Duration::ZERO,
        };
        let country = request.country.as_deref().map(country_code).transpose()?;
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + wait;
        let queue = self.queue(class, country.as_deref());
        // An exclusive lease whose egress check finds another live lease on the same address was
        // not an exit of its own (two sessions the provider put on one address): it is ended,
        // its session retired, and another one taken.
        for _ in 0..EGRESS_TRIES {
            self.metrics.waiting().inc();
            let granted = self
                .wait_for(class, request, country.as_deref(), ttl, &queue, deadline)
                .await;
            self.metrics.waiting().dec();
            let Some(granted) = granted? else {
                break;
            };
            self.metrics
                .granted(class.as_str(), started.elapsed().as_secs_f64());
            let pool = self.pool();
            let exit = pool.exit(&granted.unit).ok_or_else(|| {
                BrokerError::Internal(format!("unit {} is not in the exits file", granted.unit))
            })?;
            let egress = if request.egress {
                Some(self.egress(exit, &granted, country.as_deref()).await)
            } else {
                None
            };
            if class.exclusive() && matches!(&egress, Some(Ok(seen)) if seen.shared) {
                self.metrics.egress_shared();
                // A refusal means the lease ended already: nothing more to end.
                let _ = self
                    .leases
                    .release(
                        &granted.lease_id,
                        granted.fence,
                        "egress_shared",
                        None,
                        Effect::Retire,
                    )
                    .await?;
                continue;
            }
            return Ok(Lease {
                proxy_url: pool::lease_url(exit, granted.session.as_deref()),
                exit: exit.name.clone(),
                ttl_ms: granted.expires_ms - granted.now_ms,
                granted,
                egress,
            });
        }
        self.metrics.unavailable(class.as_str());
        Err(BrokerError::Unavailable {
            class: class.as_str(),
            country,
            retry_after_ms: u64::try_from(POLL.as_millis() * 20).unwrap_or(1000),
        })
    }

    /// The queue of requests for `class` in `country`.
    fn queue(&self, class: LeaseClass, country: Option<&str>) -> Arc<Queue> {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        queues
            .entry((class, country.map(str::to_owned)))
            .or_insert_with(|| {
                Arc::new(Queue {
                    turn: Semaphore::new(1),
                    queued: AtomicUsize::new(0),
                })
            })
            .clone()
    }

    /// The egress check of a granted lease on `exit`: through the lease's own session; judged
    /// against the country `asked` for, else the exit's.
    async fn egress(
        &self,
        exit: &Exit,
        granted: &Granted,
        asked: Option<&str>,
    ) -> Result<EgressSeen, String> {
        let echo = self
            .config
            .echo
            .as_ref()
            .ok_or("the exits file has no [echo] to check the egress against")?;
        let mut exit = exit.clone();
        if let (Some(session), Some(id)) = (exit.session.as_mut(), &granted.session) {
            session.id.clone_from(id);
        }
        let mut seen = egress::check(&exit, echo, &Timeouts::default())
            .await
            .map_err(|error| error.to_string())?;
        // The broker's own databases, when given, place the address rather than the echo's.
        if let (Some(geo), Ok(ip)) = (&self.config.geo, seen.ip.parse()) {
            seen.geo = Some(geo.echo(ip));
        }
        let seen_country = seen
            .geo
            .as_ref()
            .and_then(|g| g.place.country.as_deref())
            .map(str::to_ascii_uppercase);
        let record = self
            .leases
            .record_egress(&granted.lease_id, &seen.ip, seen_country.as_deref())
            .await
            .map_err(|error| {
                self.metrics.store_error();
                error.to_string()
            })?;
        let differs = |other: Option<&str>| {
            other
                .zip(seen_country.as_deref())
                .map(|(other, seen)| !other.eq_ignore_ascii_case(seen))
        };
        Ok(EgressSeen {
            changed: record.previous.is_some_and(|before| before != seen.ip),
            shared: record.shared,
            country_mismatch: differs(asked.or(exit.country.as_deref())),
            country_changed: differs(record.previous_country.as_deref()),
            egress: seen,
        })
    }

    /// Asks the store at once when no request is in `queue` (requests that find a unit free
    /// run side by side); else, or when nothing was free, takes the queue's turn (arrival
    /// order) and asks until the store grants or `deadline` passes. A release on this
    /// instance wakes the queue at once, other instances' at the next poll.
    async fn wait_for(
        &self,
        class: LeaseClass,
        request: &LeaseRequest,
        country: Option<&str>,
        ttl: Duration,
        queue: &Queue,
        deadline: tokio::time::Instant,
    ) -> Result<Option<Granted>, BrokerError> {
        if queue.queued.load(Ordering::Acquire) == 0 {
            if let Some(granted) = self.try_acquire(class, request, country, ttl).await? {
                return Ok(Some(granted));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
        }
        let _in_queue = InQueue::join(&queue.queued);
        // An uncontended turn is ready at once, even with no time to wait.
        let Ok(Ok(_turn)) = tokio::time::timeout_at(deadline, queue.turn.acquire()).await else {
            return Ok(None);
        };
        self.ask_until(class, request, country, ttl, deadline).await
    }

    /// Asks the store until it grants or `deadline` passes, woken by releases and the poll.
    async fn ask_until(
        &self,
        class: LeaseClass,
        request: &LeaseRequest,
        country: Option<&str>,
        ttl: Duration,
        deadline: tokio::time::Instant,
    ) -> Result<Option<Granted>, BrokerError> {
        loop {
            if let Some(granted) = self.try_acquire(class, request, country, ttl).await? {
                return Ok(Some(granted));
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            tokio::select! {
                () = self.released.notified() => {}
                () = tokio::time::sleep_until(deadline.min(now + POLL)) => {}
            }
        }
    }

    async fn try_acquire(
        &self,
        class: LeaseClass,
        request: &LeaseRequest,
        country: Option<&str>,
        ttl: Duration,
    ) -> Result<Option<Granted>, BrokerError> {
        let (lease_id, nonce) = {
            let mut rng = rand::rng();
            (
                format!("{:032x}", rng.random::<u128>()),
                format!("{:08x}f", rng.random::<u32>()),
            )
        };
        if self.reserve.in_outage() {
            return Ok(self.grant_from_reserve(class, country, ttl));
        }
        let asked = Acquire {
            lease_id: &lease_id,
            class,
            holder: &request.holder,
            task: request.task.as_deref(),
            origin: request.origin.as_deref(),
            ttl_ms: millis(ttl),
            life_ms: millis(self.config.max_life),
            session_nonce: &nonce,
            stateless_per_origin: self.config.stateless_per_origin,
            fences: 1,
            country,
        };
        match self.ask_store(self.leases.acquire(&asked)).await {
            Ok(granted) => Ok(granted),
            Err(error) => {
                self.metrics.store_error();
                if !self.reserve.enabled() {
                    return Err(BrokerError::from(error));
                }
                tracing::debug!(%error, "acquire failed at the store");
                self.store_answered(false).await;
                Ok(self.grant_from_reserve(class, country, ttl))
            }
        }
    }

    /// `call` to the store: with a reserve, a call that takes [`STORE_TIMEOUT`] fails (the
    /// store counts as out of reach); without one, it waits as long as the store's client does.
    async fn ask_store<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, StoreFailure>>,
    ) -> Result<T, StoreFailure> {
        if !self.reserve.enabled() {
            return call.await;
        }
        tokio::time::timeout(STORE_TIMEOUT, call)
            .await
            .unwrap_or_else(|_| {
                Err(StoreFailure::message(
                    "the lease store did not answer in time".to_owned(),
                ))
            })
    }

    /// The units as last written.
    fn synced(&self) -> Option<Arc<HashMap<String, UnitSpec>>> {
        self.synced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|synced| synced.units.clone())
    }

    /// A sub-lease from the reserve, on a unit whose label (as last read) admits `class`, in
    /// `country` if one is asked for.
    fn grant_from_reserve(
        &self,
        class: LeaseClass,
        country: Option<&str>,
        ttl: Duration,
    ) -> Option<Granted> {
        let synced = self.synced();
        let granted = self.reserve.grant(
            class,
            ttl,
            self.config.stateless_per_exit,
            |unit| {
                synced
                    .as_ref()
                    .and_then(|units| units.get(unit))
                    .filter(|spec| {
                        !spec.draining
                            && country.is_none_or(|want| spec.country.as_deref() == Some(want))
                    })
                    .and_then(|spec| spec.admits)
            },
            Instant::now(),
        );
        if granted.is_some() {
            self.metrics.granted_in_outage();
        }
        granted
    }

    /// Extends a lease; its new expiry (store ms) and time to live.
    ///
    /// # Errors
    /// A refusal (unknown, stale fence, expired, revoked, life cap) or a store failure.
    pub async fn renew(
        &self,
        lease_id: &str,
        fence: i64,
        ttl_ms: Option<u64>,
    ) -> Result<(i64, i64), BrokerError> {
        let ttl = self.ttl(ttl_ms)?;
        if Reserve::is_sub(lease_id) {
            let renewed = self.reserve.renew(lease_id, fence, ttl, Instant::now());
            return match renewed {
                Ok(expires) => Ok((expires, millis(ttl))),
                Err(refusal) => {
                    self.metrics.refused(refusal.as_str());
                    Err(BrokerError::Refused(refusal))
                }
            };
        }
        if self.reserve.in_outage() {
            // No renewal the store cannot hear of: it would grant the unit at the old expiry.
            return Err(BrokerError::Store(StoreFailure::message(
                "the lease store is out of reach".to_owned(),
            )));
        }
        let ttl = millis(ttl);
        let expires = self
            .ask_store(self.leases.renew(lease_id, fence, ttl))
            .await
            .map_err(|error| {
                self.metrics.store_error();
                BrokerError::from(error)
            })?;
        match expires {
            Ok(expires) => Ok((expires, ttl)),
            Err(refusal) => {
                self.metrics.refused(refusal.as_str());
                Err(BrokerError::Refused(refusal))
            }
        }
    }

    /// Ends a lease with the worker's outcome. A sub-lease of the reserve ends here (its outcome
    /// is counted, and bans nothing); with a reserve, a store lease whose release fails is kept
    /// and ended when the store answers again.
    ///
    /// # Errors
    /// A bad outcome, a refusal, or a store failure.
    pub async fn release(
        &self,
        lease_id: &str,
        fence: i64,
        outcome: &str,
        latency_ms: Option<i64>,
    ) -> Result<Ended, BrokerError> {
        let effect = policy::effect(outcome, self.config.ban_ttl, self.config.error_streak)?;
        let keep = || {
            self.reserve.keep_release(PendingRelease {
                lease_id: lease_id.to_owned(),
                fence,
                outcome: outcome.to_owned(),
                latency_ms,
            })
        };
        let released = if Reserve::is_sub(lease_id) {
            self.reserve.release(lease_id, fence, Instant::now())
        } else if self.reserve.in_outage() && keep() {
            // The store is out of reach: no call to wait on.
            return Ok(Ended::Kept);
        } else {
            let release = self
                .leases
                .release(lease_id, fence, outcome, latency_ms, effect);
            match self.ask_store(release).await {
                Ok(released) => released,
                Err(error) => {
                    self.metrics.store_error();
                    if !(self.reserve.enabled() && keep()) {
                        return Err(BrokerError::from(error));
                    }
                    self.store_answered(false).await;
                    return Ok(Ended::Kept);
                }
            }
        };
        let released = match released {
            Ok(released) => released,
            Err(refusal) => {
                self.metrics.refused(refusal.as_str());
                return Err(BrokerError::Refused(refusal));
            }
        };
        self.released.notify_waiters();
        self.metrics
            .outcome(&released.exit_name, outcome, latency_ms);
        self.metrics.recovered(released.recovered_bans);
        if released.retired_session.is_some() {
            self.metrics.ban("session");
        } else if released.banned_until_ms.is_some() {
            self.metrics.ban(if matches!(outcome, "timeout" | "error") {
                "exit"
            } else {
                "origin"
            });
        }
        Ok(Ended::Released(released))
    }

    /// Ends `task`'s live lease with the worker's outcome (what the broker cannot see inside
    /// TLS: a `403`, a captcha): bans and retirements follow as for a release, and the
    /// forward proxy closes the lease's tunnels. `None` when the task holds no live lease.
    ///
    /// # Errors
    /// A bad outcome or task, a refusal (it ended meanwhile), or a store failure.
    pub async fn report_task(
        &self,
        task: &str,
        outcome: &str,
        latency_ms: Option<i64>,
    ) -> Result<Option<Ended>, BrokerError> {
        policy::effect(outcome, self.config.ban_ttl, self.config.error_streak)?;
        if task.is_empty() || task.len() > MAX_NAME || task.chars().any(char::is_control) {
            return Err(BrokerError::BadRequest(
                "task is empty, too long or has control characters".to_owned(),
            ));
        }
        let found = self
            .ask_store(self.leases.task_lease(task))
            .await
            .map_err(|error| {
                self.metrics.store_error();
                BrokerError::from(error)
            })?;
        let Some((lease_id, fence)) = found else {
            return Ok(None);
        };
        self.release(&lease_id, fence, outcome, latency_ms)
            .await
            .map(Some)
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

/// At most 40 characters of `text`, for error messages.
fn truncated(text: &str) -> String {
    text.chars().take(40).collect()
}

/// `text` as a country code (ISO 3166-1 alpha-2: two ASCII letters), upper case.
fn country_code(text: &str) -> Result<String, BrokerError> {
    if text.len() == 2 && text.bytes().all(|b| b.is_ascii_alphabetic()) {
        Ok(text.to_ascii_uppercase())
    } else {
        Err(BrokerError::BadRequest(format!(
            "country must be two letters (ISO 3166-1 alpha-2), not {:?}",
            truncated(text)
        )))
    }
}
