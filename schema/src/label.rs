//! Routing labels: per exit, its drift state, bucket, flags and route, as exported to routers.
//!
//! The JSON written by `exitvoice labels` and `audit --labels-out` is a [`LabelsDoc`]; its shape
//! is versioned by [`LABELS_SCHEMA_VERSION`].

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::voice::Bucket;

/// Version of the labels JSON. Bump when a field changes meaning or is removed.
pub const LABELS_SCHEMA_VERSION: u32 = 1;

/// The labels document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabelsDoc {
    /// [`LABELS_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// When the labels were computed, RFC 3339 UTC.
    pub generated_at: String,
    /// The direct baseline the samples were compared with.
    pub baseline: Option<Baseline>,
    /// One label per exit, in exits-file order.
    pub exits: Vec<ExitLabel>,
}

/// The voices the auditor's own client produced without any exit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    /// TLS voice seen directly.
    pub tls_voice: Option<String>,
    /// HTTP/2 (or HTTP/1) voice seen directly.
    pub http_voice: Option<String>,
    /// Bucket seen directly.
    pub bucket: Option<Bucket>,
    /// When the baseline probe ran.
    pub at: String,
}

/// Drift state of an exit's recent voices (DESIGN.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftState {
    /// One voice, or one clean switch followed by a stable run.
    Stable,
    /// Two voices, switching back and forth.
    Alternating,
    /// Three or more voices.
    Mutating,
    /// Too few samples to say.
    Unknown,
}

impl fmt::Display for DriftState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Stable => "stable",
            Self::Alternating => "alternating",
            Self::Mutating => "mutating",
            Self::Unknown => "unknown",
        })
    }
}

/// Route of an exit (DESIGN.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// Keeps the client's identity: stable, browser-shaped, preserved, not intercepted.
    Identity,
    /// Usable for stateless fetches.
    Anonymous,
    /// Do not route through it.
    Quarantine,
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Identity => "identity",
            Self::Anonymous => "anonymous",
            Self::Quarantine => "quarantine",
        })
    }
}

/// The flags of an exit over its window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flags {
    /// Every successful sample had the baseline's TLS voice.
    pub tls_preserved: bool,
    /// Every successful sample had the baseline's HTTP voice.
    pub h2_preserved: bool,
    /// At least one sample was answered with a certificate other than the pinned one.
    pub tls_intercepted: bool,
    /// Every successful sample had the baseline's ALPN: offered, negotiated and spoken.
    #[serde(default)]
    pub alpn_preserved: bool,
    /// At least one sample's request arrived at another HTTP/2 stream id than the baseline's
    /// first, or behind another request on its connection (index > 1): re-mux, bucket C evidence.
    #[serde(default)]
    pub remuxed: bool,
}

/// Latency percentiles over the successful samples of the window, milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50_ms: Option<u64>,
    /// 95th percentile (nearest rank).
    pub p95_ms: Option<u64>,
}

/// One history entry: a probe's outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// When the probe started.
    pub at: String,
    /// The sample's voice, if it succeeded.
    pub voice: Option<String>,
    /// The sample's bucket.
    pub bucket: Option<Bucket>,
    /// The error class, if it failed.
    pub error: Option<String>,
}

/// The label of one exit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExitLabel {
    /// Exit name.
    pub name: String,
    /// Redacted exit URL.
    pub url: String,
    /// Tags from the exits file.
    pub tags: BTreeMap<String, String>,
    /// Distinct egress IPs seen in the window.
    pub egress_ips: Vec<String>,
    /// Drift state.
    pub state: DriftState,
    /// When the voice last changed, for a stable exit after one clean switch.
    pub changed_at: Option<String>,
    /// Bucket of the most recent successful sample.
    pub bucket: Option<Bucket>,
    /// Flags.
    pub flags: Flags,
    /// Distinct voices in the window, first-seen order.
    pub voices: Vec<String>,
    /// Route.
    pub route: Route,
    /// Why the route was chosen.
    pub route_reason: String,
    /// Successful samples in the window.
    pub samples: u32,
    /// Failed probes in the window by error class.
    pub errors: BTreeMap<String, u32>,
    /// Latency.
    pub latency: Latency,
    /// Start of the most recent probe.
    pub last_probe_at: Option<String>,
    /// Most recent probes, oldest first.
    pub history: Vec<HistoryEntry>,
}
