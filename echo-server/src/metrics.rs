//! Counters and gauges of the running server, served by `/healthz` and, read at scrape time, by
//! the Prometheus exposition (`exposition.rs`).
//!
//! Everything is a relaxed atomic or a small map behind a mutex: counting must never make a
//! connection wait on another.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use exitvoice_schema::{Bucket, Spoken};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use serde::Serialize;

/// All counters of one server.
#[derive(Debug, Default)]
pub struct Metrics {
    accepted: AtomicU64,
    open: AtomicI64,
    rejected_max_connections: AtomicU64,
    rejected_per_ip: AtomicU64,
    rejected_rate: AtomicU64,
    rejected_penalty: AtomicU64,
    rejected_token_queries: AtomicU64,
    strikes: AtomicU64,
    penalties: AtomicU64,
    handshakes: AtomicU64,
    handshake_failures: Mutex<BTreeMap<&'static str, u64>>,
    parse_errors: Mutex<BTreeMap<&'static str, u64>>,
    quic: Mutex<BTreeMap<&'static str, u64>>,
    geoip: Mutex<BTreeMap<&'static str, u64>>,
    requests: AtomicU64,
    requests_by: RequestsBy,
    capture_truncated: AtomicU64,
    heads_unfollowed: AtomicU64,
    acme_challenges: AtomicU64,
    write_seconds: WriteSeconds,
    idle_closed: AtomicU64,
    request_timeouts: AtomicU64,
    queued: AtomicU64,
    queue_drops: Mutex<BTreeMap<&'static str, u64>>,
    connection_rows_dropped: AtomicU64,
    rows_pruned: AtomicU64,
    db_used_bytes: AtomicU64,
    db_file_bytes: AtomicU64,
    written: AtomicU64,
    write_failures: AtomicU64,
    /// Whether the last batch failed to commit (the store is refusing writes right now).
    store_failing: AtomicBool,
    record_failures: AtomicU64,
}

/// Requests answered, one counter per spoken protocol and bucket: every request counts here,
/// so without a lock.
#[derive(Debug, Default)]
struct RequestsBy([[AtomicU64; RequestsBy::BUCKETS.len()]; RequestsBy::SPOKEN.len()]);

impl RequestsBy {
    const SPOKEN: [&'static str; 3] = ["h2", "http/1.1", "unknown"];
    const BUCKETS: [&'static str; 5] = ["A", "B", "C", "D", "none"];

    fn count(&self, spoken: Spoken, bucket: Option<Bucket>) {
        let spoken = match spoken {
            Spoken::H2 => 0,
            Spoken::Http1 => 1,
            _ => 2,
        };
        let bucket = match bucket {
            Some(Bucket::A) => 0,
            Some(Bucket::B) => 1,
            Some(Bucket::C) => 2,
            Some(Bucket::D) => 3,
            None => 4,
        };
        self.0[spoken][bucket].fetch_add(1, Ordering::Relaxed);
    }

    fn read(&self) -> BTreeMap<(&'static str, &'static str), u64> {
        let mut counts = BTreeMap::new();
        for (spoken, row) in Self::SPOKEN.into_iter().zip(&self.0) {
            for (bucket, counter) in Self::BUCKETS.into_iter().zip(row) {
                let count = counter.load(Ordering::Relaxed);
                if count > 0 {
                    counts.insert((spoken, bucket), count);
                }
            }
        }
        counts
    }
}

/// How long the store took to commit one batch of observations, in seconds.
#[derive(Debug)]
pub(crate) struct WriteSeconds(pub(crate) Histogram);

impl Default for WriteSeconds {
    /// 0.5 ms to 4 s, doubling: a batch of 256 requests commits in a few milliseconds on a
    /// local disk; seconds mean a stalled disk or a database at its size cap pruning.
    fn default() -> Self {
        Self(Histogram::new(exponential_buckets(0.0005, 2.0, 14)))
    }
}

/// Keeps the open-connection gauge up while alive; dropping it brings the gauge back down, so
/// every way out of a connection task (including a panic unwinding) is counted.
#[derive(Debug)]
pub struct OpenConnection(Arc<Metrics>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

fn bump(map: &Mutex<BTreeMap<&'static str, u64>>, key: &'static str) {
    let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
    *map.entry(key).or_insert(0) += 1;
}

fn snapshot(map: &Mutex<BTreeMap<&'static str, u64>>) -> BTreeMap<&'static str, u64> {
    map.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

impl Metrics {
    /// Counts an accepted connection and raises the open gauge until the guard drops.
    pub fn accept(self: &Arc<Self>) -> OpenConnection {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        self.open.fetch_add(1, Ordering::Relaxed);
        OpenConnection(Arc::clone(self))
    }

    /// Counts a connection closed at once because `--max-connections` was reached.
    pub fn reject_max_connections(&self) {
        self.rejected_max_connections
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection closed at once because its IP reached `--per-ip-connections`.
    pub fn reject_per_ip(&self) {
        self.rejected_per_ip.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection reset at once because its source exceeded `--per-ip-rate`.
    pub fn reject_rate(&self) {
        self.rejected_rate.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection reset at once because its source is in the penalty box.
    pub fn reject_penalty(&self) {
        self.rejected_penalty.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an unauthenticated `/api/observations?token=` query refused by its source's rate
    /// limit.
    pub fn reject_token_query(&self) {
        self.rejected_token_queries.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a strike: a connection that broke the protocol or a deadline.
    pub fn strike(&self) {
        self.strikes.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a source put in the penalty box.
    pub fn penalty(&self) {
        self.penalties.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a completed TLS handshake.
    pub fn handshake(&self) {
        self.handshakes.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a failed handshake by reason.
    pub fn handshake_failure(&self, reason: &'static str) {
        bump(&self.handshake_failures, reason);
    }

    /// Counts a parse error by kind (`tls`, `h2`, `h1`).
    pub fn parse_error(&self, kind: &'static str) {
        bump(&self.parse_errors, kind);
    }

    /// Counts a QUIC event of the UDP listener: datagrams read, capture attempts and what ended
    /// them (malformed Initials by kind, caps), connections, HTTP/3 requests.
    pub fn quic(&self, event: &'static str) {
        bump(&self.quic, event);
    }

    /// Counts a `--geoip` event: a database read again after it changed on disk
    /// (`reloaded`), one that changed but did not read (`reload_failed`: its last good
    /// contents stay).
    pub fn geoip(&self, event: &'static str) {
        bump(&self.geoip, event);
    }

    /// Counts a request answered, by the protocol its connection spoke and its bucket.
    pub fn request(&self, spoken: Spoken, bucket: Option<Bucket>) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.requests_by.count(spoken, bucket);
    }

    /// Requests answered, by spoken protocol (`h2`, `http/1.1`, `unknown`) and bucket (`A`–`D`,
    /// `none`): those counted at least once.
    pub fn requests_by(&self) -> BTreeMap<(&'static str, &'static str), u64> {
        self.requests_by.read()
    }

    /// Counts a connection whose decrypted bytes went past `--capture-bytes` (the tap kept the
    /// first ones only).
    pub fn capture_truncated(&self) {
        self.capture_truncated.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections whose capture was truncated.
    pub fn captures_truncated(&self) -> u64 {
        self.capture_truncated.load(Ordering::Relaxed)
    }

    /// Counts a connection whose bytes past `--capture-bytes` overflowed the head follower's
    /// window (`capture::tap::FOLLOW_WINDOW`): its later requests' heads were not read.
    pub fn heads_unfollowed(&self) {
        self.heads_unfollowed.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections whose later request heads were lost past the capture.
    pub fn connections_heads_unfollowed(&self) -> u64 {
        self.heads_unfollowed.load(Ordering::Relaxed)
    }

    /// Counts a TLS-ALPN-01 validation connection of an ACME CA.
    pub fn acme_challenge(&self) {
        self.acme_challenges.fetch_add(1, Ordering::Relaxed);
    }

    /// TLS-ALPN-01 validation connections so far.
    pub fn acme_challenges(&self) -> u64 {
        self.acme_challenges.load(Ordering::Relaxed)
    }

    /// Records how long one batch took to commit.
    pub fn write_latency(&self, elapsed: std::time::Duration) {
        self.write_seconds.0.observe(elapsed.as_secs_f64());
    }

    /// The batch commit latency histogram.
    pub(crate) fn write_seconds(&self) -> &Histogram {
        &self.write_seconds.0
    }

    /// Counts a connection closed by the idle timeout.
    pub fn idle_closed(&self) {
        self.idle_closed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection closed because its first request head missed the request deadline.
    pub fn request_timeout(&self) {
        self.request_timeouts.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an observation put on the queue.
    pub fn queued(&self) {
        self.queued.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an observation dropped before the store, by reason.
    pub fn queue_drop(&self, reason: DropReason) {
        bump(&self.queue_drops, reason.as_str());
    }

    /// Counts a connection row (of a connection whose requests are stored on their own) dropped
    /// before the store.
    pub fn connection_row_drop(&self) {
        self.connection_rows_dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts rows deleted by retention or the size cap.
    pub fn pruned(&self, rows: u64) {
        self.rows_pruned.fetch_add(rows, Ordering::Relaxed);
    }

    /// Records the database's size as last measured.
    pub fn database_size(&self, used_bytes: u64, file_bytes: u64) {
        self.db_used_bytes.store(used_bytes, Ordering::Relaxed);
        self.db_file_bytes.store(file_bytes, Ordering::Relaxed);
    }

    /// Counts observations committed to the store.
    pub fn written(&self, count: usize) {
        self.store_failing.store(false, Ordering::Relaxed);
        self.written
            .fetch_add(u64::try_from(count).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Counts rows (requests and connections) whose batch failed to commit.
    pub fn write_failure(&self, count: usize) {
        self.store_failing.store(true, Ordering::Relaxed);
        self.write_failures
            .fetch_add(u64::try_from(count).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Counts a `--record-dir` file that could not be written.
    pub fn record_failure(&self) {
        self.record_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections open right now.
    pub fn open(&self) -> i64 {
        self.open.load(Ordering::Relaxed)
    }

    /// A consistent-enough copy of every counter, for `/healthz`.
    pub fn report(&self) -> MetricsReport {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        MetricsReport {
            connections: ConnectionsReport {
                open: self.open(),
                accepted: load(&self.accepted),
                rejected_max_connections: load(&self.rejected_max_connections),
                rejected_per_ip: load(&self.rejected_per_ip),
                rejected_rate: load(&self.rejected_rate),
                rejected_penalty: load(&self.rejected_penalty),
                rejected_token_queries: load(&self.rejected_token_queries),
                strikes: load(&self.strikes),
                penalties: load(&self.penalties),
                idle_closed: load(&self.idle_closed),
                request_timeouts: load(&self.request_timeouts),
                captures_truncated: load(&self.capture_truncated),
                heads_unfollowed: load(&self.heads_unfollowed),
            },
            handshakes: HandshakesReport {
                completed: load(&self.handshakes),
                failures: snapshot(&self.handshake_failures),
            },
            parse_errors: snapshot(&self.parse_errors),
            quic: snapshot(&self.quic),
            geoip: snapshot(&self.geoip),
            requests: load(&self.requests),
            database: DatabaseReport {
                used_bytes: load(&self.db_used_bytes),
                file_bytes: load(&self.db_file_bytes),
                rows_pruned: load(&self.rows_pruned),
            },
            observations: ObservationsReport {
                queued: load(&self.queued),
                queue_drops: {
                    let by_reason = snapshot(&self.queue_drops);
                    by_reason.values().sum()
                },
                queue_drops_by_reason: snapshot(&self.queue_drops),
                connection_rows_dropped: load(&self.connection_rows_dropped),
                written: load(&self.written),
                write_failures: load(&self.write_failures),
                store_failing: self.store_failing.load(Ordering::Relaxed),
                record_failures: load(&self.record_failures),
            },
        }
    }
}

/// The counters as `/healthz` shows them.
#[derive(Clone, Debug, Serialize)]
pub struct MetricsReport {
    /// Connection gauge and counters.
    pub connections: ConnectionsReport,
    /// TLS handshakes.
    pub handshakes: HandshakesReport,
    /// Parse errors by kind (`tls`, `h2`, `h1`).
    pub parse_errors: BTreeMap<&'static str, u64>,
    /// QUIC events by kind ([`Metrics::quic`]); empty with `--no-quic`.
    pub quic: BTreeMap<&'static str, u64>,
    /// `--geoip` events by kind ([`Metrics::geoip`]); absent without `--geoip` or before the
    /// first.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub geoip: BTreeMap<&'static str, u64>,
    /// Requests answered.
    pub requests: u64,
    /// The observation queue and the store.
    pub observations: ObservationsReport,
    /// The database's size and what retention pruned.
    pub database: DatabaseReport,
}

/// Why an observation never reached the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The queue was full (`--queue-size`).
    QueueFull,
    /// The queued observations already held `--queue-bytes`.
    QueueBytes,
    /// The writer had stopped (shutdown).
    Closed,
}

impl DropReason {
    fn as_str(self) -> &'static str {
        match self {
            Self::QueueFull => "queue_full",
            Self::QueueBytes => "queue_bytes",
            Self::Closed => "closed",
        }
    }
}

/// The database's size and what retention pruned.
#[derive(Clone, Debug, Serialize)]
pub struct DatabaseReport {
    /// Bytes the rows take (pages in use), what `--max-db-size` bounds.
    pub used_bytes: u64,
    /// The database file and its write-ahead log on disk.
    pub file_bytes: u64,
    /// Rows deleted by `--retain` and `--max-db-size` since start.
    pub rows_pruned: u64,
}

/// Connection gauge and counters.
#[derive(Clone, Debug, Serialize)]
pub struct ConnectionsReport {
    /// Open right now; returns to zero when every connection has ended.
    pub open: i64,
    /// Accepted since start.
    pub accepted: u64,
    /// Closed at once: `--max-connections` reached.
    pub rejected_max_connections: u64,
    /// Closed at once: the peer's IP reached `--per-ip-connections`.
    pub rejected_per_ip: u64,
    /// Reset at once: the peer's source (IPv4 address or IPv6 /64) exceeded `--per-ip-rate`.
    pub rejected_rate: u64,
    /// Reset at once: the peer's source is in the penalty box.
    pub rejected_penalty: u64,
    /// Unauthenticated `/api/observations?token=` queries refused with 429: they take from the
    /// same per-source bucket as new connections.
    pub rejected_token_queries: u64,
    /// Connections that broke the protocol or a deadline (hello invalid, too large or too
    /// slow, TLS error, handshake or request deadline missed, HTTP protocol error).
    pub strikes: u64,
    /// Times a source was put in the penalty box (`--penalty-strikes` within
    /// `--penalty-window`).
    pub penalties: u64,
    /// Closed by the idle timeout.
    pub idle_closed: u64,
    /// Closed because the first request head was not complete by the request deadline.
    pub request_timeouts: u64,
    /// Ended connections whose client bytes went past `--capture-bytes` (stored cut).
    pub captures_truncated: u64,
    /// Ended connections whose bytes past `--capture-bytes` overflowed the request-head
    /// window: later requests were echoed without their own head.
    pub heads_unfollowed: u64,
}

/// TLS handshakes.
#[derive(Clone, Debug, Serialize)]
pub struct HandshakesReport {
    /// Completed.
    pub completed: u64,
    /// Failed, by reason.
    pub failures: BTreeMap<&'static str, u64>,
}

/// The observation queue and the store.
#[derive(Clone, Debug, Serialize)]
pub struct ObservationsReport {
    /// Put on the queue.
    pub queued: u64,
    /// Observations (requests, and connections without one) dropped before the store, in all
    /// (the connection never waits).
    pub queue_drops: u64,
    /// Dropped, by reason: `queue_full`, `queue_bytes`, `closed`.
    pub queue_drops_by_reason: BTreeMap<&'static str, u64>,
    /// Connection rows dropped before the store whose requests were queued on their own: those
    /// requests are listed without their connection's facts.
    pub connection_rows_dropped: u64,
    /// Committed to the store.
    pub written: u64,
    /// Rows (requests and connections) lost because their batch failed to commit.
    pub write_failures: u64,
    /// The last batch failed: the store refuses writes right now (clears on the next success).
    pub store_failing: bool,
    /// `--record-dir` files that could not be written.
    pub record_failures: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_spoken_protocol_and_bucket_under_their_names() {
        let metrics = Metrics::default();
        assert!(metrics.requests_by().is_empty());
        metrics.request(Spoken::H2, Some(Bucket::A));
        metrics.request(Spoken::H2, Some(Bucket::A));
        metrics.request(Spoken::H2, Some(Bucket::C));
        metrics.request(Spoken::Http1, Some(Bucket::D));
        metrics.request(Spoken::Unknown, None);
        let expected = BTreeMap::from([
            (("h2", "A"), 2),
            (("h2", "C"), 1),
            (("http/1.1", "D"), 1),
            (("unknown", "none"), 1),
        ]);
        assert_eq!(metrics.requests_by(), expected);
        assert_eq!(metrics.report().requests, 5);
    }

    #[test]
    fn open_gauge_follows_guards_and_maps_count_by_key() {
        let metrics = Arc::new(Metrics::default());
        let first = metrics.accept();
        let second = metrics.accept();
        assert_eq!(metrics.open(), 2);
        drop(first);
        drop(second);
        metrics.handshake_failure("handshake_timeout");
        metrics.handshake_failure("handshake_timeout");
        metrics.parse_error("tls");
        let report = metrics.report();
        assert_eq!(report.connections.open, 0);
        assert_eq!(report.connections.accepted, 2);
        assert_eq!(
            report.handshakes.failures.get("handshake_timeout"),
            Some(&2)
        );
        assert_eq!(report.parse_errors.get("tls"), Some(&1));
    }
}
