//! The forward proxy's metrics (`exitvoice_broker_tunnels_…`), this instance's: tunnels open
//! per class and unit, opened and closed by reason, refused handshakes by reason, bytes each
//! way, and the time from a client's request to the exit's tunnel being up. Gauges move with
//! each tunnel and are never reset, so concurrent scrapes read the same figures.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

/// The proxy's counters and gauges.
#[derive(Debug)]
pub struct TunnelMetrics {
    open: Family<Labels, Gauge>,
    opened: Family<Labels, Counter>,
    closed: Family<Labels, Counter>,
    refused: Family<Labels, Counter>,
    bytes: Family<Labels, Counter>,
    setup_seconds: Histogram,
    /// Tunnels open per unit, for `GET /v1/exits`.
    by_unit: Mutex<HashMap<String, u64>>,
}

impl Default for TunnelMetrics {
    fn default() -> Self {
        Self {
            open: Family::default(),
            opened: Family::default(),
            closed: Family::default(),
            refused: Family::default(),
            bytes: Family::default(),
            setup_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            by_unit: Mutex::default(),
        }
    }
}

impl TunnelMetrics {
    /// Registers every series in `registry` (prefixed `exitvoice_broker`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "tunnels_open",
            "Proxy tunnels open on this instance, by class and unit",
            self.open.clone(),
        );
        registry.register(
            "tunnels_opened",
            "Proxy tunnels opened, by class and whether they joined a lease already held",
            self.opened.clone(),
        );
        registry.register(
            "tunnels_closed",
            "Proxy tunnels closed, by reason (client, exit, reset, idle, lease_ended, lease_ran_out, \
             lease_refused, store_lost)",
            self.closed.clone(),
        );
        registry.register(
            "tunnels_refused",
            "Proxy handshakes that opened no tunnel, by reason",
            self.refused.clone(),
        );
        registry.register(
            "tunnel_bytes",
            "Bytes relayed, by direction (up: client to exit)",
            self.bytes.clone(),
        );
        registry.register(
            "tunnel_setup_seconds",
            "From the client's request read to the exit's tunnel up (lease and dial)",
            self.setup_seconds.clone(),
        );
    }

    /// A tunnel of `class` on `unit` opened (`joined`: on a lease already held).
    pub fn opened(&self, class: &str, unit: &str, joined: bool, setup_seconds: f64) {
        let joined = if joined { "true" } else { "false" };
        self.opened
            .get_or_create(&labels(&[("class", class), ("joined", joined)]))
            .inc();
        self.open
            .get_or_create(&labels(&[("class", class), ("unit", unit)]))
            .inc();
        self.setup_seconds.observe(setup_seconds);
        *self
            .by_unit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(unit.to_owned())
            .or_default() += 1;
    }

    /// Tunnels open on this instance, per unit.
    pub fn open_by_unit(&self) -> HashMap<String, u64> {
        let by_unit = self.by_unit.lock().unwrap_or_else(PoisonError::into_inner);
        by_unit
            .iter()
            .filter(|(_, open)| **open > 0)
            .map(|(unit, open)| (unit.clone(), *open))
            .collect()
    }

    /// A tunnel of `class` on `unit` closed for `reason`, having carried `up` and `down` bytes.
    pub fn closed(&self, class: &str, unit: &str, reason: &str, up: u64, down: u64) {
        self.open
            .get_or_create(&labels(&[("class", class), ("unit", unit)]))
            .dec();
        if let Some(open) = self
            .by_unit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(unit)
        {
            *open = open.saturating_sub(1);
        }
        self.closed
            .get_or_create(&labels(&[("reason", reason)]))
            .inc();
        self.bytes
            .get_or_create(&labels(&[("direction", "up")]))
            .inc_by(up);
        self.bytes
            .get_or_create(&labels(&[("direction", "down")]))
            .inc_by(down);
    }

    /// A handshake refused for `reason`.
    pub fn refused(&self, reason: &'static str) {
        self.refused
            .get_or_create(&labels(&[("reason", reason)]))
            .inc();
    }
}
