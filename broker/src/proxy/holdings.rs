//! The leases this instance's tunnels ride, and the rule that no tunnel outlives its lease.
//!
//! A tunnel holds a [`Ticket`] on one lease. With a task, every tunnel of the task rides the
//! task's one lease: the store hands any instance the task's live lease (a sticky acquire), and
//! an instance that already carries it attaches new tunnels without asking the store. Without a
//! task, each tunnel has a lease of its own, released with the tunnel's outcome when it closes.
//!
//! Every [`CHECK`] the instance asks the store which of its leases are still live, in one call,
//! and, beside it, renews those with open tunnels that have run half their time. A task's lease
//! lives `--task-idle` at a time on every instance (so that no renewal ever shortens the time
//! another instance counts on), a tunnel's own lease `tunnel_ttl`. A lease that is no longer
//! live (released, expired, revoked, its fence overtaken) has its tunnels closed at once; so
//! has one whose renewal was refused, and one whose time ran out while the store could not be
//! asked (the instance lost the store past its reserve). A task's lease is not released when
//! its last tunnel here closes: it is renewed once for `--task-idle` and left to run out, so
//! that tunnels of the task on another instance keep it, and a tunnel that comes within that
//! time rides it again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use exitvoice_exits::Exit;
use tokio_util::sync::CancellationToken;

use super::deadline::Deadline;
use crate::lease_store::LeaseStore;
use crate::reserve::Reserve;
use crate::service::{Broker, BrokerError, Ended, LeaseRequest};

/// How often the leases' liveness is asked and renewals are due: a lease that ends has its
/// tunnels closed within this and one store call.
pub const CHECK: Duration = Duration::from_millis(250);

/// Renewals in flight at once.
const RENEWING: usize = 32;

/// The least time a lease must have left for a new tunnel to join it here: a check, and the
/// renewal it then makes, before the tunnel's deadline.
const JOIN_LEFT: Duration = Duration::from_millis(600);

/// Why the tunnels of a lease were closed by the broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndedBy {
    /// The store says it is no longer live (released, expired, revoked, overtaken).
    NotLive,
    /// A renewal was refused.
    Refused,
    /// Its time ran out while the store could not be asked.
    StoreLost,
}

impl EndedBy {
    /// The metrics' reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotLive => "lease_ended",
            Self::Refused => "lease_refused",
            Self::StoreLost => "store_lost",
        }
    }
}

/// One lease as its tunnels here ride it.
#[derive(Debug)]
pub struct Riding {
    /// The lease id.
    pub lease_id: String,
    /// Its fence.
    pub fence: i64,
    /// The exit it goes out through, with its gateway session id.
    pub exit: Exit,
    /// The unit's name (`gw#2` for a gateway slot).
    pub unit: String,
    /// Its class.
    pub class: String,
    /// The task it serves.
    pub task: Option<String>,
    /// Cancelled when the lease ends: every tunnel on it closes.
    pub ended: CancellationToken,
    /// When its tunnels stop writing to the exit unless a renewal moves it on.
    pub deadline: Arc<Deadline>,
    /// Why it ended, once it has.
    ended_by: Mutex<Option<EndedBy>>,
}

impl Riding {
    /// Why the broker ended it, if it has.
    pub fn ended_by(&self) -> Option<EndedBy> {
        *self.ended_by.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn end(&self, why: EndedBy) {
        self.ended_by
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(why);
        self.ended.cancel();
    }
}

/// A lease's state here.
struct Held {
    riding: Arc<Riding>,
    /// Tunnels open on it here.
    tunnels: usize,
    /// The time to live its renewals ask for.
    ttl: Duration,
}

/// The tunnel's hold on a lease; given back with [`Holdings::close`].
#[derive(Debug)]
pub struct Ticket {
    /// The lease.
    pub riding: Arc<Riding>,
    /// `true` when the tunnel joined a lease this instance already carried.
    pub joined: bool,
}

/// The leases this instance's tunnels ride.
pub struct Holdings<S> {
    broker: Arc<Broker<S>>,
    held: Mutex<HashMap<String, Held>>,
    /// A task's lease here, by task and class.
    tasks: Mutex<HashMap<(String, String), String>>,
    /// The time to live of a lease with a task (`--task-idle`): how long it stays after its
    /// last tunnel closes.
    task_idle: Duration,
    /// The time to live of a lease without one, renewed while its tunnel is open.
    tunnel_ttl: Duration,
}

impl<S: LeaseStore> Holdings<S> {
    /// Holdings over `broker`.
    pub fn new(broker: Arc<Broker<S>>, task_idle: Duration, tunnel_ttl: Duration) -> Self {
        Self {
            broker,
            held: Mutex::default(),
            tasks: Mutex::default(),
            task_idle,
            tunnel_ttl,
        }
    }

    /// The broker.
    pub fn broker(&self) -> &Arc<Broker<S>> {
        &self.broker
    }

    /// A hold on a lease for `request` (whose time to live this sets): the task's lease when
    /// this instance carries it, else one the broker grants (the task's live lease, if any).
    ///
    /// # Errors
    /// What the broker answers: nothing free, a bad request, the store failing.
    pub async fn hold(&self, mut request: LeaseRequest) -> Result<Ticket, BrokerError> {
        let ttl = if request.task.is_some() {
            self.task_idle
        } else {
            self.tunnel_ttl
        };
        request.ttl_ms = Some(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        if let Some(ticket) = self.join(&request) {
            return Ok(ticket);
        }
        let lease = self.broker.acquire(&request).await?;
        let exit = self.broker.exit_of(&lease.granted).ok_or_else(|| {
            BrokerError::Internal(format!("unit {} is not in the exits file", lease.exit))
        })?;
        let expires = lease.asked_at + Duration::from_millis(lease.ttl_ms.max(0).unsigned_abs());
        let riding = {
            let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            let entry = held
                .entry(lease.granted.lease_id.clone())
                .or_insert_with(|| Held {
                    riding: Arc::new(Riding {
                        lease_id: lease.granted.lease_id.clone(),
                        fence: lease.granted.fence,
                        exit,
                        unit: lease.exit.clone(),
                        class: request.class.clone(),
                        task: request.task.clone(),
                        ended: CancellationToken::new(),
                        deadline: Arc::new(Deadline::new(expires)),
                        ended_by: Mutex::new(None),
                    }),
                    tunnels: 0,
                    ttl,
                });
            entry.tunnels += 1;
            entry.riding.deadline.extend(expires);
            entry.riding.clone()
        };
        if let Some(task) = &request.task {
            self.tasks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(
                    (task.clone(), request.class.clone()),
                    riding.lease_id.clone(),
                );
        }
        // A task's live lease from the store may have little time left (the instance that
        // renewed it let it go): renewed now rather than at the next check.
        if lease.granted.sticky && expires.saturating_duration_since(Instant::now()) < ttl / 2 {
            self.renew(&riding, ttl).await;
        }
        Ok(Ticket {
            riding,
            joined: lease.granted.sticky,
        })
    }

    /// A hold on the task's lease this instance carries, while it has [`JOIN_LEFT`] left and
    /// has not ended; the next check renews it.
    fn join(&self, request: &LeaseRequest) -> Option<Ticket> {
        let task = request.task.as_ref()?;
        let lease_id = self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(task.clone(), request.class.clone()))
            .cloned()?;
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = held.get_mut(&lease_id)?;
        let left = entry
            .riding
            .deadline
            .at()
            .saturating_duration_since(Instant::now());
        if entry.riding.ended.is_cancelled() || left < JOIN_LEFT {
            return None;
        }
        entry.tunnels += 1;
        Some(Ticket {
            riding: entry.riding.clone(),
            joined: true,
        })
    }

    /// Gives a tunnel's hold back. A lease without a task is released with `outcome`; a
    /// task's lease whose last tunnel here closed is renewed for `--task-idle` and left to run
    /// out (or to be joined again).
    pub async fn close(&self, ticket: Ticket, outcome: &str) {
        let riding = ticket.riding;
        let last = {
            let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(entry) = held.get_mut(&riding.lease_id) else {
                return;
            };
            entry.tunnels = entry.tunnels.saturating_sub(1);
            let last = entry.tunnels == 0;
            if last && riding.task.is_none() {
                held.remove(&riding.lease_id);
            }
            last
        };
        if !last || riding.ended.is_cancelled() {
            return;
        }
        if riding.task.is_none() {
            self.release(&riding, outcome).await;
        } else {
            self.renew(&riding, self.task_idle).await;
        }
    }

    /// Releases `riding`'s lease with `outcome`; a refusal means it had ended already.
    async fn release(&self, riding: &Riding, outcome: &str) {
        match self
            .broker
            .release(&riding.lease_id, riding.fence, outcome, None)
            .await
        {
            Ok(Ended::Released(_) | Ended::Kept) | Err(BrokerError::Refused(_)) => {}
            Err(error) => tracing::debug!(%error, "a tunnel's lease was not released"),
        }
    }

    /// Renews `riding`'s lease for `ttl`; a refusal ends it here.
    async fn renew(&self, riding: &Arc<Riding>, ttl: Duration) {
        let asked = Instant::now();
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        match self
            .broker
            .renew(&riding.lease_id, riding.fence, Some(ms))
            .await
        {
            Ok((_, ttl_ms)) => {
                riding
                    .deadline
                    .set(asked + Duration::from_millis(ttl_ms.max(0).unsigned_abs()));
            }
            Err(BrokerError::Refused(_)) => {
                self.forget(&riding.lease_id);
                riding.end(EndedBy::Refused);
            }
            Err(error) => tracing::debug!(%error, "a tunnel's lease was not renewed"),
        }
    }

    /// Takes the lease out of the holdings.
    fn forget(&self, lease_id: &str) {
        let removed = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(lease_id);
        let Some(riding) = removed.map(|held| held.riding) else {
            return;
        };
        if let Some(task) = &riding.task {
            let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
            let key = (task.clone(), riding.class.clone());
            if tasks.get(&key).is_some_and(|id| id == lease_id) {
                tasks.remove(&key);
            }
        }
    }

    /// Open tunnels per (class, unit).
    pub fn tunnels(&self) -> Vec<(String, String, usize)> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.values()
            .filter(|held| held.tunnels > 0)
            .map(|held| {
                (
                    held.riding.class.clone(),
                    held.riding.unit.clone(),
                    held.tunnels,
                )
            })
            .collect()
    }

    /// One round of the rule: ends what is no longer live, renews what is due, forgets what
    /// ran out.
    pub async fn check(&self) {
        let now = Instant::now();
        let (store_leases, due, lapsed) = {
            let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            let mut store_leases = Vec::new();
            let mut due = Vec::new();
            let mut lapsed = Vec::new();
            for entry in held.values() {
                let riding = &entry.riding;
                if riding.deadline.at() <= now {
                    lapsed.push((riding.clone(), entry.tunnels > 0));
                    continue;
                }
                if !Reserve::is_sub(&riding.lease_id) {
                    store_leases.push(riding.clone());
                }
                let left = riding.deadline.expires().saturating_duration_since(now);
                if entry.tunnels > 0 && left < entry.ttl / 2 {
                    due.push((riding.clone(), entry.ttl));
                }
            }
            (store_leases, due, lapsed)
        };
        for (riding, open) in lapsed {
            self.forget(&riding.lease_id);
            if open {
                riding.end(EndedBy::StoreLost);
            } else {
                riding.ended.cancel();
            }
        }
        let renewals = async {
            for chunk in due.chunks(RENEWING) {
                let renewals = chunk
                    .iter()
                    .filter(|(riding, _)| !riding.ended.is_cancelled())
                    .map(|(riding, ttl)| self.renew(riding, *ttl));
                futures_util::future::join_all(renewals).await;
            }
        };
        futures_util::future::join(self.ask_live(&store_leases), renewals).await;
    }

    /// Asks the store which of `leases` are still live, and ends those that are not.
    async fn ask_live(&self, leases: &[Arc<Riding>]) {
        if leases.is_empty() {
            return;
        }
        let asked: Vec<(String, i64)> = leases
            .iter()
            .map(|riding| (riding.lease_id.clone(), riding.fence))
            .collect();
        match self.broker.leases().live(&asked).await {
            Ok(live) => {
                for (riding, live) in leases.iter().zip(live) {
                    if !live {
                        self.forget(&riding.lease_id);
                        riding.end(EndedBy::NotLive);
                    }
                }
            }
            Err(error) => {
                self.broker.metrics().store_error();
                tracing::debug!(%error, "the proxy's leases could not be checked");
            }
        }
    }

    /// Runs [`Self::check`] every [`CHECK`], for ever.
    pub async fn keep(self: Arc<Self>) {
        let mut every = tokio::time::interval(CHECK);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            self.check().await;
        }
    }
}
