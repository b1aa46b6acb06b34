//! The route rule's configuration, the exits file's `[route]` table.

use exitvoice_schema::{Bucket, DriftState};
use serde::Deserialize;

/// The configurable route rule (see the module docs).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RouteRule {
    /// Buckets that quarantine an exit when any sample in the window has one.
    pub quarantine_buckets: Vec<Bucket>,
    /// Drift states that quarantine an exit.
    pub quarantine_states: Vec<DriftState>,
    /// Whether an intercepted sample quarantines the exit.
    pub quarantine_intercepted: bool,
    /// Whether a sample with a TLS voice other than the baseline's (re-originated TLS)
    /// quarantines the exit, as interception does.
    pub quarantine_reoriginated: bool,
    /// Failed share of the window's probes at or above which the exit is failing.
    pub quarantine_error_ratio: f64,
    /// Whether a sample leaving from another country or network than the exit's `country` /
    /// `asn` (`geo_mismatch`, with `audit --geoip`) quarantines the exit; when not, it only
    /// keeps it from identity.
    pub quarantine_geo_mismatch: bool,
    /// Whether a sample leaving from the direct baseline's egress quarantines the exit. Off by
    /// default: an exit on the auditor's own host (a test rig on loopback, a local forwarder)
    /// shares its egress legitimately; `audit --preflight` checks it regardless.
    pub quarantine_not_proxied: bool,
    /// Whether a `likely` round-trip gap (`latency_gap`: a client far behind the exit, which
    /// an origin can tell by timing) quarantines the exit. Off by default: the reason is
    /// listed, the route unchanged.
    pub quarantine_latency_gap: bool,
    /// Drift states that make an exit usable for stateless work only.
    pub stateless_states: Vec<DriftState>,
    /// Buckets that make an exit usable for stateless work only (any sample in the window).
    pub stateless_buckets: Vec<Bucket>,
    /// Consecutive clean probes a quarantined exit needs to leave quarantine.
    pub recover_after: u32,
    /// Drift states an identity exit may have.
    pub identity_states: Vec<DriftState>,
    /// Buckets an identity exit may have.
    pub identity_buckets: Vec<Bucket>,
}

impl Default for RouteRule {
    fn default() -> Self {
        Self {
            quarantine_buckets: vec![Bucket::D],
            quarantine_states: vec![],
            quarantine_intercepted: true,
            quarantine_reoriginated: true,
            quarantine_error_ratio: 0.5,
            quarantine_geo_mismatch: true,
            quarantine_not_proxied: false,
            quarantine_latency_gap: false,
            stateless_states: vec![DriftState::Mutating],
            stateless_buckets: vec![],
            recover_after: 4,
            identity_states: vec![DriftState::Stable],
            identity_buckets: vec![Bucket::A],
        }
    }
}
