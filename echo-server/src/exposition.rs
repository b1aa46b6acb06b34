//! Prometheus exposition of the server's counters on `--metrics-listen` (`GET /metrics`), in the
//! OpenMetrics text format that Prometheus scrapes, encoded by the `prometheus-client` crate.
//!
//! Nothing here counts: the counters are the ones `/healthz` shows (`metrics.rs`), read when
//! Prometheus scrapes, so the connection path pays nothing for the exposition. Every series is
//! named `exitvoice_…`; counters carry the `_total` suffix OpenMetrics gives them.

use std::sync::Arc;

use exitvoice_exposition::{counters_by, gauge, single};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::metrics::Metrics;
use crate::writer::WriterHandle;

/// Reads the echo's counters on each scrape.
#[derive(Debug)]
struct EchoCollector {
    metrics: Arc<Metrics>,
    writer: WriterHandle,
}

impl Collector for EchoCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let report = self.metrics.report();
        let c = &report.connections;
        let e = &mut encoder;
        single(
            e,
            "connections_open",
            "Connections open now.",
            &gauge(c.open),
        )?;
        single(
            e,
            "connections_accepted",
            "Connections accepted (a relayed one before its PROXY header is read).",
            &ConstCounter::new(c.accepted),
        )?;
        counters_by(
            e,
            "connections_refused",
            "Connections reset before any byte was read, by the limit that refused them.",
            "reason",
            [
                ("max_connections", c.rejected_max_connections),
                ("per_ip", c.rejected_per_ip),
                ("rate", c.rejected_rate),
                ("penalty", c.rejected_penalty),
            ],
        )?;
        counters_by(
            e,
            "connections_timed_out",
            "Connections closed by a deadline after the handshake.",
            "deadline",
            [("idle", c.idle_closed), ("request", c.request_timeouts)],
        )?;
        single(
            e,
            "strikes",
            "Connections that broke the protocol or a deadline.",
            &ConstCounter::new(c.strikes),
        )?;
        single(
            e,
            "penalties",
            "Sources put in the penalty box.",
            &ConstCounter::new(c.penalties),
        )?;
        single(
            e,
            "token_queries_refused",
            "Unauthenticated /api/observations?token= queries refused by the rate limit.",
            &ConstCounter::new(c.rejected_token_queries),
        )?;
        let handshakes = &report.handshakes;
        counters_by(
            e,
            "handshakes",
            "TLS handshakes (PROXY header included), by outcome: completed or the failure reason.",
            "outcome",
            std::iter::once(("completed", handshakes.completed))
                .chain(handshakes.failures.iter().map(|(k, v)| (*k, *v))),
        )?;
        counters_by(
            e,
            "parse_errors",
            "Layers that failed to parse, by layer.",
            "layer",
            report.parse_errors.iter().map(|(k, v)| (*k, *v)),
        )?;
        counters_by(
            e,
            "quic_events",
            "UDP listener events: datagrams, capture attempts and why they ended, connections, HTTP/3 requests.",
            "event",
            report.quic.iter().map(|(k, v)| (*k, *v)),
        )?;
        counters_by(
            e,
            "geoip_events",
            "Geo databases (--geoip) read again after they changed, or that changed and did not read.",
            "event",
            report.geoip.iter().map(|(k, v)| (*k, *v)),
        )?;
        let mut requests = e.encode_descriptor(
            "requests",
            "Requests answered, by spoken protocol and bucket.",
            None,
            MetricType::Counter,
        )?;
        for ((spoken, bucket), count) in self.metrics.requests_by() {
            let labels = [("spoken", spoken), ("bucket", bucket)];
            ConstCounter::new(count).encode(requests.encode_family(&labels)?)?;
        }
        single(
            e,
            "acme_challenges",
            "TLS-ALPN-01 validation connections of the ACME CA (not stored).",
            &ConstCounter::new(self.metrics.acme_challenges()),
        )?;
        single(
            e,
            "captures_truncated",
            "Connections whose decrypted bytes went past --capture-bytes.",
            &ConstCounter::new(self.metrics.captures_truncated()),
        )?;
        single(
            e,
            "heads_unfollowed",
            "Connections whose bytes past --capture-bytes overflowed the request-head window.",
            &ConstCounter::new(self.metrics.connections_heads_unfollowed()),
        )?;
        single(
            e,
            "queue_depth",
            "Observations waiting for the writer.",
            &gauge(self.writer.depth()),
        )?;
        single(
            e,
            "queue_bytes",
            "Raw bytes held by queued observations (--queue-bytes bounds it).",
            &gauge(self.writer.bytes()),
        )?;
        single(
            e,
            "queue_capacity",
            "The queue's capacity (--queue-size).",
            &gauge(self.writer.capacity()),
        )?;
        let o = &report.observations;
        single(
            e,
            "observations_queued",
            "Observations put on the queue.",
            &ConstCounter::new(o.queued),
        )?;
        counters_by(
            e,
            "observations_dropped",
            "Observations dropped before the store, by reason.",
            "reason",
            o.queue_drops_by_reason.iter().map(|(k, v)| (*k, *v)),
        )?;
        single(
            e,
            "connection_rows_dropped",
            "Connection rows dropped before the store whose requests were queued on their own.",
            &ConstCounter::new(o.connection_rows_dropped),
        )?;
        single(
            e,
            "observations_written",
            "Observations committed to the store.",
            &ConstCounter::new(o.written),
        )?;
        single(
            e,
            "write_failures",
            "Rows lost because their batch failed to commit.",
            &ConstCounter::new(o.write_failures),
        )?;
        single(
            e,
            "store_failing",
            "1 while the store refuses writes (the last batch failed).",
            &gauge(i64::from(o.store_failing)),
        )?;
        single(
            e,
            "record_failures",
            "--record-dir files that could not be written.",
            &ConstCounter::new(o.record_failures),
        )?;
        single(
            e,
            "write_seconds",
            "Time one batch of observations took to commit.",
            self.metrics.write_seconds(),
        )?;
        let d = &report.database;
        single(
            e,
            "database_used_bytes",
            "Bytes the stored rows take (--max-db-size bounds it).",
            &gauge(d.used_bytes),
        )?;
        single(
            e,
            "database_file_bytes",
            "The database file and its write-ahead log on disk.",
            &gauge(d.file_bytes),
        )?;
        single(
            e,
            "rows_pruned",
            "Rows deleted by --retain and --max-db-size.",
            &ConstCounter::new(d.rows_pruned),
        )
    }
}

/// The registry `/metrics` encodes: the echo's counters, read at each scrape.
pub(crate) fn registry(metrics: Arc<Metrics>, writer: WriterHandle) -> Registry {
    let mut registry = Registry::with_prefix("exitvoice");
    registry.register_collector(Box::new(EchoCollector { metrics, writer }));
    registry
}
