//! The wait queues of acquires: one per class and country asked for.

use std::sync::atomic::{AtomicUsize, Ordering};

use exitvoice_lease::LeaseClass;
use tokio::sync::Semaphore;

/// The waiters for one class in one country (or in any): served in arrival order (tokio's
/// semaphore is fair). A request for a country no unit is free in waits behind others of its
/// own kind only.
pub(super) struct Queue {
    pub(super) turn: Semaphore,
    /// Requests in the queue: while there are any, a new request queues behind them instead of
    /// asking the store first.
    pub(super) queued: AtomicUsize,
}

/// A queue's class and country (`None`: any).
pub(super) type QueueKey = (LeaseClass, Option<String>);

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
