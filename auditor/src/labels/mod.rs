//! Labels: per exit, from its recent probe records, the drift state, bucket, flags and route.
//!
//! # Route rule
//! Every part is configurable in the exits file's `[route]` table; the route is the worst one
//! any reason asks for, and `route_reasons` lists every reason, most severe first:
//! 1. **quarantine** if the exit is *failing* (no successful sample in the window, or a share of
//!    failed probes ≥ `quarantine_error_ratio`; a sample's retried attempts are probes too, each
//!    its own connection through the exit), if any sample was *intercepted*
//!    (`quarantine_intercepted`) or its TLS voice was not the baseline's (*re-originated*,
//!    `quarantine_reoriginated`), if a `rotate = true` exit did not rotate, if a sample left from
//!    the baseline's egress (`quarantine_not_proxied`, off by default), if a sample left from
//!    another country or network than the exits file's `country` / `asn` (`geo_mismatch`, with
//!    `audit --geoip`; `quarantine_geo_mismatch`, on by default), if any sample's bucket is in
//!    `quarantine_buckets` (default D), or if the drift state is in `quarantine_states` (default
//!    none);
//! 2. **stateless** if the drift state is in `stateless_states` (default mutating: every
//!    request may leave with another voice, fine for work that keeps no session) or a sample's
//!    bucket is in `stateless_buckets` (default none);
//! 3. **identity** if the state is in `identity_states` (default stable), the latest bucket is in
//!    `identity_buckets` (default A), and both `tls_preserved` and `h2_preserved` hold;
//! 4. **anonymous** otherwise.
//!
//! # Recovery
//! A quarantined exit (its previous label's route) stays quarantined, with the reason
//! `recovering: k of N clean probes`, until its newest `recover_after` probes (default 4) are all
//! clean: successful, not intercepted or re-originated (when those quarantine), in no quarantine
//! bucket. `quarantined_since` is the
//! newest probe when it entered quarantine, `recovered_at` the newest probe when it left, and
//! `transition` the last change of route (`from`, `to`, `at`), kept until the next one.
//!
//! # Flags
//! Each sample is compared with the run's direct baseline when its record is built
//! ([`crate::record`]); a label folds its window's successful samples:
//! - `tls_preserved`, `h2_preserved`: every sample had the baseline's TLS / HTTP voice;
//! - `alpn_preserved`: every sample's ALPN, as the echo saw it, equals the baseline's in all three
//!   facts — offered (the ClientHello list, in order), negotiated (the server's choice) and
//!   spoken (the first bytes after the handshake). An exit that re-originates TLS with another
//!   offer, or negotiates h2 with the client but speaks HTTP/1.1 upstream, breaks it;
//! - `remuxed`: at least one sample's request arrived at another HTTP/2 stream id than the
//!   baseline's first request, or was not the first request on its connection (index > 1). A
//!   fresh connection's first client stream is 1 (RFC 9113 section 5.1.1), so either means the
//!   exit put the request on a connection it shares or reuses: the evidence for bucket C;
//! - `tls_intercepted`: at least one sample was answered with a certificate other than the pinned
//!   one;
//! - `tls_reoriginated`: at least one sample's TLS voice was not the baseline's (every persona's
//!   voice is its own: a changed one was spoken by whoever terminated the client's TLS);
//! - `not_proxied`: at least one sample left from the baseline's egress address;
//! - `geo_changed`: the samples left from more than one country (`audit --geoip`);
//! - `stack_changed`: the samples arrived with more than one TCP voice (the SYNs the echo kept:
//!   the exit's connections come from more than one host stack);
//! - `gap_moved`: the newest run's smallest round-trip gap moved from the previous run's
//!   ([`gap`]): the path behind the exit changed.
//!
//! # Round-trip gap
//! `latency.round_trip` folds the gaps the echo measured on the window's samples ([`gap`]):
//! smallest and median gap, TCP and application round trip, the baseline's gap, the excess
//! over it and its verdict. A `likely` verdict gives the reason `latency_gap`: listed only by
//! default (the exit still routes as before), a quarantine reason with
//! `quarantine_latency_gap`.
//!
//! # Coherence
//! `coherence` is the newest sample's ([`crate::coherence`]) with the baseline's score beside
//! it; `kept` when no sample of the window has a reason the baseline lacks, else
//! `coherence_dropped_at` is the first sample that did.
//!
//! # Egress and changes
//! `egress` counts the window's egress addresses, checks that a `rotate = true` exit rotates
//! (at least two samples, at least two addresses) and that a gateway session keeps its address;
//! `changes` and `switch_changes` say field by field what differs from the baseline and across
//! the last voice switch ([`crate::changes`]).
//!
//! A sample without a baseline has no comparisons, so its label shows the `*_preserved` flags
//! false and `remuxed` false.

mod compare;
mod gap;
mod recovery;
mod route;
mod rule;
mod window;

use std::collections::BTreeMap;

use exitvoice_schema::{
    Baseline, ExitLabel, GapVerdict, H3Probe, HistoryEntry, Latency, ProbeRecord, Sample,
};

use crate::drift::DriftConfig;
use route::RouteInputs;
use window::Window;

pub use rule::RouteRule;

/// Most recent probes kept in a label's history.
pub const HISTORY_LEN: usize = 8;

/// What a label is computed from besides the records.
#[derive(Clone, Debug)]
pub struct ExitInfo {
    /// Exit name.
    pub name: String,
    /// Redacted URL.
    pub url: String,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// Configured as rotating (`rotate = true`).
    pub rotate: bool,
    /// The country it should leave from (`country` in the exits file).
    pub country: Option<String>,
    /// The network it should leave from (`asn`).
    pub asn: Option<u32>,
}

/// What a label is compared with: the direct baseline's sample and the exit's previous label
/// (of the same persona), which carries the quarantine state from run to run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Prior<'a> {
    /// The baseline sample, for `changes`.
    pub baseline: Option<&'a Sample>,
    /// The exit's previous label.
    pub previous: Option<&'a ExitLabel>,
    /// The newest direct QUIC probe, for the `h3` label.
    pub baseline_h3: Option<&'a H3Probe>,
}

/// The baseline summary of a successful direct probe record.
pub fn baseline_of(record: &ProbeRecord) -> Option<Baseline> {
    let sample = record.sample.as_ref()?;
    Some(Baseline {
        tls_voice: sample.tls_voice.as_ref().map(|v| v.0.clone()),
        http_voice: sample
            .h2_voice
            .as_ref()
            .or(sample.h1_voice.as_ref())
            .map(|v| v.0.clone()),
        bucket: sample.bucket,
        at: record.started_at.clone(),
    })
}

/// Computes one exit's label from its records (oldest first; the last `drift.window` count for
/// drift, flags and route; all of them for the clean streak and the history).
pub fn label(
    exit: &ExitInfo,
    records: &[ProbeRecord],
    rule: &RouteRule,
    drift_config: DriftConfig,
    prior: Prior<'_>,
) -> ExitLabel {
    // Inputs: what the window's samples say together.
    let window = Window::of(records, drift_config.window);
    let newest = window.newest();
    let (drift, voices) = window.drift(drift_config);
    let (egress_ips, egress) = window.egress(exit.rotate);
    let h3 = crate::h3_label::label(records, prior.baseline_h3);
    let geo = window.geo();
    let stack = window.stack();
    let round_trip = gap::round_trip(&window.samples, prior.baseline);
    let flags = window.flags(
        prior.baseline,
        h3.as_ref(),
        geo.as_ref(),
        stack.as_ref(),
        round_trip.as_ref(),
    );
    let bucket = newest.and_then(|s| s.bucket);
    let window_buckets = window.buckets();
    let inputs = RouteInputs {
        failing: window.failing(rule.quarantine_error_ratio),
        state: drift.state,
        bucket,
        window_buckets: &window_buckets,
        flags,
        not_rotating: egress.rotating == Some(false),
        geo_mismatch: window.geo_mismatch(exit.country.as_deref(), exit.asn),
        latency_gap: round_trip
            .as_ref()
            .is_some_and(|rt| rt.verdict == GapVerdict::Likely),
    };
    // Reasons, route, then recovery across runs.
    let decision = inputs.reasons(rule).decide();
    let standing = recovery::standing(decision, records, rule, prior.previous);
    let route_reasons = standing.decision.reasons;
    let (coherence, coherence_dropped_at) =
        compare::coherence(prior.baseline, &window.samples, newest);
    ExitLabel {
        name: exit.name.clone(),
        url: exit.url.clone(),
        tags: exit.tags.clone(),
        egress_ips,
        egress,
        state: drift.state,
        changed_at: drift.changed_at,
        bucket,
        flags,
        voices,
        route: standing.decision.route,
        route_reason: route_reasons.first().cloned().unwrap_or_default(),
        route_reasons,
        quarantined_since: standing.quarantined_since,
        recovered_at: standing.recovered_at,
        clean_samples: standing.clean_samples,
        transition: standing.transition,
        changes: compare::baseline_changes(prior.baseline, newest),
        switch_changes: compare::switch_changes(newest, &window.comparable),
        coherence,
        coherence_dropped_at,
        h3,
        geo,
        stack,
        samples: u32::try_from(window.samples.len()).unwrap_or(u32::MAX),
        errors: window.errors(),
        latency: Latency {
            round_trip,
            ..window.latency()
        },
        last_probe_at: records.last().map(|r| r.started_at.clone()),
        history: history(records),
    }
}

/// The newest [`HISTORY_LEN`] records, in brief.
fn history(records: &[ProbeRecord]) -> Vec<HistoryEntry> {
    let start = records.len().saturating_sub(HISTORY_LEN);
    records
        .get(start..)
        .unwrap_or_default()
        .iter()
        .map(|r| HistoryEntry {
            at: r.started_at.clone(),
            voice: r.sample.as_ref().map(Sample::voice),
            bucket: r.sample.as_ref().and_then(|s| s.bucket),
            error: r.error.as_ref().map(|e| e.class.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests;
