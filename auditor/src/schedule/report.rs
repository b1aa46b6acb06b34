//! What a run returns: its report, or why it could not complete.

use exitvoice_schema::ProbeRecord;
use exitvoice_store::StoreError;

use super::outcomes::Outcomes;
use super::snapshot::StoredLabels;

/// What a run did.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The run id.
    pub run_id: String,
    /// The baseline probe.
    pub baseline: ProbeRecord,
    /// The run's exit probes by outcome (the records themselves are in the store).
    pub outcomes: Outcomes,
    /// Times two probes were in flight through the same exit or session. Must be 0.
    pub violations: u64,
    /// Exits this run claimed and probed.
    pub claimed: u64,
    /// Exits of the run that other auditors on the database probed (or had probed in the
    /// period) instead.
    pub left_to_others: u64,
    /// The labels after the run, in the store.
    pub labels: StoredLabels,
}

/// Why a run could not complete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A probe task panicked or was cancelled.
    #[error("a probe task ended abnormally")]
    Task,
}
