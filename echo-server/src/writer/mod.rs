//! The bounded observation queue and the batching writer behind it.
//!
//! Connections never wait on the database: they `try_send` onto a bounded queue, and a full
//! queue (or the `--queue-bytes` budget) is a drop counted by reason. Four kinds of job: a
//! request's small record; a connection's row when its first request was answered (so its
//! requests are listed while it stays open); the connection's end, which updates its row
//! only when something changed (a failure, more requests) and analyses a
//! connection that carried no request; and an HTTP/3 request, with its QUIC connection's row
//! when it is the connection's first. One writer task commits them in batches of up to
//! `batch_size` — when full or `flush_interval` after the first job — and writes the
//! `--record-dir` files. Every second while it writes or prunes (every minute while idle) it
//! prunes what `--retain` and `--max-db-size` say must go, a few batches of 1,000 rows at most,
//! and measures the database for `/healthz`; every second it writes the h3 ledger's identities
//! that changed. On
//! [`WriterHandle::close`] it stops taking new jobs, drains what is queued, commits it, and ends.
//!
//! Each file imports only those above it: `rows` (a connection's row and record, from its
//! analysis), `files` (the `--record-dir` files), this one (the queue and the writer task).

mod files;
mod rows;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use exitvoice_schema::{ConnectionRow, RequestRecord};
use exitvoice_store::Store;
use exitvoice_store::{Batch, LedgerRow, QuicConnectionRow, QuicRequestRow};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use crate::capture::{Connection, Failed, RecordSink};
use crate::clock::now_ms;
use crate::config::WriterConfig;
use crate::ledger::Ledger;
use crate::metrics::{DropReason, Metrics};
use rows::{connection_record, connection_row};

/// How often the writer prunes and measures the database while it writes.
const MAINTENANCE_EVERY: Duration = Duration::from_secs(1);
/// How often it does while nothing is written: the size stands still, and rows age out by the
/// day, so an idle server does not wake its database every second.
const IDLE_MAINTENANCE_EVERY: Duration = Duration::from_secs(60);
/// Rows deleted per table per pruning statement: small, so inserts never wait long.
const PRUNE_BATCH: u32 = 1000;
/// Pruning statements per maintenance tick at most (up to 10,000 rows a second per table).
const PRUNE_ROUNDS: usize = 10;

/// One unit of work for the writer.
#[derive(Debug)]
pub(crate) enum Job {
    /// A request, as its handler recorded it (shared with the handler's answer, not copied).
    Request(Arc<RequestRecord>),
    /// The row of a connection whose first request was answered, built then ([`connection_row`]):
    /// stored now, so its requests are listed while it stays open. The row, not the connection,
    /// waits in the queue: the connection's buffers are freed when it ends, by its own task.
    Opened(Box<ConnectionRow>),
    /// A connection that ended: stored (or its row updated) and written to `--record-dir`.
    Closed {
        /// The connection.
        conn: Arc<Connection>,
        /// Why it failed, if it did.
        failure: Option<Failed>,
    },
    /// An HTTP/3 request, with its QUIC connection's row when it is the connection's first.
    Quic {
        /// The connection's row (first request only).
        connection: Option<Box<QuicConnectionRow>>,
        /// The request.
        request: Box<QuicRequestRow>,
    },
}

impl Job {
    /// Bytes the job holds (what the `--queue-bytes` budget counts).
    fn bytes(&self) -> usize {
        match self {
            Self::Request(request) => {
                std::mem::size_of::<RequestRecord>()
                    + request.path.len()
                    + request.token.as_ref().map_or(0, String::len)
                    + request.header_order.iter().map(String::len).sum::<usize>()
            }
            Self::Opened(row) => row.hello.len() + row.prefix.len(),
            Self::Closed { conn, .. } => conn.hello.len() + conn.tap.len(),
            Self::Quic {
                connection,
                request,
            } => {
                std::mem::size_of::<QuicRequestRow>()
                    + request.path.len()
                    + request.header_order.iter().map(String::len).sum::<usize>()
                    + connection.as_ref().map_or(0, |c| {
                        c.hello.len()
                            + c.quic.as_ref().map_or(0, String::len)
                            + c.http3.as_ref().map_or(0, String::len)
                    })
            }
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
    /// Queues the row of `conn`, whose first request was answered, and notes what it counts.
    pub(crate) fn submit_opened(&self, conn: &Connection) {
        let row = connection_row(conn, None, &self.metrics);
        let requests = row.requests;
        if self.submit(Job::Opened(Box::new(row))) {
            conn.note_queued(requests);
        }
    }

    /// Queues `job` without waiting; a full queue, the byte budget or a closed queue counts a
    /// drop by reason. Whether it was queued.
    pub(crate) fn submit(&self, job: Job) -> bool {
        if let Job::Closed {
            conn,
            failure: None,
        } = &job
        {
            // Stored by its first request and unchanged since: only `--record-dir` wants it.
            if conn.unchanged_since_queued() && !self.recording {
                return false;
            }
        }
        // A request, or a connection without one, is an observation; a connection row whose
        // requests are stored on their own is not (its requests still list, without its facts).
        let observation = match &job {
            Job::Request(_) | Job::Quic { .. } => true,
            Job::Opened(_) => false,
            Job::Closed { conn, .. } => conn.requests() == 0,
        };
        let dropped = |reason| {
            if observation {
                self.metrics.queue_drop(reason);
            } else {
                self.metrics.connection_row_drop();
            }
        };
        let bytes = job.bytes();
        let held = self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if held.saturating_add(bytes) > self.max_bytes {
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            dropped(DropReason::QueueBytes);
            return false;
        }
        match self.tx.try_send(Queued { job, bytes }) {
            Ok(()) => {
                self.metrics.queued();
                true
            }
            Err(error) => {
                self.bytes.fetch_sub(bytes, Ordering::Relaxed);
                dropped(match error {
                    mpsc::error::TrySendError::Full(_) => DropReason::QueueFull,
                    mpsc::error::TrySendError::Closed(_) => DropReason::Closed,
                });
                false
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

/// Where capture hands each ended connection: onto the queue.
impl RecordSink for WriterHandle {
    fn closed(&self, conn: Arc<Connection>, failure: Option<Failed>) {
        self.submit(Job::Closed { conn, failure });
    }
}

/// Starts the writer task.
pub(crate) fn spawn(
    store: Store,
    config: WriterConfig,
    record_dir: Option<PathBuf>,
    metrics: Arc<Metrics>,
    ledger: Arc<Ledger>,
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
        ledger,
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
    /// The h3 downgrade ledger: its changed identities are written every second.
    ledger: Arc<Ledger>,
}

impl Writer {
    async fn run(self, mut rx: mpsc::Receiver<Queued>, close: Arc<Notify>) {
        let batch_size = self.config.batch_size.max(1);
        let mut closing = false;
        let mut maintenance = tokio::time::interval(MAINTENANCE_EVERY);
        maintenance.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Whether a batch was committed, or rows were pruned, since the last maintenance (the
        // first tick maintains).
        let mut busy = true;
        let mut maintained = tokio::time::Instant::now();
        // One buffer for every batch, and one batch: a batch's vectors of rows (a request row
        // is a few hundred bytes, so a full batch's is tens of KiB) are not allocated and freed
        // again for each commit.
        let mut queued = Vec::with_capacity(batch_size);
        let mut batch = Batch::default();
        loop {
            let received = if closing {
                rx.recv_many(&mut queued, batch_size).await
            } else {
                tokio::select! {
                    received = rx.recv_many(&mut queued, batch_size) => received,
                    () = close.notified() => {
                        closing = true;
                        rx.close();
                        continue;
                    }
                    _ = maintenance.tick() => {
                        if busy || maintained.elapsed() >= IDLE_MAINTENANCE_EVERY {
                            busy = self.maintain().await > 0;
                            maintained = tokio::time::Instant::now();
                        }
                        self.write_ledger().await;
                        continue;
                    }
                }
            };
            if received == 0 {
                break;
            }
            // Up to a batch, or what arrives within the flush interval after the first job:
            // one timer and one close waiter for the batch, not one of each per job.
            if closing {
                while queued.len() < batch_size {
                    match rx.try_recv() {
                        Ok(job) => queued.push(job),
                        Err(_) => break,
                    }
                }
            } else {
                let flush = tokio::time::sleep(self.config.flush_interval);
                let stop = close.notified();
                tokio::pin!(flush, stop);
                while queued.len() < batch_size {
                    let room = batch_size - queued.len();
                    // Biased, the queue first: a wake with a job waiting takes it without
                    // polling the timer or the close waiter (which keeps its permit). The
                    // flush still ends the batch the first time the queue is empty after it,
                    // and a full batch ends the loop.
                    tokio::select! {
                        biased;
                        received = rx.recv_many(&mut queued, room) => if received == 0 { break },
                        () = &mut flush => break,
                        () = &mut stop, if !closing => {
                            closing = true;
                            rx.close();
                        }
                    }
                }
            }
            // The batch's bytes count against the budget until it is committed (or failed).
            let bytes = queued.iter().map(|queued| queued.bytes).sum::<usize>();
            self.commit(&mut batch, queued.drain(..).map(|queued| queued.job))
                .await;
            busy = true;
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
        }
        self.write_ledger().await;
        tracing::debug!("observation writer drained");
    }

    /// Writes `jobs` through `batch` (empty, and left empty).
    async fn commit(&self, batch: &mut Batch, jobs: impl ExactSizeIterator<Item = Job>) {
        batch.requests.reserve(jobs.len());
        // Observations as `/api/observations` lists them: requests, and connections without.
        let mut observations = 0;
        for job in jobs {
            match job {
                Job::Request(request) => {
                    observations += 1;
                    // The handler has answered by now: the record is this job's alone.
                    batch.requests.push(Arc::unwrap_or_clone(request));
                }
                Job::Opened(row) => batch.connections.push(*row),
                Job::Quic {
                    connection,
                    request,
                } => {
                    observations += 1;
                    batch.quic_connections.extend(connection.map(|row| *row));
                    batch.quic_requests.push(*request);
                }
                Job::Closed { conn, failure } => {
                    if let Some(dir) = &self.record_dir {
                        let record = connection_record(&conn, &self.metrics, failure.as_ref());
                        files::write(dir, &conn, &record, &self.metrics).await;
                    }
                    if conn.requests() == 0 {
                        observations += 1;
                    }
                    if failure.is_some() || !conn.unchanged_since_queued() {
                        batch
                            .connections
                            .push(connection_row(&conn, failure, &self.metrics));
                    }
                }
            }
        }
        self.write(batch, observations).await;
        batch.clear();
    }

    /// The ledger identities changed since they were last taken, as rows.
    fn ledger_rows(&self) -> Vec<LedgerRow> {
        self.ledger
            .take_changed()
            .into_iter()
            .filter_map(|entry| {
                Some(LedgerRow {
                    client_ip: entry.client_ip.to_string(),
                    entry: serde_json::to_string(&entry).ok()?,
                    updated_unix_ms: entry.updated_ms,
                    tls_voice_id: entry.tls_voice_id,
                })
            })
            .collect()
    }

    /// Writes the ledger's identities changed since it last did, each once: every maintenance
    /// tick and at shutdown. Not with each batch: a client busy on one connection changes its
    /// identity on every request, and one row a second says what a row per batch would.
    async fn write_ledger(&self) {
        let batch = Batch {
            ledger: self.ledger_rows(),
            ..Batch::default()
        };
        self.write(&batch, 0).await;
    }

    /// Writes `batch` in one transaction, counting its `observations` as written or lost.
    async fn write(&self, batch: &Batch, observations: usize) {
        if batch.is_empty() {
            return;
        }
        let started = std::time::Instant::now();
        let written = self.store.write_batch(batch).await;
        self.metrics.write_latency(started.elapsed());
        match written {
            Ok(()) => self.metrics.written(observations),
            Err(error) => {
                let rows = batch.connections.len() + batch.requests.len();
                self.metrics.write_failure(rows);
                tracing::error!(%error, lost_rows = rows, "observation batch not stored");
            }
        }
    }

    /// Prunes what retention and the size cap say must go, a few small batches at a time, and
    /// measures the database for `/healthz`; the rows pruned.
    async fn maintain(&self) -> u64 {
        let mut pruned = 0;
        if let Some(retain) = self.config.retain {
            let cutoff = now_ms() - i64::try_from(retain.as_millis()).unwrap_or(i64::MAX);
            for _ in 0..PRUNE_ROUNDS {
                match self.store.prune(Some(cutoff), PRUNE_BATCH).await {
                    Ok(done) => {
                        pruned += done.rows();
                        if done.requests < u64::from(PRUNE_BATCH)
                            && done.connections < u64::from(PRUNE_BATCH)
                        {
                            break;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "pruning by age failed");
                        break;
                    }
                }
            }
        }
        let mut size = self.store.size().await;
        if let Some(max) = self.config.max_db_bytes {
            for _ in 0..PRUNE_ROUNDS {
                match &size {
                    Ok(now) if now.used_bytes > max => {}
                    _ => break,
                }
                match self.store.prune(None, PRUNE_BATCH).await {
                    Ok(done) if done.rows() > 0 => pruned += done.rows(),
                    Ok(_) => break,
                    Err(error) => {
                        tracing::warn!(%error, "pruning by size failed");
                        break;
                    }
                }
                size = self.store.size().await;
            }
        }
        self.metrics.pruned(pruned);
        if let Ok(size) = size {
            self.metrics.database_size(size.used_bytes, size.file_bytes);
        }
        pruned
    }
}
