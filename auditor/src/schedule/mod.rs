//! Runs: a direct baseline, then K samples per exit, under limits.
//!
//! A run, in order ([`run`]):
//! 1. the direct baseline ([`baseline`]): one probe straight to the echo, and its QUIC probe;
//! 2. rounds of one task per selected exit, a bounded number alive at once, until every exit is
//!    done in the period, by this run or another auditor on the database ([`claims`]); each task
//!    ([`sample`]) claims its exit, then probes its samples one after another ([`retry`]),
//!    handing each record to the store's writer ([`sink`]) as soon as it is made;
//! 3. the labels snapshot ([`snapshot`]), from each exit's stored window, published by one
//!    auditor of those sharing the database.
//!
//! Runs follow one another ([`Runs`]): once, or a full run per period with jitter and
//! re-checks of the exits whose label just changed in between.
//!
//! - Every sample is its own probe (new connection, new token), spaced by
//!   [`RunConfig::spacing`] plus up to [`RunConfig::jitter`] of random delay.
//! - The samples of one exit run one after another, so no two probes ever share an exit (or a
//!   gateway session) at once; an in-flight registry ([`inflight`]) counts violations anyway,
//!   and the count is reported (it must be 0).
//! - A global semaphore caps concurrent probes ([`RunConfig::concurrency`]).
//! - Transient failures (timeouts, resets, DNS) are retried with exponential backoff, at most
//!   [`RunConfig::retries`] times; auth, refusals, TLS and bad echoes are not.
//! - A gateway session that fails gets a fresh session id; the failed id is never used again.
//! - Records go to the store as their probes finish ([`sink`]); an exit's task lives from its
//!   first sample to its last, a few per probe slot at once, so a run keeps per waiting exit
//!   only the exit itself. The labels are computed afterwards from each exit's stored window,
//!   one exit at a time, and written to the store as they are made: a run holds one label,
//!   and the pool's figures as counts.

mod baseline;
mod cadence;
mod claims;
mod config;
mod inflight;
mod outcomes;
mod report;
mod retry;
mod run;
mod sample;
mod sink;
mod snapshot;

pub use cadence::Runs;
pub use config::{Persona, Progress, RunConfig};
pub use outcomes::Outcomes;
pub use report::{RunError, RunReport};
pub use run::{new_run_id, run_once, run_some};
pub use snapshot::{store_labels, StoredLabels};
