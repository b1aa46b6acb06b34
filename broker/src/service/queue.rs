//! The wait queues of acquires: one per class, country and gap limit asked for.

use std::sync::atomic::{AtomicUsize, Ordering};

use exitvoice_lease::LeaseClass;
use tokio::sync::Semaphore;

/// The waiters for one class in one country (or in any) within one gap limit (or none):
/// served in arrival order (tokio's semaphore is fair). A request for a country or a gap no
/// unit is free for waits behind others of its own kind only.
pub(super) struct Queue {
    pub(super) turn: Semaphore,
    /// Requests in the queue: while there are any, a new request queues behind them instead of
    /// asking the store first.
    pub(super) queued: AtomicUsize,
}

/// What an acquire asks of its unit besides the class.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Wanted {
    /// The country it must leave from, upper case (`None`: any).
    pub(super) country: Option<String>,
    /// The largest round-trip gap it may have, ms (`None`: any, measured or not).
    pub(super) max_gap_ms: Option<u32>,
}

/// A queue's class and what else its requests ask for.
pub(super) type QueueKey = (LeaseClass, Wanted);

/// Past this many queues, those no request is in are dropped as a new one is made: a gap
/// limit is a number, so the queues asked for are not bounded by the countries.
pub(super) const MOST_IDLE_QUEUES: usize = 1024;

/// A request counted in its queue until it leaves, however it leaves (a client that hangs up
/// drops it mid-wait).
pub(super) struct InQueue<'a>(&'a AtomicUsize);

impl<'a> InQueue<'a> {
    pub(super) fn join(queued: &'a AtomicUsize) -> Self {
        queued.fetch_add(1, Ordering::AcqRel);
        Self(queued)
    }
}

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
