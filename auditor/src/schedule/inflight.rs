//! The in-flight registry: which exits (and gateway sessions) have a probe in flight, and how
//! often two probes shared one at once (a run reports it; it must be 0).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use exitvoice_exits::Exit;

/// Keys of the exits (and gateway sessions) with a probe in flight.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    keys: Mutex<HashSet<String>>,
    violations: AtomicU64,
}

/// One probe in flight, until dropped.
pub(super) struct InFlightGuard<'a> {
    registry: &'a InFlight,
    key: String,
}

impl InFlight {
    /// Registers a probe under `key` ([`in_flight_key`]), counting a violation if another is in
    /// flight there.
    pub fn enter(&self, key: String) -> InFlightGuard<'_> {
        let fresh = self
            .keys
            .lock()
            .map(|mut keys| keys.insert(key.clone()))
            .unwrap_or(true);
        if !fresh {
            self.violations.fetch_add(1, Ordering::Relaxed);
        }
        InFlightGuard {
            registry: self,
            key,
        }
    }

    /// Times two probes were in flight through the same exit or session.
    pub fn violations(&self) -> u64 {
        self.violations.load(Ordering::Relaxed)
    }
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut keys) = self.registry.keys.lock() {
            keys.remove(&self.key);
        }
    }
}

/// The key of a probe through `exit`: its gateway session, else its name.
pub(super) fn in_flight_key(exit: &Exit) -> String {
    match &exit.session {
        Some(session) => format!("{}\u{0}{}", exit.redacted_url(), session.id),
        None => exit.name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_counts_overlaps_only() {
        let registry = InFlight::default();
        {
            let _a = registry.enter("x".into());
            let _b = registry.enter("y".into());
        }
        let _c = registry.enter("x".into());
        assert_eq!(registry.violations.load(Ordering::Relaxed), 0);
        let _d = registry.enter("x".into());
        assert_eq!(registry.violations.load(Ordering::Relaxed), 1);
    }
}
