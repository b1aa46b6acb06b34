//! The bounded observation queue and the batching writer behind it.
//!
//! Connections never wait on the database: they `try_send` onto a bounded queue, and a full
//! queue is a counted drop. One writer task takes jobs off the queue, parses what still needs
//! parsing (connection records), commits observations in batches of up to `batch_size` — a batch
//! is committed when full or `flush_interval` after its first job — and writes the
//! `--record-dir` files. On [`WriterHandle::close`] it stops taking new jobs, drains what is
//! queued, commits it, and ends.

use std::path::PathBuf;
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

/// The connections' side of the queue.
#[derive(Clone, Debug)]
pub(crate) struct WriterHandle {
    tx: mpsc::Sender<Job>,
    metrics: Arc<Metrics>,
    recording: bool,
    close: Arc<Notify>,
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
        match self.tx.try_send(job) {
            Ok(()) => self.metrics.queued(),
            Err(_) => self.metrics.queue_drop(),
        }
    }

    /// Observations waiting in the queue.
    pub(crate) fn depth(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
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
    let handle = WriterHandle {
        tx,
        metrics: Arc::clone(&metrics),
        recording: record_dir.is_some(),
        close: Arc::clone(&close),
    };
    let writer = Writer {
        store,
        config,
        record_dir,
        metrics,
    };
    (handle, tokio::spawn(writer.run(rx, close)))
}

struct Writer {
    store: Store,
    config: WriterConfig,
    record_dir: Option<PathBuf>,
    metrics: Arc<Metrics>,
}

impl Writer {
    async fn run(self, mut rx: mpsc::Receiver<Job>, close: Arc<Notify>) {
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
                        Ok(job) => jobs.push(job),
                        Err(_) => break,
                    }
                    continue;
                }
                tokio::select! {
                    job = rx.recv() => match job {
                        Some(job) => jobs.push(job),
                        None => break,
                    },
                    () = tokio::time::sleep_until(deadline) => break,
                    () = close.notified() => {
                        closing = true;
                        rx.close();
                    }
                }
            }
            self.commit(jobs).await;
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
