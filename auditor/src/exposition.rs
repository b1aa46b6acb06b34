//! Prometheus exposition of a scheduled audit (`audit --every … --metrics-listen ADDR`,
//! `GET /metrics`), in the OpenMetrics text format, encoded by the `prometheus-client` crate:
//! counters over the runs so far (runs, probes by outcome) and gauges of the latest run (its
//! duration and end, exits by drift state, bucket and route). Nothing is counted on the probe
//! path: [`AuditMetrics::record_run`] folds each finished run in, and a scrape reads the result.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use exitvoice_exposition::{by_label, counters_by, single};
use exitvoice_schema::Pool;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::schedule::Outcomes;

/// What the runs so far said, for the next scrape.
#[derive(Clone, Debug, Default)]
struct Snapshot {
    runs: u64,
    /// Probes by outcome: `ok`, or the failure's error class.
    probes: BTreeMap<String, u64>,
    /// The latest run's exits by drift state, bucket (`none` without one) and route.
    exits: BTreeMap<(&'static str, String), i64>,
    last_run_seconds: f64,
    last_run_end_unix: i64,
    /// Exits this auditor claimed and probed, over all runs.
    exits_claimed: u64,
    /// Exits of its runs that other auditors on the database probed (or had probed in the
    /// period), over all runs.
    exits_left_to_others: u64,
}

/// The audit's figures, shared by the scheduler (which records runs) and the scrape handler.
#[derive(Debug, Default)]
pub struct AuditMetrics {
    snapshot: Mutex<Snapshot>,
}

impl AuditMetrics {
    /// Folds a finished run in: its probes (the baseline's too), its pool of labels and how long
    /// it took.
    pub fn record_run(&self, probes: &Outcomes, pool: &Pool, took: Duration, end_unix: i64) {
        let mut snapshot = self.snapshot.lock().unwrap_or_else(PoisonError::into_inner);
        snapshot.runs += 1;
        for (outcome, count) in probes.iter() {
            *snapshot.probes.entry(outcome.to_owned()).or_default() += count;
        }
        snapshot.exits.clear();
        for (dimension, counts) in [
            ("state", &pool.by_state),
            ("bucket", &pool.by_bucket),
            ("route", &pool.by_route),
        ] {
            for (value, &count) in counts {
                snapshot
                    .exits
                    .insert((dimension, value.clone()), i64::from(count));
            }
        }
        snapshot.last_run_seconds = took.as_secs_f64();
        snapshot.last_run_end_unix = end_unix;
    }

    /// Folds in how a run's exits were shared with other auditors on the database.
    pub fn record_claims(&self, claimed: u64, left_to_others: u64) {
        let mut snapshot = self.snapshot.lock().unwrap_or_else(PoisonError::into_inner);
        snapshot.exits_claimed += claimed;
        snapshot.exits_left_to_others += left_to_others;
    }

    /// The OpenMetrics text of everything recorded so far.
    ///
    /// # Errors
    /// Only if writing into the string fails.
    pub fn encode(self: &Arc<Self>) -> Result<String, std::fmt::Error> {
        exitvoice_exposition::text(&self.registry())
    }

    /// A registry whose collector reads these figures at each scrape (what
    /// `exitvoice_exposition::Listener::serve` serves).
    pub fn registry(self: &Arc<Self>) -> Registry {
        let mut registry = Registry::with_prefix("exitvoice_audit");
        registry.register_collector(Box::new(AuditCollector(Arc::clone(self))));
        registry
    }
}

/// Reads the snapshot on each scrape.
#[derive(Debug)]
struct AuditCollector(Arc<AuditMetrics>);

impl Collector for AuditCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snapshot = self
            .0
            .snapshot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let e = &mut encoder;
        single(
            e,
            "runs",
            "Audit runs finished (full runs and re-checks).",
            &ConstCounter::new(snapshot.runs),
        )?;
        counters_by(
            e,
            "probes",
            "Probes, by outcome: ok or the error class.",
            "outcome",
            snapshot
                .probes
                .iter()
                .map(|(o, count)| (o.as_str(), *count)),
        )?;
        for (dimension, name, help) in [
            (
                "state",
                "exits_by_state",
                "Exits of the latest run, by drift state.",
            ),
            (
                "bucket",
                "exits_by_bucket",
                "Exits of the latest run, by HTTP/2 bucket (none: no h2).",
            ),
            (
                "route",
                "exits_by_route",
                "Exits of the latest run, by route.",
            ),
        ] {
            let series = snapshot
                .exits
                .iter()
                .filter(|((d, _), _)| *d == dimension)
                .map(|((_, value), count)| (value.as_str(), ConstGauge::new(*count)));
            by_label(e, (name, help, MetricType::Gauge), dimension, series)?;
        }
        single(
            e,
            "exits_claimed",
            "Exits this auditor claimed and probed (auditors on one database split the exits).",
            &ConstCounter::new(snapshot.exits_claimed),
        )?;
        single(
            e,
            "exits_left_to_others",
            "Exits of this auditor's runs that other auditors on the database probed.",
            &ConstCounter::new(snapshot.exits_left_to_others),
        )?;
        single(
            e,
            "last_run_seconds",
            "How long the latest run took.",
            &ConstGauge::new(snapshot.last_run_seconds),
        )?;
        single(
            e,
            "last_run_end_seconds",
            "When the latest run ended, Unix time.",
            &ConstGauge::new(snapshot.last_run_end_unix),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitvoice_schema::{ProbeFailure, ProbeRecord};

    fn probe(error: Option<&str>) -> ProbeRecord {
        let json = serde_json::json!({
            "schema_version": 1, "run_id": "r", "exit": "e", "exit_url": null, "session": null,
            "token": "t", "persona": "rustls", "started_at": "2026-01-01T00:00:00Z",
            "latency_ms": null, "error": null, "sample": null,
        });
        let mut record: ProbeRecord = serde_json::from_value(json).expect("a probe record");
        record.error = error.map(|class| ProbeFailure {
            class: class.to_owned(),
            phase: None,
            message: String::new(),
        });
        record
    }

    #[test]
    fn probes_add_up_over_runs_and_exits_are_the_latest_runs() {
        let metrics = Arc::new(AuditMetrics::default());
        let labels = Pool::default();
        let outcomes = |records: &[ProbeRecord]| {
            let mut outcomes = Outcomes::default();
            records.iter().for_each(|record| outcomes.count(record));
            outcomes
        };
        let probes = [probe(None), probe(Some("connect_refused")), probe(None)];
        metrics.record_run(
            &outcomes(&probes),
            &labels,
            Duration::from_millis(1500),
            1_700_000_000,
        );
        metrics.record_run(
            &outcomes(&probes[..1]),
            &labels,
            Duration::from_secs(2),
            1_700_003_600,
        );
        metrics.record_claims(3, 1);
        metrics.record_claims(2, 0);
        let text = metrics.encode().expect("encode");
        assert!(text.contains("exitvoice_audit_runs_total 2\n"), "{text}");
        assert!(
            text.contains("exitvoice_audit_exits_claimed_total 5\n")
                && text.contains("exitvoice_audit_exits_left_to_others_total 1\n"),
            "{text}"
        );
        assert!(
            text.contains("exitvoice_audit_probes_total{outcome=\"ok\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("exitvoice_audit_probes_total{outcome=\"connect_refused\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("exitvoice_audit_last_run_seconds 2.0\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    /// A scrape while runs are recorded reads a whole run's gauges: a run replaces the exits'
    /// gauges under the lock a scrape reads them under, never leaving them half cleared.
    #[test]
    fn a_scrape_during_a_run_reads_every_gauge_of_a_run() {
        let metrics = Arc::new(AuditMetrics::default());
        let mut pool = Pool::default();
        for state in ["stable", "alternating", "mutating", "unknown"] {
            pool.by_state.insert(state.to_owned(), 5);
        }
        let record = |metrics: &AuditMetrics| {
            metrics.record_run(&Outcomes::default(), &pool, Duration::from_secs(1), 1);
        };
        record(&metrics);
        let writer = {
            let (metrics, pool) = (Arc::clone(&metrics), pool.clone());
            std::thread::spawn(move || {
                for _ in 0..2_000 {
                    metrics.record_run(&Outcomes::default(), &pool, Duration::from_secs(1), 1);
                }
            })
        };
        for _ in 0..200 {
            let text = metrics.encode().expect("encode");
            let states = text
                .lines()
                .filter(|line| line.starts_with("exitvoice_audit_exits_by_state{"))
                .count();
            assert_eq!(states, 4, "{text}");
        }
        writer.join().expect("writer");
    }
}
