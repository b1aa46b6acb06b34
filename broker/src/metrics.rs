//! Prometheus metrics of one broker instance (`GET /metrics`, OpenMetrics text by the
//! `prometheus-client` crate). Counters are this instance's; the gauges of the whole broker
//! (live leases by class, bans in force, collisions) are read from the store at each scrape, so
//! every instance reports the same.

use exitvoice_lease::{Gauges, LeaseClass};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use crate::tunnel_metrics::TunnelMetrics;

type Labels = Vec<(String, String)>;

/// The instance's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    instance: String,
    granted: Family<Labels, Counter>,
    unavailable: Family<Labels, Counter>,
    outcomes: Family<Labels, Counter>,
    latency: Family<Labels, Histogram>,
    bans: Family<Labels, Counter>,
    bans_recovered: Counter,
    revoked: Counter,
    refused: Family<Labels, Counter>,
    store_errors: Counter,
    egress_shared: Counter,
    waiting: Gauge,
    wait_seconds: Histogram,
    live: Family<Labels, Gauge>,
    bans_active: Gauge,
    collisions: Gauge,
    labels_snapshot: Gauge,
    pruned: Counter,
    outage: Gauge,
    outage_seconds: Counter<f64, AtomicU64>,
    granted_in_outage: Counter,
    reserved: Gauge,
    tunnels: TunnelMetrics,
}

impl Metrics {
    /// Metrics labelled with `instance` where the figure is this instance's.
    pub fn new(instance: &str) -> Self {
        let mut registry = Registry::with_prefix("exitvoice_broker");
        let metrics = Self {
            registry: Registry::default(),
            instance: instance.to_owned(),
            granted: Family::default(),
            unavailable: Family::default(),
            outcomes: Family::default(),
            latency: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.005, 2.0, 14))
            }),
            bans: Family::default(),
            bans_recovered: Counter::default(),
            revoked: Counter::default(),
            refused: Family::default(),
            store_errors: Counter::default(),
            egress_shared: Counter::default(),
            waiting: Gauge::default(),
            wait_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            live: Family::default(),
            bans_active: Gauge::default(),
            collisions: Gauge::default(),
            labels_snapshot: Gauge::default(),
            pruned: Counter::default(),
            outage: Gauge::default(),
            outage_seconds: Counter::default(),
            granted_in_outage: Counter::default(),
            reserved: Gauge::default(),
            tunnels: TunnelMetrics::default(),
        };
        registry.register(
            "leases_granted",
            "Leases granted, by instance and class",
            metrics.granted.clone(),
        );
        registry.register(
            "unavailable",
            "Acquires that found nothing free within their wait, by class",
            metrics.unavailable.clone(),
        );
        registry.register(
            "outcomes",
            "Outcomes workers reported, by exit and outcome",
            metrics.outcomes.clone(),
        );
        registry.register(
            "reported_latency_seconds",
            "Latencies workers reported, by exit",
            metrics.latency.clone(),
        );
        registry.register(
            "bans",
            "Bans and retired sessions, by kind (origin, exit, session)",
            metrics.bans.clone(),
        );
        registry.register(
            "bans_recovered",
            "Expired bans forgotten after a success",
            metrics.bans_recovered.clone(),
        );
        registry.register(
            "leases_revoked",
            "Live leases revoked because their exit's label stopped admitting them",
            metrics.revoked.clone(),
        );
        registry.register(
            "refused",
            "Renewals and releases refused, by reason (stale_fence: a lapsed holder kept going)",
            metrics.refused.clone(),
        );
        registry.register(
            "egress_shared",
            "Exclusive leases ended at once because their egress check found another live lease \
             on the same address (a collision the broker saw)",
            metrics.egress_shared.clone(),
        );
        registry.register(
            "store_errors",
            "Store failures",
            metrics.store_errors.clone(),
        );
        registry.register(
            "waiting",
            "Acquires waiting on this instance",
            metrics.waiting.clone(),
        );
        registry.register(
            "wait_seconds",
            "How long granted acquires waited",
            metrics.wait_seconds.clone(),
        );
        registry.register(
            "active_leases",
            "Live leases in the store, by class",
            metrics.live.clone(),
        );
        registry.register(
            "active_bans",
            "Bans in force in the store",
            metrics.bans_active.clone(),
        );
        registry.register(
            "collisions",
            "Units held by more than one live exclusive lease (must be 0)",
            metrics.collisions.clone(),
        );
        registry.register(
            "labels_snapshot",
            "The id of the labels snapshot this instance obeys (0: none yet); it grows with \
             every audit run stored",
            metrics.labels_snapshot.clone(),
        );
        registry.register(
            "leases_pruned",
            "Ended leases deleted after --retain",
            metrics.pruned.clone(),
        );
        registry.register(
            "store_outage",
            "1 while this instance cannot reach the lease store (it grants from its reserve)",
            metrics.outage.clone(),
        );
        registry.register(
            "store_outage_seconds",
            "Time this instance spent without its lease store, outages that ended",
            metrics.outage_seconds.clone(),
        );
        registry.register(
            "leases_granted_in_outage",
            "Sub-leases granted from this instance's reserve while the store was out of reach",
            metrics.granted_in_outage.clone(),
        );
        registry.register(
            "reserved_units",
            "Units this instance holds in reserve for an outage",
            metrics.reserved.clone(),
        );
        metrics.tunnels.register(&mut registry);
        Self {
            registry,
            ..metrics
        }
    }

    /// The forward proxy's metrics.
    pub fn tunnels(&self) -> &TunnelMetrics {
        &self.tunnels
    }

    /// An outage began (`true`), or one of `length` ended.
    pub fn outage(&self, began: bool, length: std::time::Duration) {
        self.outage.set(i64::from(began));
        self.outage_seconds.inc_by(length.as_secs_f64());
    }

    /// A sub-lease granted from the reserve.
    pub fn granted_in_outage(&self) {
        self.granted_in_outage.inc();
    }

    /// Units held in reserve now.
    pub fn reserved(&self, units: usize) {
        self.reserved.set(i64::try_from(units).unwrap_or(i64::MAX));
    }

    /// Ended leases pruned.
    pub fn pruned(&self, leases: u64) {
        self.pruned.inc_by(leases);
    }

    /// The labels snapshot the instance obeys now.
    pub fn labels_snapshot(&self, id: i64) {
        self.labels_snapshot.set(id);
    }

    /// A lease of `class` granted after `waited` seconds.
    pub fn granted(&self, class: &str, waited: f64) {
        self.granted
            .get_or_create(&vec![
                ("instance".to_owned(), self.instance.clone()),
                ("class".to_owned(), class.to_owned()),
            ])
            .inc();
        self.wait_seconds.observe(waited);
    }

    /// An acquire of `class` that found nothing free.
    pub fn unavailable(&self, class: &str) {
        self.unavailable
            .get_or_create(&vec![("class".to_owned(), class.to_owned())])
            .inc();
    }

    /// A worker's outcome on `exit`, with the latency it reported.
    pub fn outcome(&self, exit: &str, outcome: &str, latency_ms: Option<i64>) {
        let exit = vec![("exit".to_owned(), exit.to_owned())];
        let mut labels = exit.clone();
        labels.push(("outcome".to_owned(), outcome.to_owned()));
        self.outcomes.get_or_create(&labels).inc();
        if let Some(ms) = latency_ms {
            #[allow(clippy::cast_precision_loss)]
            self.latency
                .get_or_create(&exit)
                .observe(ms as f64 / 1000.0);
        }
    }

    /// A ban (`origin`, `exit`) or a retired session (`session`).
    pub fn ban(&self, kind: &str) {
        self.bans
            .get_or_create(&vec![("kind".to_owned(), kind.to_owned())])
            .inc();
    }

    /// Expired bans forgotten.
    pub fn recovered(&self, count: u64) {
        self.bans_recovered.inc_by(count);
    }

    /// Leases revoked at a labels refresh.
    pub fn revoked(&self, count: u64) {
        self.revoked.inc_by(count);
    }

    /// A renewal or release refused for `reason`.
    pub fn refused(&self, reason: &str) {
        self.refused
            .get_or_create(&vec![("reason".to_owned(), reason.to_owned())])
            .inc();
    }

    /// An exclusive lease ended because another live lease left from its address.
    pub fn egress_shared(&self) {
        self.egress_shared.inc();
    }

    /// A store failure.
    pub fn store_error(&self) {
        self.store_errors.inc();
    }

    /// The gauge of waiting acquires.
    pub fn waiting(&self) -> &Gauge {
        &self.waiting
    }

    /// The text of a scrape, with the store's `gauges`. Every class is set, never cleared:
    /// a scrape beside another never reads a family emptied under it.
    pub fn encode(&self, gauges: &Gauges) -> Result<String, std::fmt::Error> {
        for class in [
            LeaseClass::Stateless,
            LeaseClass::Anonymous,
            LeaseClass::Identity,
        ] {
            let count = gauges
                .live
                .iter()
                .find(|(name, _)| name == class.as_str())
                .map_or(0, |(_, count)| *count);
            self.live
                .get_or_create(&vec![("class".to_owned(), class.as_str().to_owned())])
                .set(count);
        }
        self.bans_active.set(gauges.bans);
        self.collisions.set(gauges.collisions);
        exitvoice_exposition::text(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each scrape sets every class's live gauge, the absent ones to 0: nothing is cleared, so
    /// a scrape beside another never reads the family empty.
    #[test]
    fn every_class_is_in_every_scrape() {
        let metrics = Metrics::new("t");
        let with = |live: Vec<(String, i64)>| Gauges {
            live,
            bans: 0,
            collisions: 0,
        };
        let text = metrics
            .encode(&with(vec![("anonymous".to_owned(), 2)]))
            .unwrap();
        let live = |text: &str, class: &str| {
            let name = format!("exitvoice_broker_active_leases{{class=\"{class}\"}} ");
            text.lines()
                .find_map(|line| line.strip_prefix(&name)?.parse::<i64>().ok())
        };
        assert_eq!(live(&text, "anonymous"), Some(2), "{text}");
        assert_eq!(live(&text, "identity"), Some(0), "{text}");
        let text = metrics.encode(&with(Vec::new())).unwrap();
        assert_eq!(live(&text, "anonymous"), Some(0), "{text}");
        assert_eq!(live(&text, "stateless"), Some(0), "{text}");
    }
}
