//! Acquires: the request checked, a wait in its queue for a free unit, and the egress check.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use exitvoice_exits::dial::Timeouts;
use exitvoice_exits::Exit;
use exitvoice_lease::{Acquire, Effect, Granted, LeaseClass, MAX_GAP_MS};
use rand::Rng;
use tokio::sync::Semaphore;

use super::queue::{InQueue, Queue, Wanted, MOST_IDLE_QUEUES};
use super::types::{BrokerError, EgressSeen, Lease, LeaseRequest};
use super::{millis, Broker};
use crate::egress;
use crate::lease_store::LeaseStore;
use crate::pool;

/// Leases an exclusive acquire with an egress check takes before it gives up finding one whose
/// address no other live lease leaves from.
const EGRESS_TRIES: usize = 3;

/// How often a waiting acquire asks the store again (other instances' releases do not wake it).
const POLL: Duration = Duration::from_millis(50);

/// The longest holder, task or origin accepted, in bytes.
pub(super) const MAX_NAME: usize = 256;

impl<S: LeaseStore> Broker<S> {
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
        let wanted = Wanted {
            country: request.country.as_deref().map(country_code).transpose()?,
            max_gap_ms: request.max_gap_ms.map(gap_limit).transpose()?,
        };
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + wait;
        let queue = self.queue(class, &wanted);
        // An exclusive lease whose egress check finds another live lease on the same address was
        // not an exit of its own (two sessions the provider put on one address): it is ended,
        // its session retired, and another one taken.
        for _ in 0..EGRESS_TRIES {
            self.metrics.waiting().inc();
            let granted = self
                .wait_for(class, request, &wanted, ttl, &queue, deadline)
                .await;
            self.metrics.waiting().dec();
            let Some((granted, asked_at)) = granted? else {
                break;
            };
            self.metrics
                .granted(class.as_str(), started.elapsed().as_secs_f64());
            let pool = self.pool();
            let exit = pool.exit(&granted.unit).ok_or_else(|| {
                BrokerError::Internal(format!("unit {} is not in the exits file", granted.unit))
            })?;
            let egress = if request.egress {
                Some(self.egress(exit, &granted, wanted.country.as_deref()).await)
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
                asked_at,
                granted,
                egress,
            });
        }
        self.metrics.unavailable(class.as_str());
        Err(BrokerError::Unavailable {
            class: class.as_str(),
            country: wanted.country,
            max_gap_ms: wanted.max_gap_ms,
            retry_after_ms: u64::try_from(POLL.as_millis() * 20).unwrap_or(1000),
        })
    }

    /// The queue of requests for `class` that ask for what `wanted` says.
    fn queue(&self, class: LeaseClass, wanted: &Wanted) -> Arc<Queue> {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (class, wanted.clone());
        if queues.len() >= MOST_IDLE_QUEUES && !queues.contains_key(&key) {
            // A queue only this map holds has no request in it, waiting or about to.
            queues.retain(|_, queue| Arc::strong_count(queue) > 1);
        }
        queues
            .entry(key)
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
        wanted: &Wanted,
        ttl: Duration,
        queue: &Queue,
        deadline: tokio::time::Instant,
    ) -> Result<Option<(Granted, Instant)>, BrokerError> {
        if queue.queued.load(Ordering::Acquire) == 0 {
            if let Some(granted) = self.try_acquire(class, request, wanted, ttl).await? {
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
        self.ask_until(class, request, wanted, ttl, deadline).await
    }

    /// Asks the store until it grants or `deadline` passes, woken by releases and the poll.
    async fn ask_until(
        &self,
        class: LeaseClass,
        request: &LeaseRequest,
        wanted: &Wanted,
        ttl: Duration,
        deadline: tokio::time::Instant,
    ) -> Result<Option<(Granted, Instant)>, BrokerError> {
        loop {
            if let Some(granted) = self.try_acquire(class, request, wanted, ttl).await? {
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
        wanted: &Wanted,
        ttl: Duration,
    ) -> Result<Option<(Granted, Instant)>, BrokerError> {
        let asked_at = Instant::now();
        let (lease_id, nonce) = {
            let mut rng = rand::rng();
            (
                format!("{:032x}", rng.random::<u128>()),
                format!("{:08x}f", rng.random::<u32>()),
            )
        };
        if self.reserve.in_outage() {
            let granted = self.grant_from_reserve(class, wanted, ttl);
            return Ok(granted.map(|granted| (granted, asked_at)));
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
            country: wanted.country.as_deref(),
            max_gap_ms: wanted.max_gap_ms,
        };
        match self.ask_store(self.leases.acquire(&asked)).await {
            Ok(granted) => Ok(granted.map(|granted| (granted, asked_at))),
            Err(error) => {
                self.metrics.store_error();
                if !self.reserve.enabled() {
                    return Err(BrokerError::from(error));
                }
                tracing::debug!(%error, "acquire failed at the store");
                self.store_answered(false).await;
                let granted = self.grant_from_reserve(class, wanted, ttl);
                Ok(granted.map(|granted| (granted, asked_at)))
            }
        }
    }
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

/// `ms` as a gap limit, or the request's error.
fn gap_limit(ms: u64) -> Result<u32, BrokerError> {
    exitvoice_lease::gap_limit(ms).ok_or_else(|| {
        BrokerError::BadRequest(format!(
            "max_gap_ms must be a whole number of ms from 0 to {MAX_GAP_MS}, not {ms}"
        ))
    })
}
