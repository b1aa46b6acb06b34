//! Routing labels: per exit, its drift state, bucket, flags and route, as exported to routers.
//!
//! The JSON written by `exitvoice labels` and `audit --labels-out` is a [`LabelsDoc`]; its shape
//! is versioned by [`LABELS_SCHEMA_VERSION`].

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::coherence::Coherence;
use crate::geo::{GeoSource, Place};
use crate::probe::{LedgerVerdict, UdpPath};
use crate::round_trip::GapVerdict;
use crate::voice::Bucket;

/// Version of the labels JSON. Bump when a field changes meaning or is removed.
///
/// 2: the `stateless` route, `route_reasons`, quarantine recovery (`quarantined_since`,
/// `recovered_at`, `clean_samples`, `transition`), `changes`, `egress`, `flags.not_proxied`,
/// `flags.tls_reoriginated`, `coherence`, `coherence_dropped_at`, `switch_changes`,
/// the document's `persona` and `pool`;
/// `mutating` is `stateless` by default instead of `quarantine` (auditor/README.md, "Version 1
/// readers").
///
/// 3: the exit's `geo` (countries and networks its samples left from, with `audit --geoip`),
/// `flags.geo_changed`, the route reason `geo_mismatch` (a sample left from another country or
/// network than the exits file's `country`/`asn`), the pool's `by_country`, `by_asn` and
/// `largest_asn_share` and `geo_sources` (auditor/README.md, "Version 2 readers").
///
/// 4: the exit host's TCP `stack` (from the SYNs the echo server kept), `flags.stack_changed`,
/// the pool's `by_stack`, `changes` at layer `tcp`, and the coherence reason
/// `ua_os_ne_tcp_os` (auditor/README.md, "Version 3 readers").
///
/// 5: `latency.round_trip` (the round-trip gap over the window's samples, against the
/// baseline's, with its verdict), `flags.gap_moved`, and the route reason `latency_gap`
/// (auditor/README.md, "Version 4 readers").
pub const LABELS_SCHEMA_VERSION: u32 = 5;

/// The labels document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabelsDoc {
    /// [`LABELS_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// When the labels were computed, RFC 3339 UTC.
    pub generated_at: String,
    /// The persona whose probes the labels judge (`rustls/chrome`, `chromium`); absent in
    /// version 1 snapshots.
    #[serde(default)]
    pub persona: Option<String>,
    /// The direct baseline the samples were compared with.
    pub baseline: Option<Baseline>,
    /// The pool as a whole; absent in version 1 snapshots.
    #[serde(default)]
    pub pool: Option<Pool>,
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

/// Route of an exit (DESIGN.md), from the most usable to the least.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// Keeps the client's identity: stable, browser-shaped, preserved, not intercepted.
    Identity,
    /// Usable for fetches that need no identity, from one stable voice.
    Anonymous,
    /// Usable only for stateless work: each request may leave with another voice (mutating).
    Stateless,
    /// Do not route through it.
    Quarantine,
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Identity => "identity",
            Self::Anonymous => "anonymous",
            Self::Stateless => "stateless",
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
    /// At least one sample left from the direct baseline's egress address: the exit forwarded
    /// nothing, or the exit list points at the auditor's own host.
    #[serde(default)]
    pub not_proxied: bool,
    /// At least one sample's TLS voice was not the baseline's. Every persona's voice is its
    /// own, so a changed voice means something terminated the client's TLS and spoke its own,
    /// whether or not the certificate check caught it.
    #[serde(default)]
    pub tls_reoriginated: bool,
    /// The direct baseline reached the echo over HTTP/3 and this exit's newest QUIC probe did
    /// not (or the exit is HTTP `CONNECT`, which carries no UDP): a browser behind it never gets
    /// the h3 it would get from where the auditor stands.
    #[serde(default)]
    pub h3_gap: bool,
    /// The window's samples left from more than one country (`audit --geoip`): a sticky exit
    /// that should stay in one country did not.
    #[serde(default)]
    pub geo_changed: bool,
    /// The window's samples arrived with more than one TCP voice: the exit's connections come
    /// from more than one host stack (a pool rotating over different hosts).
    #[serde(default)]
    pub stack_changed: bool,
    /// The newest run's round-trip gap moved from the run before it
    /// ([`RoundTripLabel::moved`]): the path behind the exit changed.
    #[serde(default)]
    pub gap_moved: bool,
}

/// An exit and HTTP/3: whether its UDP reaches the echo, and whether QUIC through it is the
/// client's own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct H3Label {
    /// The newest direct QUIC probe got its echo over HTTP/3.
    pub baseline_h3: bool,
    /// How the exit's newest QUIC probe travelled; `None` when the exit has had none since the
    /// baseline last spoke h3 (the exit is not probed over QUIC when the baseline was not).
    pub via: Option<UdpPath>,
    /// Whether that probe's echo came back over HTTP/3; `None` as for `via`.
    pub udp_carried: Option<bool>,
    /// Why not, when not: the failure's class and message, or that HTTP `CONNECT` carries TCP
    /// only.
    pub reason: Option<String>,
    /// The echo saw the baseline's TLS, QUIC and HTTP/3 voices through the exit; `None` unless
    /// both probes carried.
    pub preserved: Option<bool>,
    /// The address the echo saw the exit's QUIC come from.
    pub egress_ip: Option<String>,
    /// Start of the exit's newest QUIC probe's record.
    pub checked_at: Option<String>,
    /// The Chromium persona: the echo's h3 ledger on the identity its samples through the exit
    /// made (newest run). Chromium sends no QUIC while a proxy is configured, and the persona
    /// reaches every exit through one, so `never_tries_h3` is what a browser behind the exit
    /// does; anything else is a finding. Absent for other personas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chromium_ledger: Option<LedgerVerdict>,
}

/// Where an exit's samples left from, over its window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Egress {
    /// Distinct egress addresses among the window's samples.
    pub unique: u32,
    /// For an exit configured `rotate = true`: whether its samples left from at least two
    /// egresses (with fewer than two samples, `None`); `None` for other exits.
    pub rotating: Option<bool>,
    /// A gateway session's samples left from more than one egress within one session id.
    pub sticky_broken: bool,
}

/// The pool of exits as a whole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    /// Exits labelled.
    pub exits: u32,
    /// Exits by drift state.
    pub by_state: BTreeMap<String, u32>,
    /// Exits by bucket of their newest sample (`none` without one).
    pub by_bucket: BTreeMap<String, u32>,
    /// Exits by route.
    pub by_route: BTreeMap<String, u32>,
    /// Exits by the client families of their newest sample's coherence, `tls+http` (`-` for a
    /// side with no known family, as `rustls+chrome` or `openssl+-`; `none` without a coherence).
    /// Empty in snapshots written before it.
    #[serde(default)]
    pub by_family: BTreeMap<String, u32>,
    /// Successful share of the probes in the exits' windows, written to thousandths; `None`
    /// without probes.
    #[serde(serialize_with = "crate::decimal::share")]
    pub success_rate: Option<f64>,
    /// Distinct egress addresses over every exit's window.
    pub unique_egress: u32,
    /// At least two exits answered and all left from one egress: the pool is one exit in
    /// disguise (25 exits, 1 egress).
    pub collapsed_egress: bool,
    /// Exits by the country of their newest sample (`unknown` when no database knows it); empty
    /// without `audit --geoip`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_country: BTreeMap<String, u32>,
    /// Exits by the network (`AS<number>`) of their newest sample, likewise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_asn: BTreeMap<String, u32>,
    /// Share of the exits with a known network that leave from the largest one: how much of
    /// the pool one network's trouble takes down. Written to thousandths.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::decimal::share"
    )]
    pub largest_asn_share: Option<f64>,
    /// The geo databases the samples were placed with, as their metadata names them (some
    /// free databases require attribution); empty without `audit --geoip`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub geo_sources: Vec<GeoSource>,
    /// Exits by the TCP voice of their newest sample (the exit host's stack; `unknown` when
    /// the echo read no SYN): the pool's spread over host stacks. Empty when no sample had one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_stack: BTreeMap<String, u32>,
}

/// Latency percentiles over the successful samples of the window, milliseconds, and the
/// round-trip gap the echo measured on them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50_ms: Option<u64>,
    /// 95th percentile (nearest rank).
    pub p95_ms: Option<u64>,
    /// The round-trip gap over the window's samples; absent when no sample's echo measured
    /// it (an older echo server, a relayed one) and in labels before version 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trip: Option<RoundTripLabel>,
}

/// An exit's round-trip gap ([`crate::round_trip`]) over its window: what an origin timing the
/// exit's connections learns of the hidden leg behind it. All values integer microseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundTripLabel {
    /// Samples whose echo measured a gap.
    pub samples: u32,
    /// Smallest gap.
    pub gap_min_us: u32,
    /// Median gap (nearest rank).
    pub gap_p50_us: u32,
    /// Smallest TCP round trip (echo to exit).
    pub tcp_rtt_min_us: u32,
    /// Median TCP round trip.
    pub tcp_rtt_p50_us: u32,
    /// Smallest application round trip (echo to client, through the exit).
    pub app_rtt_min_us: u32,
    /// Median application round trip.
    pub app_rtt_p50_us: u32,
    /// The direct baseline's gap: the auditor's own processing, which every sample carries too.
    pub baseline_gap_us: Option<u32>,
    /// The smallest gap less the baseline's: the hidden leg the exit adds.
    pub excess_gap_us: u32,
    /// What `excess_gap_us` says, over the smallest application round trip less the
    /// baseline's gap.
    pub verdict: GapVerdict,
    /// Why, with the numbers.
    pub reason: String,
    /// The smallest gap of the run before the newest, when the window holds one.
    pub previous_run_gap_min_us: Option<u32>,
    /// The newest run's smallest gap differs from the previous run's by the `possible` gap
    /// and by a quarter of the larger one at least.
    pub moved: bool,
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
    /// Egress over the window: unique count, rotation, sticky sessions.
    #[serde(default)]
    pub egress: Egress,
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
    /// The deciding reason: the first of `route_reasons`.
    pub route_reason: String,
    /// Every reason that keeps the exit from a better route, most severe first: quarantine
    /// reasons, then stateless ones, then why not identity (or, for identity, why it is).
    #[serde(default)]
    pub route_reasons: Vec<String>,
    /// When the exit entered its current quarantine (the newest probe then); `None` outside
    /// quarantine.
    #[serde(default)]
    pub quarantined_since: Option<String>,
    /// When the exit last left quarantine; cleared when it enters quarantine again.
    #[serde(default)]
    pub recovered_at: Option<String>,
    /// Consecutive clean probes, newest back: successful, not intercepted, no quarantine
    /// bucket. A quarantined exit leaves quarantine only with `recover_after` of them.
    #[serde(default)]
    pub clean_samples: u32,
    /// The last change of route, kept until the next one (flapping shows as recent changes).
    #[serde(default)]
    pub transition: Option<Transition>,
    /// What differs between the baseline's voice and the newest sample's, field by field;
    /// empty when the voice is preserved.
    #[serde(default)]
    pub changes: Vec<Change>,
    /// When the window holds more than one voice: what differs between the newest sample and
    /// the latest sample of another voice (the last switch), field by field; else empty.
    #[serde(default)]
    pub switch_changes: Vec<Change>,
    /// Coherence of the newest sample, judged against the baseline's; `None` without a sample.
    #[serde(default)]
    pub coherence: Option<ExitCoherence>,
    /// The first sample in the window whose coherence fell below the baseline's (a reason the
    /// baseline does not have); `None` while every sample keeps it.
    #[serde(default)]
    pub coherence_dropped_at: Option<String>,
    /// What the exit does to HTTP/3, from the newest QUIC probes; `None` until a run has made a
    /// baseline QUIC probe (and with `audit --no-quic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h3: Option<H3Label>,
    /// Where the window's samples left from, with `audit --geoip`; `None` without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geo: Option<ExitGeo>,
    /// The exit host's TCP stack, from the SYNs of the window's samples as the echo server
    /// kept them; `None` when the echo read none (not Linux, a PROXY-protocol front, an older
    /// echo server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<ExitStack>,
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

/// The TCP stack an exit's connections arrive with: the exit host's own, since the exit opens
/// the connection the echo server accepts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStack {
    /// The newest sample's TCP voice.
    pub voice: String,
    /// Its p0f v3 signature.
    pub p0f: String,
    /// The operating system the echo's p0f database names for it, when it names one.
    pub os: Option<String>,
    /// Its likely hop distance from the echo server (initial TTL minus the TTL that arrived).
    pub hops: u8,
    /// The TCP voices the window's samples arrived with, first seen first.
    pub voices: Vec<String>,
}

/// Where an exit's samples left from, as the auditor's geo databases say.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitGeo {
    /// The newest sample's country and network.
    pub newest: Place,
    /// Countries the window's samples left from, first seen first (the `egress_ips` beside them
    /// keep their shape).
    pub countries: Vec<String>,
    /// Networks (autonomous system numbers) likewise.
    pub asns: Vec<u32>,
}

/// A change of an exit's route between two label computations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// The route before; `None` for the exit's first label.
    pub from: Option<Route>,
    /// The route after.
    pub to: Route,
    /// The newest probe when the change was seen, RFC 3339 UTC.
    pub at: String,
}

/// One field of a voice that differs between two observations, GREASE and extension-order
/// permutation normalised away (the same normalization as the voices).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// `tls`, `alpn`, `http2`, `http1` or `tcp`.
    pub layer: String,
    /// The field, e.g. `cipher_suites`, `settings`, `pseudo_header_order`.
    pub field: String,
    /// The field's value before, as text (lists comma-separated).
    pub before: String,
    /// The field's value after.
    pub after: String,
    /// List items present after but not before.
    pub added: Vec<String>,
    /// List items present before but not after.
    pub removed: Vec<String>,
    /// The items both sides share come in another order.
    pub reordered: bool,
}

/// An exit's coherence: its newest sample's, and whether its window keeps the baseline's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExitCoherence {
    /// The newest sample's coherence: score, reasons and families, at the top level of the
    /// object.
    #[serde(flatten)]
    pub newest: Coherence,
    /// The baseline's score, when there is a baseline.
    pub baseline_score: Option<f64>,
    /// Every sample of the window has no reason the baseline lacks.
    pub kept: bool,
}
