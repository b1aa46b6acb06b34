//! When runs happen, one after another: without a period, one run; with a period (`audit
//! --every`), a full run every period with ±10 % jitter, so that auditors started together drift
//! apart, and between two full runs re-checks of the exits whose drift state, route or
//! coherence just changed, `recheck` after the run that saw the change, until they settle, as
//! long as that comes before the next full run.

use std::time::Duration;

use exitvoice_exits::{EchoTarget, Exit, SessionMinter};
use exitvoice_store::Store;
use rand::Rng;
use tokio::time::Instant;

use super::config::RunConfig;
use super::report::{RunError, RunReport};
use super::run::{run_once, run_some};

/// Share of the period a full run may come early or late by.
const JITTER: f64 = 0.1;

/// The runs of one auditor process, and when the next one is due.
pub struct Runs {
    exits: Vec<Exit>,
    minter: SessionMinter,
    every: Option<Duration>,
    recheck: Duration,
    /// `None`: the next run is a full one; `Some(names)`: a re-check of these exits.
    next_scope: Option<Vec<String>>,
    next_full: Instant,
}

impl Runs {
    /// Runs over `exits`: once without `every`, or one full run per `every` with re-checks
    /// `recheck` after a change.
    pub fn new(exits: Vec<Exit>, every: Option<Duration>, recheck: Duration) -> Self {
        Self {
            exits,
            minter: SessionMinter::new(),
            every,
            recheck,
            next_scope: None,
            next_full: Instant::now(),
        }
    }

    /// Whether the next run re-checks some exits rather than probing them all.
    pub fn is_recheck(&self) -> bool {
        self.next_scope.is_some()
    }

    /// Makes the next run: every exit, or the exits to re-check.
    ///
    /// # Errors
    /// The run's ([`run_once`]).
    pub async fn run(
        &mut self,
        echo: &EchoTarget,
        config: &RunConfig,
        store: &Store,
    ) -> Result<RunReport, RunError> {
        let (exits, minter) = (&mut self.exits, &mut self.minter);
        match &self.next_scope {
            None => run_once(exits, echo, config, store, minter).await,
            Some(names) => run_some(exits, names, echo, config, store, minter).await,
        }
    }

    /// After a run whose labels left `unsettled` exits: when the next run starts, or `None`
    /// when there is none (no period).
    pub fn plan(&mut self, unsettled: Vec<String>) -> Option<Instant> {
        let every = self.every?;
        let spread = every.as_secs_f64() * JITTER;
        let jitter = rand::rng().random_range(-spread..=spread);
        let (wake, scope) = next_run(
            Instant::now(),
            every,
            jitter,
            self.recheck,
            &mut self.next_full,
            self.next_scope.is_some(),
            unsettled,
        );
        self.next_scope = scope;
        Some(wake)
    }
}

/// The rule: after a full run the next full one is due a period (plus `jitter` seconds, at
/// least 1 s) after the one before; exits left `unsettled` are re-checked `recheck` from `now`
/// when that comes before it. Returns when to wake and which exits to probe then (`None`: all).
fn next_run(
    now: Instant,
    every: Duration,
    jitter: f64,
    recheck: Duration,
    next_full: &mut Instant,
    was_recheck: bool,
    unsettled: Vec<String>,
) -> (Instant, Option<Vec<String>>) {
    if !was_recheck {
        *next_full += Duration::from_secs_f64((every.as_secs_f64() + jitter).max(1.0));
    }
    if !unsettled.is_empty() && now + recheck < *next_full {
        (now + recheck, Some(unsettled))
    } else {
        ((*next_full).max(now), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);
    const RECHECK: Duration = Duration::from_secs(300);

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|&n| n.to_owned()).collect()
    }

    /// One row per case: what the last run was and left unsettled, and what comes next.
    #[test]
    fn the_next_run_is_a_recheck_only_before_the_next_full_run() {
        let start = Instant::now();
        // A full run at `start` that settled everything: the next full run, a period on.
        let mut next_full = start;
        let (wake, scope) = next_run(start, HOUR, 0.0, RECHECK, &mut next_full, false, vec![]);
        assert_eq!((wake, scope), (start + HOUR, None));

        // A full run that left `a` unsettled: `a` again after the re-check delay.
        let mut next_full = start;
        let (wake, scope) = next_run(
            start,
            HOUR,
            0.0,
            RECHECK,
            &mut next_full,
            false,
            names(&["a"]),
        );
        assert_eq!((wake, scope), (start + RECHECK, Some(names(&["a"]))));

        // A re-check does not move the next full run; `a` still unsettled: again.
        let now = start + RECHECK;
        let (wake, scope) = next_run(now, HOUR, 0.0, RECHECK, &mut next_full, true, names(&["a"]));
        assert_eq!((wake, scope), (now + RECHECK, Some(names(&["a"]))));
        assert_eq!(next_full, start + HOUR);

        // A re-check that would come after the next full run gives way to it.
        let now = start + HOUR - Duration::from_secs(60);
        let (wake, scope) = next_run(now, HOUR, 0.0, RECHECK, &mut next_full, true, names(&["a"]));
        assert_eq!((wake, scope), (start + HOUR, None));

        // A full run that overran its period: the next one at once, never in the past.
        let mut next_full = start;
        let late = start + 2 * HOUR;
        let (wake, _) = next_run(late, HOUR, 0.0, RECHECK, &mut next_full, false, vec![]);
        assert_eq!(wake, late);
    }

    #[test]
    fn full_runs_keep_to_the_period_give_or_take_the_jitter() {
        let start = Instant::now();
        let mut next_full = start;
        let (wake, _) = next_run(start, HOUR, -360.0, RECHECK, &mut next_full, false, vec![]);
        assert_eq!(wake, start + HOUR - Duration::from_secs(360));
        // Counted from the previous due time, not from when the run ended: no drift.
        let (wake, _) = next_run(wake, HOUR, 360.0, RECHECK, &mut next_full, false, vec![]);
        assert_eq!(wake, start + 2 * HOUR);
        // However short the period and large the jitter, at least a second apart.
        let mut next_full = start;
        let second = Duration::from_secs(1);
        let (wake, _) = next_run(start, second, -5.0, RECHECK, &mut next_full, false, vec![]);
        assert_eq!(wake, start + second);
    }

    #[tokio::test]
    async fn without_a_period_there_is_one_run() {
        let mut runs = Runs::new(Vec::new(), None, RECHECK);
        assert!(runs.plan(names(&["a"])).is_none());
        let mut runs = Runs::new(Vec::new(), Some(HOUR), RECHECK);
        assert!(runs.plan(names(&["a"])).is_some());
        assert!(runs.is_recheck());
    }
}
