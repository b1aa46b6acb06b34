//! The moment a lease's tunnels must stop moving bytes, by this instance's own clock.
//!
//! The store ends a lease at its expiry whatever this instance does, and may grant the exit to
//! the next holder at once. So a tunnel must not depend on the store being asked in time to
//! stop: each lease carries its deadline — the store's expiry as seen from before the call that
//! set it, less [`AHEAD`] — and every write to the exit checks it. A stalled check loop, a
//! store that does not answer or a process stopped and resumed past the deadline then writes
//! nothing more to the exit once the lease may be someone else's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How far ahead of the store's expiry (as this instance sees it) tunnels stop: room for the
/// moment between the check and the write, and for two clocks' rates.
pub const AHEAD: Duration = Duration::from_millis(100);

/// A lease's expiry as this instance counts it, and the deadline [`AHEAD`] of it; moved on by
/// its renewals.
#[derive(Debug)]
pub struct Deadline {
    base: Instant,
    /// The expiry, ms since `base` (rounded down: never later than the store's).
    expires_ms: AtomicU64,
}

impl Deadline {
    /// A deadline for a lease that the store ends at `expires` (this instance's clock).
    pub fn new(expires: Instant) -> Self {
        let deadline = Self {
            base: Instant::now(),
            expires_ms: AtomicU64::new(0),
        };
        deadline.set(expires);
        deadline
    }

    /// The store ends the lease at `expires` now (a renewal's answer).
    pub fn set(&self, expires: Instant) {
        self.expires_ms.store(self.ms(expires), Ordering::Release);
    }

    /// The store ends the lease at `expires` or later (a grant of a lease held here already).
    pub fn extend(&self, expires: Instant) {
        self.expires_ms
            .fetch_max(self.ms(expires), Ordering::AcqRel);
    }

    fn ms(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_millis()).unwrap_or(u64::MAX)
    }

    /// When the store ends the lease unless renewed, by this instance's clock.
    pub fn expires(&self) -> Instant {
        self.base + Duration::from_millis(self.expires_ms.load(Ordering::Acquire))
    }

    /// When tunnels must have stopped: [`AHEAD`] of the expiry.
    pub fn at(&self) -> Instant {
        self.expires()
            .checked_sub(AHEAD)
            .unwrap_or(self.base)
            .max(self.base)
    }

    /// `true` once the deadline has passed.
    pub fn passed(&self) -> bool {
        Instant::now() >= self.at()
    }

    /// Resolves once the deadline has passed (it may move on while this waits).
    pub async fn passes(&self) {
        loop {
            let at = self.at();
            if Instant::now() >= at {
                return;
            }
            tokio::time::sleep_until(at.into()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_ahead_of_the_expiry_and_moves_with_renewals() {
        let now = Instant::now();
        let deadline = Deadline::new(now + Duration::from_secs(2));
        let at = deadline.at();
        assert!(at <= now + Duration::from_secs(2) - AHEAD);
        assert!(at + Duration::from_millis(2) >= now + Duration::from_secs(2) - AHEAD);
        assert!(!deadline.passed());
        deadline.set(now + Duration::from_secs(5));
        assert!(deadline.at() > at + Duration::from_secs(2));
    }

    #[test]
    fn an_expiry_already_near_has_passed() {
        let deadline = Deadline::new(Instant::now() + AHEAD / 2);
        assert!(deadline.passed());
    }

    #[tokio::test]
    async fn passes_waits_for_a_deadline_moved_on() {
        let start = Instant::now();
        let deadline =
            std::sync::Arc::new(Deadline::new(start + AHEAD + Duration::from_millis(100)));
        let waiting = tokio::spawn({
            let deadline = deadline.clone();
            async move { deadline.passes().await }
        });
        deadline.set(start + AHEAD + Duration::from_millis(400));
        waiting.await.unwrap();
        assert!(start.elapsed() >= Duration::from_millis(400));
    }
}
