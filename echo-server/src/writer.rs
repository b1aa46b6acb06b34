//! The bounded observation queue and the batching writer behind it.
//!
//! Connections never wait on the database: they `try_send` onto a bounded queue, and a full
//! queue is a counted drop. One writer task takes jobs off the queue, parses what still needs
//! parsing (connection records), commits observations in batches of up to `batch_size` — a batch
//! is committed when full or `flush_interval` after its first job — and writes the
//! `--record-dir` files. The raw bytes held by queued and uncommitted observations are capped
//! (`--queue-bytes`): over the cap an observation is dropped and counted, as on a full queue. On
//! [`WriterHandle::close`] it stops taking new jobs, drains what is queued, commits it, and ends.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use exitvoice_schema::{ConnectionRecord, Observation, Store};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::analysis;
use crate::capture::Connection;
use crate::config::WriterConfig;
use crate::metrics::Metrics;

/// One unit of work for the writer.
#[derive(Debug)]
pub(crate) enum Job {
    /// A request's observation, already built by its handler.
    Request(Box<Observation>),
    /// A connection that ended; stored as an observation if none of its requests was, and written
    /// to `--record-dir`.
    Connection {
        /// The connection.
        conn: Arc<Connection>,
        /// Why it failed, if it did.
        failure: Option<String>,
    },
}

impl Job {
    /// Raw bytes the job holds (what the `--queue-bytes` budget counts).
    fn raw_bytes(&self) -> usize {
        match self {
            Self::Request(observation) => observation.hello.len() + observation.prefix.len(),
            Self::Connection { conn, .. } => conn.hello.len() + conn.tap.len(),
        }
    }
}

/// A queued job and the bytes it took from the budget.
#[derive(Debug)]
struct Queued {
    job: Job,
    bytes: usize,
}

/// The connections' side of the queue.
#[derive(Clone, Debug)]
pub(crate) struct WriterHandle {
    tx: mpsc::Sender<Queued>,
    metrics: Arc<Metrics>,
    recording: bool,
    close: Arc<Notify>,
    /// Raw bytes held by queued jobs right now.
    bytes: Arc<AtomicUsize>,
    max_bytes: usize,
}

impl WriterHandle {
    /// Queues `job` without waiting; a full or closed queue counts a drop.
    pub(crate) fn submit(&self, job: Job) {
        if let Job::Connection {
            conn,
            failure: None,
        } = &job
        {
            // Its requests are stored already; only `--record-dir` still wants it.
            if conn.observed() > 0 && !self.recording {
                return;
            }
        }
        let bytes = job.raw_bytes();
        let held = self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if held.saturating_add(bytes) > self.max_bytes {
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            self.metrics.queue_drop();
            return;
        }
        match self.tx.try_send(Queued { job, bytes }) {
            Ok(()) => self.metrics.queued(),
            Err(_) => {
                self.bytes.fetch_sub(bytes, Ordering::Relaxed);
                self.metrics.queue_drop();
            }
        }
    }

    /// Observations waiting in the queue.
    pub(crate) fn depth(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }

    /// Raw bytes held by queued and not yet committed observations.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Queue capacity.
    pub(crate) fn capacity(&self) -> usize {
        self.tx.max_capacity()
    }

    /// Tells the writer to drain the queue, commit, and end.
    pub(crate) fn close(&self) {
        self.close.notify_one();
    }
}

/// Starts the writer task.
pub(crate) fn spawn(
    store: Store,
    config: WriterConfig,
    record_dir: Option<PathBuf>,
    metrics: Arc<Metrics>,
) -> (WriterHandle, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(config.queue_size.max(1));
    let close = Arc::new(Notify::new());
    let bytes = Arc::new(AtomicUsize::new(0));
    let handle = WriterHandle {
        tx,
        metrics: Arc::clone(&metrics),
        recording: record_dir.is_some(),
        close: Arc::clone(&close),
        bytes: Arc::clone(&bytes),
        max_bytes: config.queue_bytes,
    };
    let writer = Writer {
        store,
        config,
        record_dir,
        metrics,
        bytes,
    };
    (handle, tokio::spawn(writer.run(rx, close)))
}

struct Writer {
    store: Store,
    config: WriterConfig,
    record_dir: Option<PathBuf>,
    metrics: Arc<Metrics>,
    /// The handle's byte count, given back once a batch is committed.
    bytes: Arc<AtomicUsize>,
}

impl Writer {
    async fn run(self, mut rx: mpsc::Receiver<Queued>, close: Arc<Notify>) {
        let batch_size = self.config.batch_size.max(1);
        let mut closing = false;
        loop {
            let first = if closing {
                rx.recv().await
            } else {
                tokio::select! {
                    job = rx.recv() => job,
                    () = close.notified() => {
                        closing = true;
                        rx.close();
                        continue;
                    }
                }
            };
            let Some(first) = first else { break };
            let deadline = Instant::now() + self.config.flush_interval;
            let mut jobs = vec![first];
            while jobs.len() < batch_size {
                if closing {
                    match rx.try_recv() {
                        Ok(queued) => jobs.push(queued),
                        Err(_) => break,
                    }
                    continue;
                }
                tokio::select! {
                    job = rx.recv() => match job {
                        Some(queued) => jobs.push(queued),
                        None => break,
                    },
                    () = tokio::time::sleep_until(deadline) => break,
                    () = close.notified() => {
                        closing = true;
                        rx.close();
                    }
                }
            }
            // The batch's bytes count against the budget until it is committed (or failed).
            let bytes = jobs.iter().map(|queued| queued.bytes).sum::<usize>();
            self.commit(jobs.into_iter().map(|queued| queued.job).collect())
                .await;
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
        }
        tracing::debug!("observation writer drained");
    }

    async fn commit(&self, jobs: Vec<Job>) {
        let mut rows = Vec::with_capacity(jobs.len());
        for job in jobs {
            match job {
                Job::Request(observation) => rows.push(*observation),
                Job::Connection { conn, failure } => {
                    if let Some(dir) = &self.record_dir {
                        let record =
                            analysis::connection_record(&conn, &self.metrics, failure.as_deref());
                        self.record(dir, &conn, &record).await;
                    }
                    if conn.observed() == 0 {
                        let summary =
                            analysis::connection_summary(&conn, &self.metrics, failure.as_deref());
                        rows.push(analysis::connection_observation(
                            &conn,
                            &self.metrics,
                            failure,
                            summary,
                        ));
                    }
                }
            }
        }
        if rows.is_empty() {
            return;
        }
        match self.store.insert_observations(&rows).await {
            Ok(()) => self.metrics.written(rows.len()),
            Err(error) => {
                self.metrics.write_failure(rows.len());
                tracing::error!(%error, lost = rows.len(), "observation batch not stored");
            }
        }
    }

    /// Writes `<id>.hello.bin`, `<id>.prefix.bin` and `<id>.json` under `dir`.
    async fn record(&self, dir: &std::path::Path, conn: &Connection, record: &ConnectionRecord) {
        let json = match serde_json::to_vec_pretty(record) {
            Ok(json) => json,
            Err(_) => {
                self.metrics.record_failure();
                return;
            }
        };
        let files = [
            (format!("{}.hello.bin", conn.id), conn.hello.to_vec()),
            (
                format!("{}.prefix.bin", conn.id),
                conn.tap.snapshot().to_vec(),
            ),
            (format!("{}.json", conn.id), json),
        ];
        for (name, contents) in files {
            if let Err(error) = tokio::fs::write(dir.join(&name), contents).await {
                self.metrics.record_failure();
                tracing::warn!(%error, file = %name, "record file not written");
            }
        }
    }
}
