//! The run's probe writer: each record goes to the store as soon as its probe finished, through
//! a bounded channel to one writer task, so a run holds at most `capacity` records at once
//! whatever the number of exits (a run used to keep every record until its end: ~100 KB per
//! probe with the full echo, 430 KB per exit at 4 samples).
//!
//! One writer, not one insert per probe task: SQLite takes one writer at a time, and probe
//! tasks that contended for its lock would wait in the busy handler instead of probing. The
//! writer stores what queued meanwhile in one transaction ([`MAX_BATCH`]).

use exitvoice_schema::ProbeRecord;
use exitvoice_store::{Store, StoreError};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::outcomes::Outcomes;
use super::report::RunError;

/// Most records stored in one transaction: whatever queued while the previous batch was
/// written, up to this. With one commit per record the writer was busy 26 s of a 10,000-exit
/// run's 29 s; batched, 19 s (docs/benchmarks.md).
const MAX_BATCH: usize = 64;

/// Where probe tasks hand their records.
#[derive(Clone, Debug)]
pub(super) struct Sink {
    sender: mpsc::Sender<ProbeRecord>,
}

/// The writer task: every record stored, counted by outcome; or the store's first failure.
#[derive(Debug)]
pub(super) struct Writer(JoinHandle<Result<Outcomes, StoreError>>);

/// Starts the writer on `store`, with room for `capacity` records queued to it (and up to
/// [`MAX_BATCH`] more being written).
pub(super) fn spawn(store: Store, capacity: usize) -> (Sink, Writer) {
    let (sender, mut receiver) = mpsc::channel::<ProbeRecord>(capacity.max(1));
    let writer = tokio::spawn(async move {
        let mut outcomes = Outcomes::default();
        // Time spent in the store: next to the run's wall time, whether the store keeps up.
        let mut busy = std::time::Duration::ZERO;
        let mut batch = Vec::with_capacity(MAX_BATCH);
        while receiver.recv_many(&mut batch, MAX_BATCH).await > 0 {
            let started = std::time::Instant::now();
            store.insert_probes(&batch).await?;
            busy += started.elapsed();
            batch.drain(..).for_each(|record| outcomes.count(&record));
        }
        tracing::info!(
            probes = outcomes.total(),
            store_seconds = busy.as_secs_f64(),
            "probe records stored"
        );
        Ok(outcomes)
    });
    (Sink { sender }, Writer(writer))
}

impl Sink {
    /// Hands `record` to the writer, waiting while the channel is full. `false` when the writer
    /// stopped (the store failed): the run is lost, its probe tasks should stop.
    pub(super) async fn store(&self, record: ProbeRecord) -> bool {
        self.sender.send(record).await.is_ok()
    }
}

impl Writer {
    /// Waits until every record handed over is stored (all [`Sink`]s must be dropped first).
    ///
    /// # Errors
    /// The store's first failure; [`RunError::Task`] if the writer task ended abnormally.
    pub(super) async fn finish(self) -> Result<Outcomes, RunError> {
        Ok(self.0.await.map_err(|_| RunError::Task)??)
    }
}
