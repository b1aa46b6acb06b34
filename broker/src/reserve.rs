//! The instance's reserve: a few units it holds in the store as exclusive leases of its own,
//! renewed while the store answers, so that it can go on granting while the store is out of
//! reach, from those units alone (`exitvoice broker --reserve`). No other instance grants a
//! reserved unit until the reserve's lease on it runs out in the store, so no two instances hand
//! out one unit at once, outage or not: disjoint by construction, with nothing to agree on while
//! the store is away.
//!
//! - Each reserved lease takes [`FENCES`] fences ([`Acquire::fences`]); the sub-leases granted
//!   on its unit take the ones after its own, so a fence never goes backwards at the exit.
//! - A sub-lease ends [`MARGIN`] before its reserve's lease can end in the store. That end is
//!   seen from here through a [`Clock`] reading: the store's time when the reading was *sent*
//!   was at most the value it returned, so the store's expiry cannot come sooner than the
//!   reading's send instant plus the time left.
//! - While the store answers, the store grants and the reserve sits idle (the units it holds are
//!   the price of the insurance). Sub-leases granted in an outage run on after it, to their end.
//! - Releases of the store's own leases that fail in an outage are kept and sent when it ends.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use exitvoice_lease::{Acquire, Granted, LeaseClass, Refusal, Released};
use rand::Rng;

use crate::lease_store::{LeaseStore, StoreFailure};

/// Fences a reserved lease takes: its own and one per sub-lease granted on its unit. A unit
/// whose range is spent grants no more until it is replaced.
pub const FENCES: i64 = 4096;

/// How long before its reserve's lease can end in the store a sub-lease ends: room for the two
/// machines' clocks running at different rates, and for a worker's last request.
pub const MARGIN: Duration = Duration::from_secs(1);

/// Sub-lease ids start with this, so that the store is never asked about them.
const SUB_PREFIX: char = 'r';

/// Releases kept through an outage at most; more are dropped (those leases run out).
const MOST_PENDING: usize = 100_000;

/// A reading of the store's clock: at local instant `sent` (when the request that read it left),
/// the store's time was at most `store_ms`.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// The store's time it answered, ms.
    pub store_ms: i64,
    /// When the request left.
    pub sent: Instant,
}

impl Clock {
    /// The soonest local instant the store's clock can reach `store_ms`.
    fn soonest(&self, store_ms: i64) -> Instant {
        let ahead = u64::try_from(store_ms.saturating_sub(self.store_ms)).unwrap_or(0);
        self.sent + Duration::from_millis(ahead)
    }

    /// The latest the store's time can be at `now`, ms.
    fn latest(&self, now: Instant) -> i64 {
        let since = i64::try_from(now.saturating_duration_since(self.sent).as_millis());
        self.store_ms.saturating_add(since.unwrap_or(i64::MAX))
    }
}

/// A release of a store lease that failed in an outage, sent again when it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingRelease {
    /// The lease.
    pub lease_id: String,
    /// Its fence.
    pub fence: i64,
    /// The worker's outcome.
    pub outcome: String,
    /// The latency it reported.
    pub latency_ms: Option<i64>,
}

/// One unit the reserve holds.
#[derive(Debug)]
struct Held {
    lease: Granted,
    /// The soonest the reserve's lease can end in the store.
    ends: Instant,
    /// The clock reading `ends` was taken from, for the store times of sub-leases.
    clock: Clock,
    /// Its renewal was refused (its life cap, or a revocation): it grants nothing more and is
    /// dropped once it has ended.
    retiring: bool,
    next_fence: i64,
    subs: Vec<Sub>,
    /// When its last sub-lease ended (the least recently used unit is granted first).
    rested: Instant,
}

#[derive(Debug)]
struct Sub {
    lease_id: String,
    fence: i64,
    class: LeaseClass,
    ends: Instant,
}

impl Held {
    /// The latest a new sub-lease may end.
    fn cap(&self) -> Option<Instant> {
        self.ends.checked_sub(MARGIN)
    }

    fn live_subs(&self, now: Instant) -> impl Iterator<Item = &Sub> {
        self.subs.iter().filter(move |sub| sub.ends > now)
    }

    /// Whether a sub-lease of `class` fits beside the live ones (`capacity`: stateless leases
    /// one unit carries).
    fn fits(&self, class: LeaseClass, capacity: u32, now: Instant) -> bool {
        if self.retiring || self.next_fence >= self.lease.fence + FENCES {
            return false;
        }
        if self.cap().is_none_or(|cap| cap <= now + MARGIN) {
            return false;
        }
        let mut live = self.live_subs(now);
        if class.exclusive() {
            live.next().is_none()
        } else {
            let mut shared = 0;
            for sub in live {
                if sub.class.exclusive() {
                    return false;
                }
                shared += 1;
            }
            shared < capacity
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    held: Vec<Held>,
    /// When the store stopped answering, while it does not.
    outage: Option<Instant>,
    pending: Vec<PendingRelease>,
}

/// What a change of the store's state means for the instance.
#[derive(Debug, PartialEq, Eq)]
pub enum Turn {
    /// Nothing changed.
    Same,
    /// The store stopped answering.
    Lost,
    /// It answers again after an outage this long; the releases kept meanwhile.
    Back(Duration, Vec<PendingRelease>),
}

/// The reserve of one instance.
#[derive(Debug)]
pub struct Reserve {
    size: usize,
    ttl: Duration,
    inner: Mutex<Inner>,
}

impl Reserve {
    /// A reserve of `size` units (0: none), each held for `ttl` at a time.
    pub fn new(size: usize, ttl: Duration) -> Self {
        Self {
            size,
            ttl,
            inner: Mutex::default(),
        }
    }

    /// Whether it holds (or tries to hold) any unit.
    pub fn enabled(&self) -> bool {
        self.size > 0
    }

    /// How often [`Reserve::keep`] should run: a few times per `ttl`, often in an outage.
    pub fn period(&self) -> Duration {
        if self.in_outage() {
            Duration::from_millis(250)
        } else {
            (self.ttl / 6).max(Duration::from_millis(250))
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the store is out of reach, as last seen (never without a reserve: every
    /// acquire asks, and then takes no lock).
    pub fn in_outage(&self) -> bool {
        self.enabled() && self.inner().outage.is_some()
    }

    /// Notes whether the store answered at `now`.
    pub fn store_answered(&self, answered: bool, now: Instant) -> Turn {
        let mut inner = self.inner();
        match (answered, inner.outage) {
            (false, None) => {
                inner.outage = Some(now);
                Turn::Lost
            }
            (true, Some(since)) => {
                inner.outage = None;
                Turn::Back(
                    now.saturating_duration_since(since),
                    std::mem::take(&mut inner.pending),
                )
            }
            _ => Turn::Same,
        }
    }

    /// Keeps a store lease's failed release for when the store answers again; false when too
    /// many are kept already.
    pub fn keep_release(&self, release: PendingRelease) -> bool {
        let mut inner = self.inner();
        if inner.pending.len() >= MOST_PENDING {
            return false;
        }
        inner.pending.push(release);
        true
    }

    /// Renews the held units that are due and takes new ones up to the reserve's size, as
    /// `holder` with leases of at most `life_ms`; how many units it holds.
    ///
    /// # Errors
    /// A store failure (what was done before it stays done).
    pub async fn keep<S: LeaseStore>(
        &self,
        store: &S,
        holder: &str,
        life_ms: i64,
    ) -> Result<usize, StoreFailure> {
        let ttl_ms = i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX);
        let sent = Instant::now();
        let clock = Clock {
            store_ms: store.now_ms().await?,
            sent,
        };
        let due: Vec<(String, i64)> = {
            let mut inner = self.inner();
            let now = Instant::now();
            inner.held.retain(|held| held.ends > now);
            inner
                .held
                .iter()
                .filter(|held| !held.retiring && held.ends < now + self.ttl * 2 / 3)
                .map(|held| (held.lease.lease_id.clone(), held.lease.fence))
                .collect()
        };
        for (lease_id, fence) in due {
            let renewed = store.renew(&lease_id, fence, ttl_ms).await?;
            let mut inner = self.inner();
            if let Some(held) = inner.held.iter_mut().find(|h| h.lease.lease_id == lease_id) {
                match renewed {
                    Ok(expires_ms) => {
                        held.lease.expires_ms = expires_ms;
                        held.ends = clock.soonest(expires_ms);
                        held.clock = clock;
                    }
                    Err(refusal) => {
                        tracing::info!(refusal = refusal.as_str(), "a reserved unit retires");
                        held.retiring = true;
                    }
                }
            }
        }
        loop {
            let active = self.inner().held.iter().filter(|h| !h.retiring).count();
            if active >= self.size {
                return Ok(active);
            }
            let (lease_id, nonce) = {
                let mut rng = rand::rng();
                (
                    format!("{:032x}", rng.random::<u128>()),
                    format!("{:08x}f", rng.random::<u32>()),
                )
            };
            let sent = Instant::now();
            let granted = store
                .acquire(&Acquire {
                    lease_id: &lease_id,
                    class: LeaseClass::Anonymous,
                    holder,
                    task: None,
                    origin: None,
                    ttl_ms,
                    life_ms,
                    session_nonce: &nonce,
                    stateless_per_origin: None,
                    fences: FENCES,
                    country: None,
                    max_gap_ms: None,
                })
                .await?;
            let Some(lease) = granted else {
                // Nothing free now: the next round tries again.
                return Ok(active);
            };
            let clock = Clock {
                store_ms: lease.now_ms,
                sent,
            };
            let now = Instant::now();
            self.inner().held.push(Held {
                ends: clock.soonest(lease.expires_ms),
                clock,
                retiring: false,
                next_fence: lease.fence + 1,
                subs: Vec::new(),
                rested: now,
                lease,
            });
        }
    }

    /// A sub-lease of `class` for `ttl` on a held unit whose label admits it (`admits`, by the
    /// labels last read), or `None`; `capacity`: stateless leases one unit carries.
    pub fn grant(
        &self,
        class: LeaseClass,
        ttl: Duration,
        capacity: u32,
        admits: impl Fn(&str) -> Option<LeaseClass>,
        now: Instant,
    ) -> Option<Granted> {
        let mut inner = self.inner();
        let held = inner
            .held
            .iter_mut()
            .filter(|held| {
                admits(&held.lease.unit).is_some_and(|admitted| admitted.serves(class))
                    && held.fits(class, capacity, now)
            })
            .min_by_key(|held| held.rested)?;
        let cap = held.cap()?;
        let ends = (now + ttl).min(cap);
        held.subs.retain(|sub| sub.ends > now);
        let lease_id = format!("{SUB_PREFIX}{:031x}", rand::rng().random::<u128>() >> 4);
        let fence = held.next_fence;
        held.next_fence += 1;
        held.subs.push(Sub {
            lease_id: lease_id.clone(),
            fence,
            class,
            ends,
        });
        let store_now = held.clock.latest(now);
        let left = |until: Instant| {
            i64::try_from(until.saturating_duration_since(now).as_millis()).unwrap_or(0)
        };
        Some(Granted {
            lease_id,
            unit: held.lease.unit.clone(),
            exit_name: held.lease.exit_name.clone(),
            fence,
            expires_ms: store_now + left(ends),
            life_ends_ms: store_now + left(cap),
            session: held.lease.session.clone(),
            now_ms: store_now,
            sticky: false,
        })
    }

    /// Whether `lease_id` names a sub-lease (granted here, unknown to the store).
    pub fn is_sub(lease_id: &str) -> bool {
        lease_id.starts_with(SUB_PREFIX)
    }

    /// Extends sub-lease `lease_id` by `ttl` from `now`, never past its reserve's cap: the new
    /// expiry in the store's time, or why not.
    pub fn renew(
        &self,
        lease_id: &str,
        fence: i64,
        ttl: Duration,
        now: Instant,
    ) -> Result<i64, Refusal> {
        let mut inner = self.inner();
        let (unit, index) = find(&inner, lease_id, fence, now)?;
        let held = &mut inner.held[unit];
        let cap = held.cap().ok_or(Refusal::LifeCap)?;
        let sub = &mut held.subs[index];
        if sub.ends >= cap {
            return Err(Refusal::LifeCap);
        }
        sub.ends = (now + ttl).min(cap);
        let left = i64::try_from(sub.ends.saturating_duration_since(now).as_millis());
        Ok(held.clock.latest(now) + left.unwrap_or(0))
    }

    /// Ends sub-lease `lease_id`: what it held, or why not.
    pub fn release(&self, lease_id: &str, fence: i64, now: Instant) -> Result<Released, Refusal> {
        let mut inner = self.inner();
        let (unit, index) = find(&inner, lease_id, fence, now)?;
        let held = &mut inner.held[unit];
        held.subs.remove(index);
        held.rested = now;
        let released = Released {
            unit: held.lease.unit.clone(),
            exit_name: held.lease.exit_name.clone(),
            banned_until_ms: None,
            recovered_bans: 0,
            retired_session: None,
            now_ms: held.clock.latest(now),
        };
        Ok(released)
    }

    /// Units held now (retiring ones included), and live sub-leases on them.
    pub fn sizes(&self, now: Instant) -> (usize, usize) {
        let inner = self.inner();
        let held = inner.held.iter().filter(|held| held.ends > now);
        let subs = held.clone().map(|held| held.live_subs(now).count()).sum();
        (held.count(), subs)
    }
}

/// Where the live sub-lease `lease_id` is (its unit's index, its own), judged like a store
/// lease: unknown, stale fence or expired.
fn find(
    inner: &Inner,
    lease_id: &str,
    fence: i64,
    now: Instant,
) -> Result<(usize, usize), Refusal> {
    for (unit, held) in inner.held.iter().enumerate() {
        let Some(index) = held.subs.iter().position(|sub| sub.lease_id == lease_id) else {
            continue;
        };
        let sub = &held.subs[index];
        if sub.fence != fence {
            return Err(Refusal::StaleFence);
        }
        if sub.ends <= now {
            return Err(Refusal::Expired);
        }
        return Ok((unit, index));
    }
    Err(Refusal::Unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    /// A reserve holding `units` (admitting anything up to identity), each lease ending at
    /// `sent + life` with the store's clock at 1,000,000 ms when it was read.
    fn holding(units: &[&str], sent: Instant, life: Duration) -> Reserve {
        let reserve = Reserve::new(units.len(), life);
        let clock = Clock {
            store_ms: 1_000_000,
            sent,
        };
        let life_ms = i64::try_from(life.as_millis()).unwrap();
        reserve.inner().held = units
            .iter()
            .enumerate()
            .map(|(n, unit)| Held {
                lease: Granted {
                    lease_id: format!("{n:032x}"),
                    unit: (*unit).to_owned(),
                    exit_name: unit.split('#').next().unwrap().to_owned(),
                    fence: 100,
                    expires_ms: clock.store_ms + life_ms,
                    life_ends_ms: clock.store_ms + 3_600_000,
                    session: None,
                    now_ms: clock.store_ms,
                    sticky: false,
                },
                ends: clock.soonest(clock.store_ms + life_ms),
                clock,
                retiring: false,
                next_fence: 101,
                subs: Vec::new(),
                rested: sent,
            })
            .collect();
        reserve
    }

    fn anything(_: &str) -> Option<LeaseClass> {
        Some(LeaseClass::Identity)
    }

    #[test]
    fn an_exclusive_sub_lease_holds_its_unit_alone_and_fences_grow() {
        let t0 = Instant::now();
        let reserve = holding(&["a"], t0, 60 * SECOND);
        let first = reserve
            .grant(LeaseClass::Identity, 10 * SECOND, 2, anything, t0)
            .unwrap();
        assert!(Reserve::is_sub(&first.lease_id));
        assert_eq!((first.unit.as_str(), first.fence), ("a", 101));
        for class in [LeaseClass::Identity, LeaseClass::Stateless] {
            assert!(reserve.grant(class, SECOND, 2, anything, t0).is_none());
        }
        assert_eq!(
            reserve.release(&first.lease_id, 100, t0).unwrap_err(),
            Refusal::StaleFence
        );
        reserve.release(&first.lease_id, first.fence, t0).unwrap();
        assert_eq!(
            reserve
                .release(&first.lease_id, first.fence, t0)
                .unwrap_err(),
            Refusal::Unknown
        );
        let next = reserve
            .grant(LeaseClass::Anonymous, SECOND, 2, anything, t0)
            .unwrap();
        assert_eq!(
            next.fence, 102,
            "the next holder's fence is above the last one's"
        );
    }

    #[test]
    fn stateless_sub_leases_share_up_to_capacity() {
        let t0 = Instant::now();
        let reserve = holding(&["a"], t0, 60 * SECOND);
        let ask = |class| reserve.grant(class, SECOND, 2, anything, t0);
        assert!(ask(LeaseClass::Stateless).is_some());
        assert!(
            ask(LeaseClass::Identity).is_none(),
            "not beside a stateless one"
        );
        assert!(ask(LeaseClass::Stateless).is_some());
        assert!(ask(LeaseClass::Stateless).is_none(), "capacity 2");
        assert_eq!(reserve.sizes(t0), (1, 2));
    }

    #[test]
    fn a_sub_lease_ends_before_its_reserve_can_and_expires_on_time() {
        let t0 = Instant::now();
        let reserve = holding(&["a"], t0, 5 * SECOND);
        let lease = reserve
            .grant(LeaseClass::Identity, 60 * SECOND, 2, anything, t0)
            .unwrap();
        // Capped at the reserve's end less the margin: 4 s, in the store's time.
        assert_eq!(lease.expires_ms - lease.now_ms, 4_000);
        assert_eq!(
            reserve
                .renew(&lease.lease_id, lease.fence, 60 * SECOND, t0 + SECOND)
                .unwrap_err(),
            Refusal::LifeCap
        );
        assert_eq!(
            reserve
                .release(&lease.lease_id, lease.fence, t0 + 4 * SECOND)
                .unwrap_err(),
            Refusal::Expired
        );
        // Nothing is granted that could not run at least the margin.
        let late = t0 + 4 * SECOND - Duration::from_millis(500);
        assert!(reserve
            .grant(LeaseClass::Identity, SECOND, 2, anything, late)
            .is_none());
    }

    #[test]
    fn a_renewal_extends_to_the_cap_and_no_further() {
        let t0 = Instant::now();
        let reserve = holding(&["a"], t0, 30 * SECOND);
        let lease = reserve
            .grant(LeaseClass::Anonymous, 2 * SECOND, 2, anything, t0)
            .unwrap();
        let renewed = reserve
            .renew(&lease.lease_id, lease.fence, 5 * SECOND, t0 + SECOND)
            .unwrap();
        assert_eq!(renewed, 1_000_000 + 6_000);
        let capped = reserve
            .renew(&lease.lease_id, lease.fence, 60 * SECOND, t0 + SECOND)
            .unwrap();
        assert_eq!(capped, 1_000_000 + 29_000);
    }

    #[test]
    fn only_units_whose_label_admits_the_class_serve_it() {
        let t0 = Instant::now();
        let reserve = holding(&["a", "b"], t0, 60 * SECOND);
        let labels = |unit: &str| match unit {
            "a" => Some(LeaseClass::Anonymous),
            _ => None,
        };
        assert!(reserve
            .grant(LeaseClass::Identity, SECOND, 2, labels, t0)
            .is_none());
        let lease = reserve
            .grant(LeaseClass::Anonymous, SECOND, 2, labels, t0)
            .unwrap();
        assert_eq!(lease.unit, "a");
        assert!(reserve
            .grant(LeaseClass::Anonymous, SECOND, 2, labels, t0)
            .is_none());
    }

    #[test]
    fn a_unit_grants_no_more_than_its_fences() {
        let t0 = Instant::now();
        let reserve = holding(&["a"], t0, 60 * SECOND);
        let mut last = 0;
        while let Some(lease) = reserve.grant(LeaseClass::Identity, SECOND, 2, anything, t0) {
            last = lease.fence;
            reserve.release(&lease.lease_id, lease.fence, t0).unwrap();
        }
        assert_eq!(
            last,
            100 + FENCES - 1,
            "every fence of the range, and none past it"
        );
    }

    #[test]
    fn an_outage_starts_once_and_its_end_hands_back_the_kept_releases() {
        let t0 = Instant::now();
        let reserve = Reserve::new(1, 60 * SECOND);
        assert_eq!(reserve.store_answered(true, t0), Turn::Same);
        assert_eq!(reserve.store_answered(false, t0), Turn::Lost);
        assert_eq!(reserve.store_answered(false, t0 + SECOND), Turn::Same);
        let kept = PendingRelease {
            lease_id: "l".into(),
            fence: 3,
            outcome: "ok".into(),
            latency_ms: None,
        };
        assert!(reserve.keep_release(kept.clone()));
        assert!(reserve.in_outage());
        assert_eq!(
            reserve.store_answered(true, t0 + 10 * SECOND),
            Turn::Back(10 * SECOND, vec![kept])
        );
        assert!(!reserve.in_outage());
    }

    #[tokio::test]
    async fn reserved_units_are_no_one_elses_while_renewed() {
        use crate::lease_store::suite::{ask, unit};
        use crate::lease_store::LeaseStore as _;
        let dir = tempfile::tempdir().unwrap();
        let store = exitvoice_store::Store::open(&dir.path().join("reserve.db"))
            .await
            .unwrap();
        let store = crate::sql_leases::SqlLeases::open(store, Duration::from_secs(3600))
            .await
            .unwrap();
        let units: Vec<_> = ["a", "b", "c"]
            .into_iter()
            .map(|name| unit(name, Some(LeaseClass::Identity)))
            .collect();
        store.sync_units(&units, true).await.unwrap();
        let reserve = Reserve::new(2, 3 * SECOND);
        assert_eq!(
            reserve.keep(&store, "reserve:t", 3_600_000).await.unwrap(),
            2
        );
        let stateless = |id| ask(id, LeaseClass::Stateless, None);
        let other = store.acquire(&stateless("w1")).await.unwrap().unwrap();
        let sub = reserve
            .grant(LeaseClass::Identity, SECOND, 2, anything, Instant::now())
            .unwrap();
        assert_ne!(
            sub.unit, other.unit,
            "the store grants only the unreserved unit"
        );
        assert!(
            store.acquire(&stateless("w2")).await.unwrap().is_some(),
            "c shares"
        );
        assert!(store.acquire(&stateless("w3")).await.unwrap().is_none());
        // Renewed, they stay reserved past their first time to live.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        assert_eq!(
            reserve.keep(&store, "reserve:t", 3_600_000).await.unwrap(),
            2
        );
        tokio::time::sleep(2 * SECOND).await;
        assert!(store.acquire(&stateless("w4")).await.unwrap().is_none());
    }

    #[test]
    fn the_store_expiry_is_never_seen_later_than_it_can_be() {
        let sent = Instant::now();
        let clock = Clock {
            store_ms: 5_000,
            sent,
        };
        assert_eq!(clock.soonest(8_000), sent + 3 * SECOND);
        assert_eq!(clock.soonest(4_000), sent, "a time already past is now");
        assert_eq!(clock.latest(sent + 2 * SECOND), 7_000);
    }
}
