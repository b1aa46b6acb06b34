//! The run's probe writer: each record goes to the store as soon as its probe finished, through
//! a bounded channel to one writer task, so a run holds at most `capacity` records at once
//! whatever the number of exits (a run used to keep every record until its end: ~100 KB per
//! probe with the full echo, 430 KB per exit at 4 samples).
//!
//! One writer, not one insert per probe task: SQLite takes one writer at a time, and probe
//! tasks that contended for its lock would wait in the busy handler instead of probing.

use exitvoice_schema::{ProbeRecord, Store, StoreError};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::outcomes::Outcomes;
use super::RunError;

/// Where probe tasks hand their records.
#[derive(Clone, Debug)]
pub(super) struct Sink {
    sender: mpsc::Sender<ProbeRecord>,
}

/// The writer task: every record stored, counted by outcome; or the store's first failure.
#[derive(Debug)]
pub(super) struct Writer(JoinHandle<Result<Outcomes, StoreError>>);

/// Starts the writer on `store`, with room for `capacity` records in flight to it.
pub(super) fn spawn(store: Store, capacity: usize) -> (Sink, Writer) {
    let (sender, mut receiver) = mpsc::channel::<ProbeRecord>(capacity.max(1));
    let writer = tokio::spawn(async move {
        let mut outcomes = Outcomes::default();
        while let Some(record) = receiver.recv().await {
            store.insert_probe(&record).await?;
            outcomes.count(&record);
        }
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
