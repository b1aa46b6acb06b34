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
//!    the baseline's egress (`quarantine_not_proxied`, off by default), if any sample's bucket
//!    is in `quarantine_buckets` (default D), or if the drift state is in `quarantine_states`
//!    (default none);
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
//! - `not_proxied`: at least one sample left from the baseline's egress address.
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

use std::collections::BTreeMap;

use exitvoice_schema::{
    Baseline, Bucket, DriftState, Egress, ExitCoherence, ExitLabel, Flags, H3Probe, HistoryEntry,
    Latency, ProbeRecord, Route, Sample, Transition,
};
use serde::Deserialize;

use crate::changes;
use crate::drift::{self, DriftConfig};

/// Most recent probes kept in a label's history.
pub const HISTORY_LEN: usize = 8;

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
    /// Whether a sample leaving from the direct baseline's egress quarantines the exit. Off by
    /// default: an exit on the auditor's own host (a test rig on loopback, a local forwarder)
    /// shares its egress legitimately; `audit --preflight` checks it regardless.
    pub quarantine_not_proxied: bool,
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
            quarantine_not_proxied: false,
            stateless_states: vec![DriftState::Mutating],
            stateless_buckets: vec![],
            recover_after: 4,
            identity_states: vec![DriftState::Stable],
            identity_buckets: vec![Bucket::A],
        }
    }
}

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
    let start = records.len().saturating_sub(drift_config.window);
    let window = records.get(start..).unwrap_or_default();
    let samples: Vec<_> = window
        .iter()
        .filter_map(|r| r.sample.as_ref().map(|s| (r, s)))
        .collect();
    // A new normalization (`tlsv1_` → `tlsv2_` after an upgrade, say) renames every voice of its
    // layer at once: drift and the voice list only compare samples voiced like the newest one.
    let newest = samples.last().map(|(_, s)| *s);
    let comparable: Vec<_> = samples
        .iter()
        .filter(|(_, s)| newest.is_none_or(|newest| s.voiced_like(newest)))
        .collect();
    let voiced: Vec<(String, String)> = comparable
        .iter()
        .map(|(r, s)| (s.voice(), r.started_at.clone()))
        .collect();
    let drift = drift::classify(&voiced, drift_config);

    let mut voices: Vec<String> = Vec::new();
    for (voice, _) in voiced {
        if !voices.contains(&voice) {
            voices.push(voice);
        }
    }
    let mut egress_ips: Vec<String> = Vec::new();
    for (_, sample) in &samples {
        if !egress_ips.contains(&sample.egress_ip) {
            egress_ips.push(sample.egress_ip.clone());
        }
    }
    let egress = Egress {
        unique: u32::try_from(egress_ips.len()).unwrap_or(u32::MAX),
        rotating: (exit.rotate && samples.len() >= 2).then_some(egress_ips.len() >= 2),
        sticky_broken: sticky_broken(&samples),
    };
    let h3 = crate::h3_label::label(records, prior.baseline_h3);
    let flags = Flags {
        tls_preserved: !samples.is_empty()
            && samples.iter().all(|(_, s)| s.tls_preserved == Some(true)),
        h2_preserved: !samples.is_empty()
            && samples.iter().all(|(_, s)| s.h2_preserved == Some(true)),
        tls_intercepted: samples.iter().any(|(_, s)| s.tls_intercepted),
        alpn_preserved: !samples.is_empty()
            && samples.iter().all(|(_, s)| s.alpn_preserved == Some(true)),
        remuxed: samples.iter().any(|(_, s)| s.remuxed == Some(true)),
        not_proxied: prior
            .baseline
            .is_some_and(|b| samples.iter().any(|(_, s)| s.egress_ip == b.egress_ip)),
        tls_reoriginated: samples.iter().any(|(_, s)| s.tls_preserved == Some(false)),
        h3_gap: crate::h3_label::gap(h3.as_ref()),
    };
    // Every connection through the exit counts, the retried attempts of a sample too.
    let mut errors: BTreeMap<String, u32> = BTreeMap::new();
    let failures = window
        .iter()
        .flat_map(|r| r.retried.iter().chain(r.error.as_ref()));
    for failure in failures {
        *errors.entry(failure.class.clone()).or_default() += 1;
    }
    let bucket = samples.last().and_then(|(_, s)| s.bucket);
    let retried: usize = window.iter().map(|r| r.retried.len()).sum();
    let failed = window.len() - samples.len() + retried;
    let probes = window.len() + retried;
    #[allow(clippy::cast_precision_loss)]
    let error_ratio = if window.is_empty() {
        1.0
    } else {
        failed as f64 / probes as f64
    };
    let window_buckets: Vec<Bucket> = samples.iter().filter_map(|(_, s)| s.bucket).collect();
    let verdict = Verdict {
        failing: (samples.is_empty() || error_ratio >= rule.quarantine_error_ratio)
            .then(|| format!("failing: {failed} of {probes} probes failed")),
        state: drift.state,
        bucket,
        window_buckets: &window_buckets,
        flags,
        not_rotating: egress.rotating == Some(false),
    };
    let (mut route, mut route_reasons) = verdict.judge(rule);

    // Recovery: a quarantined exit stays quarantined until `recover_after` clean probes in a row.
    let clean_samples = clean_streak(records, rule);
    let now = records.last().map(|r| r.started_at.clone());
    let was_quarantined = prior.previous.is_some_and(|p| p.route == Route::Quarantine);
    if was_quarantined && route != Route::Quarantine && clean_samples < rule.recover_after {
        route_reasons.insert(
            0,
            format!(
                "recovering: {clean_samples} of {} clean probes",
                rule.recover_after
            ),
        );
        route = Route::Quarantine;
    }
    let (quarantined_since, recovered_at) = match (route, was_quarantined) {
        (Route::Quarantine, true) => (
            prior
                .previous
                .and_then(|p| p.quarantined_since.clone())
                .or_else(|| now.clone()),
            None,
        ),
        (Route::Quarantine, false) => (now.clone(), None),
        (_, true) => (None, now.clone()),
        (_, false) => (None, prior.previous.and_then(|p| p.recovered_at.clone())),
    };
    let transition = match prior.previous {
        Some(previous) if previous.route == route => previous.transition.clone(),
        previous => now.clone().map(|at| Transition {
            from: previous.map(|p| p.route),
            to: route,
            at,
        }),
    };
    // The last switch: the newest sample against the latest one that spoke another voice.
    let switch_changes = newest
        .and_then(|newest| {
            let voice = newest.voice();
            comparable
                .iter()
                .rev()
                .find(|(_, s)| s.voice() != voice)
                .map(|(_, before)| {
                    changes::between(
                        &changes::VoiceView::of_echo(&before.echo),
                        &changes::VoiceView::of_echo(&newest.echo),
                    )
                })
        })
        .unwrap_or_default();
    let changes = match (prior.baseline, newest) {
        (Some(baseline), Some(newest))
            if !(newest.tls_preserved == Some(true) && newest.h2_preserved == Some(true)) =>
        {
            changes::between(
                &changes::VoiceView::of_echo(&baseline.echo),
                &changes::VoiceView::of_echo(&newest.echo),
            )
        }
        _ => Vec::new(),
    };

    // Coherence is judged against the baseline's: a sample keeps it when it has no reason the
    // baseline lacks (the rustls persona with the chrome profile is incoherent on purpose).
    let baseline_coherence = prior.baseline.and_then(|b| b.coherence.as_ref());
    let keeps = |sample: &Sample| {
        sample.coherence.as_ref().is_none_or(|c| {
            c.reasons
                .iter()
                .all(|r| baseline_coherence.is_some_and(|b| b.reasons.contains(r)))
        })
    };
    let coherence_dropped_at = samples
        .iter()
        .find(|(_, s)| !keeps(s))
        .map(|(r, _)| r.started_at.clone());
    let coherence = newest
        .and_then(|s| s.coherence.as_ref())
        .map(|c| ExitCoherence {
            newest: c.clone(),
            baseline_score: baseline_coherence.map(|b| b.score),
            kept: coherence_dropped_at.is_none(),
        });

    let mut latencies: Vec<u64> = samples.iter().filter_map(|(r, _)| r.latency_ms).collect();
    latencies.sort_unstable();
    let history_start = records.len().saturating_sub(HISTORY_LEN);
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
        route,
        route_reason: route_reasons.first().cloned().unwrap_or_default(),
        route_reasons,
        quarantined_since,
        recovered_at,
        clean_samples,
        transition,
        changes,
        switch_changes,
        coherence,
        coherence_dropped_at,
        h3,
        samples: u32::try_from(samples.len()).unwrap_or(u32::MAX),
        errors,
        latency: Latency {
            p50_ms: percentile(&latencies, 50),
            p95_ms: percentile(&latencies, 95),
        },
        last_probe_at: now,
        history: records
            .get(history_start..)
            .unwrap_or_default()
            .iter()
            .map(|r| HistoryEntry {
                at: r.started_at.clone(),
                voice: r.sample.as_ref().map(exitvoice_schema::Sample::voice),
                bucket: r.sample.as_ref().and_then(|s| s.bucket),
                error: r.error.as_ref().map(|e| e.class.clone()),
            })
            .collect(),
    }
}

/// What the route rule reads from an exit's window.
struct Verdict<'a> {
    /// Why the exit is failing, if it is.
    failing: Option<String>,
    state: DriftState,
    /// Bucket of the newest sample.
    bucket: Option<Bucket>,
    /// Buckets of every sample in the window.
    window_buckets: &'a [Bucket],
    flags: Flags,
    /// A rotating exit whose samples all left from one egress.
    not_rotating: bool,
}

impl Verdict<'_> {
    /// The route and every reason for it, most severe first (see the module docs).
    fn judge(&self, rule: &RouteRule) -> (Route, Vec<String>) {
        let buckets_in = |wanted: &[Bucket]| -> Vec<String> {
            let mut seen: Vec<Bucket> = Vec::new();
            for b in self.window_buckets {
                if wanted.contains(b) && !seen.contains(b) {
                    seen.push(*b);
                }
            }
            seen.iter().map(|b| format!("bucket {b}")).collect()
        };
        let mut quarantine: Vec<String> = self.failing.iter().cloned().collect();
        if rule.quarantine_intercepted && self.flags.tls_intercepted {
            quarantine.push("tls_intercepted".to_owned());
        }
        if rule.quarantine_reoriginated && self.flags.tls_reoriginated {
            quarantine.push("tls_reoriginated".to_owned());
        }
        if self.not_rotating {
            quarantine.push("not_rotating".to_owned());
        }
        if rule.quarantine_not_proxied && self.flags.not_proxied {
            quarantine.push("not_proxied".to_owned());
        }
        quarantine.extend(buckets_in(&rule.quarantine_buckets));
        if rule.quarantine_states.contains(&self.state) {
            quarantine.push(format!("state {}", self.state));
        }
        let mut stateless: Vec<String> = Vec::new();
        if rule.stateless_states.contains(&self.state) {
            stateless.push(format!("state {}", self.state));
        }
        stateless.extend(buckets_in(&rule.stateless_buckets));
        stateless.retain(|r| !quarantine.contains(r));
        let identity_state = rule.identity_states.contains(&self.state);
        let identity_bucket = self
            .bucket
            .is_some_and(|b| rule.identity_buckets.contains(&b));
        let mut not_identity: Vec<String> = Vec::new();
        if !identity_state {
            not_identity.push(format!("state {}", self.state));
        }
        if !identity_bucket {
            not_identity.push(
                self.bucket
                    .map_or("no h2 bucket".to_owned(), |b| format!("bucket {b}")),
            );
        }
        if !self.flags.tls_preserved {
            not_identity.push("tls not preserved".to_owned());
        }
        if !self.flags.h2_preserved {
            not_identity.push("h2 not preserved".to_owned());
        }
        let route = if !quarantine.is_empty() {
            Route::Quarantine
        } else if !stateless.is_empty() {
            Route::Stateless
        } else if not_identity.is_empty() {
            return (
                Route::Identity,
                vec!["stable, browser-shaped, preserved".to_owned()],
            );
        } else {
            Route::Anonymous
        };
        let mut reasons = quarantine;
        for reason in stateless.into_iter().chain(not_identity) {
            if !reasons.contains(&reason) {
                reasons.push(reason);
            }
        }
        (route, reasons)
    }
}

/// Whether one gateway session id's samples left from more than one egress (a sticky session
/// that did not stick). Samples without a session id are not compared.
fn sticky_broken(samples: &[(&ProbeRecord, &Sample)]) -> bool {
    samples.iter().enumerate().any(|(i, (record, sample))| {
        record.session.is_some()
            && samples[..i]
                .iter()
                .any(|(r, s)| r.session == record.session && s.egress_ip != sample.egress_ip)
    })
}

/// Consecutive clean probes, newest back: successful at the first attempt, not intercepted and
/// not re-originated (when those quarantine), in no quarantine bucket.
fn clean_streak(records: &[ProbeRecord], rule: &RouteRule) -> u32 {
    let clean = |r: &&ProbeRecord| {
        r.retried.is_empty()
            && r.sample.as_ref().is_some_and(|s| {
                let intercepted = rule.quarantine_intercepted && s.tls_intercepted;
                let reoriginated = rule.quarantine_reoriginated && s.tls_preserved == Some(false);
                let bucket = s
                    .bucket
                    .is_some_and(|b| rule.quarantine_buckets.contains(&b));
                !(intercepted || reoriginated || bucket)
            })
    };
    u32::try_from(records.iter().rev().take_while(clean).count()).unwrap_or(u32::MAX)
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[u64], pct: usize) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (pct * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitvoice_schema::{Alpn, Echo, ProbeFailure, RequestPosition, Sample, Spoken, VoiceId};

    /// An h2 echo without TLS or HTTP/2 layers: the labels read only the sample.
    fn echo() -> Echo {
        let mut echo = crate::test_echo::echo(&serde_json::Value::Null);
        echo.alpn = Alpn {
            offered: vec![],
            negotiated: None,
            spoken: Spoken::H2,
        };
        echo.tls = None;
        echo.http2 = None;
        echo
    }

    fn ok(at: u32, tls: &str, bucket: Bucket, preserved: bool, intercepted: bool) -> ProbeRecord {
        ProbeRecord {
            schema_version: 1,
            run_id: "r".into(),
            exit: Some("x".into()),
            exit_url: None,
            session: None,
            token: format!("t{at}"),
            persona: "p".into(),
            started_at: format!("2026-01-01T00:00:{at:02}Z"),
            latency_ms: Some(u64::from(at) * 10),
            error: None,
            sample: Some(Sample {
                egress_ip: "127.0.0.1".into(),
                tls_voice: Some(VoiceId(tls.into())),
                h2_voice: Some(VoiceId("h2v1_x".into())),
                h1_voice: None,
                bucket: Some(bucket),
                profile: None,
                alpn: Some("h2".into()),
                stream_id: Some(1),
                request_index: 1,
                tls_intercepted: intercepted,
                cert_spki_sha256: String::new(),
                cert_issuer: None,
                tls_preserved: Some(preserved),
                h2_preserved: Some(preserved),
                alpn_preserved: Some(preserved),
                remuxed: Some(false),
                coherence: None,
                echo: echo(),
            }),
            retried: Vec::new(),
            h3: None,
            ledger: None,
        }
    }

    fn failed(at: u32, class: &str) -> ProbeRecord {
        ProbeRecord {
            error: Some(ProbeFailure {
                class: class.into(),
                phase: None,
                message: String::new(),
            }),
            sample: None,
            latency_ms: None,
            ..ok(at, "", Bucket::A, true, false)
        }
    }

    fn info() -> ExitInfo {
        ExitInfo {
            name: "x".into(),
            url: "http://u:***@h:1".into(),
            tags: BTreeMap::new(),
            rotate: false,
        }
    }

    fn route(records: &[ProbeRecord]) -> ExitLabel {
        label(
            &info(),
            records,
            &RouteRule::default(),
            DriftConfig::default(),
            Prior::default(),
        )
    }

    #[test]
    fn stable_browser_shaped_preserved_is_identity() {
        let records: Vec<_> = (1..=4)
            .map(|i| ok(i, "tlsA", Bucket::A, true, false))
            .collect();
        let label = route(&records);
        assert_eq!(
            (label.state, label.route),
            (DriftState::Stable, Route::Identity)
        );
        assert!(label.flags.tls_preserved && label.flags.h2_preserved);
        assert_eq!(label.samples, 4);
        assert_eq!(label.latency.p50_ms, Some(20));
        assert_eq!(label.latency.p95_ms, Some(40));
        assert_eq!(label.last_probe_at.as_deref(), Some("2026-01-01T00:00:04Z"));
    }

    #[test]
    fn quarantine_reasons() {
        let intercepted: Vec<_> = (1..=4)
            .map(|i| ok(i, "tlsM", Bucket::B, false, true))
            .collect();
        assert_eq!(route(&intercepted).route, Route::Quarantine);
        let downgrade: Vec<_> = (1..=4)
            .map(|i| ok(i, "tlsA", Bucket::D, true, false))
            .collect();
        assert_eq!(route(&downgrade).route_reason, "bucket D");
        let mutating: Vec<_> = ["a", "b", "c"]
            .iter()
            .zip(1..)
            .map(|(v, i)| ok(i, v, Bucket::A, true, false))
            .collect();
        let label = route(&mutating);
        assert_eq!(
            (label.state, label.route),
            (DriftState::Mutating, Route::Stateless)
        );
        assert_eq!(label.route_reasons, ["state mutating"]);
        let rule: RouteRule = toml::from_str("quarantine_states = [\"mutating\"]").unwrap();
        let strict = label_with(&mutating, &rule, Prior::default());
        assert_eq!(strict.route, Route::Quarantine);
        let failing: Vec<_> = (1..=4).map(|i| failed(i, "proxy_auth")).collect();
        let label = route(&failing);
        assert_eq!(label.route, Route::Quarantine);
        assert_eq!(label.errors.get("proxy_auth"), Some(&4));
        assert_eq!(label.state, DriftState::Unknown);
    }

    /// Issue 35: a balancer's dead backend hidden behind each sample's retry (every first attempt
    /// times out, every retry lands on the live backend) is half of the exit's connections.
    #[test]
    fn retried_attempts_are_probes_of_their_own() {
        let records: Vec<_> = (1..=4)
            .map(|i| ProbeRecord {
                retried: vec![ProbeFailure {
                    class: "timeout".into(),
                    phase: Some("tunnel".into()),
                    message: String::new(),
                }],
                ..ok(i, "tls_a", Bucket::A, true, false)
            })
            .collect();
        let label = route(&records);
        assert_eq!(label.errors.get("timeout"), Some(&4));
        assert_eq!(label.route, Route::Quarantine);
        assert_eq!(label.route_reasons[0], "failing: 4 of 8 probes failed");
        assert_eq!(label.clean_samples, 0);
        assert_eq!(
            label.state,
            DriftState::Stable,
            "the voices themselves agree"
        );
        // Without the retries the same voices make an identity exit.
        let first_try: Vec<_> = (1..=4)
            .map(|i| ok(i, "tls_a", Bucket::A, true, false))
            .collect();
        assert_eq!(route(&first_try).route, Route::Identity);
    }

    /// Records from before a normalization upgrade (`tlsv1_`) are not compared with the ones
    /// after it: no switch, no `changed_at`, only the new voice listed.
    #[test]
    fn a_new_normalization_is_not_drift() {
        let records: Vec<_> = (1..=6)
            .map(|i| {
                let tls = if i <= 3 { "tlsv1_aaaa" } else { "tlsv2_bbbb" };
                ok(i, tls, Bucket::A, true, false)
            })
            .collect();
        let label = route(&records);
        assert_eq!(label.state, DriftState::Stable);
        assert_eq!(label.changed_at, None);
        assert_eq!(label.voices, ["tlsv2_bbbb+h2v1_x"]);
        assert_eq!(label.samples, 6);
        // Two voices of one scheme after the upgrade are still a switch.
        let mut switched = records.clone();
        switched.extend((7..=8).map(|i| ok(i, "tlsv2_cccc", Bucket::A, true, false)));
        let label = route(&switched);
        assert_eq!(label.state, DriftState::Stable);
        assert_eq!(label.changed_at.as_deref(), Some("2026-01-01T00:00:07Z"));
        // HTTP/2 and HTTP/1 voices are two layers, not two versions: they are compared.
        let flapping: Vec<_> = (1..=4)
            .map(|i| {
                let mut record = ok(i, "tlsv2_bbbb", Bucket::A, true, false);
                if let Some(sample) = record.sample.as_mut().filter(|_| i % 2 == 0) {
                    sample.h2_voice = None;
                    sample.h1_voice = Some(VoiceId("h1v1_y".into()));
                }
                record
            })
            .collect();
        assert_eq!(route(&flapping).state, DriftState::Alternating);
    }

    fn label_with(records: &[ProbeRecord], rule: &RouteRule, prior: Prior<'_>) -> ExitLabel {
        label(&info(), records, rule, DriftConfig::default(), prior)
    }

    /// Issue 15 §4: a mutating, intercepted, bucket-D exit names all three, most severe first,
    /// and what keeps it from identity after them.
    #[test]
    fn every_reason_is_listed() {
        let records: Vec<_> = ["a", "b", "c", "d"]
            .iter()
            .zip(1..)
            .map(|(v, i)| ok(i, v, Bucket::D, false, true))
            .collect();
        let label = route(&records);
        assert_eq!(label.route, Route::Quarantine);
        assert_eq!(
            label.route_reasons,
            [
                "tls_intercepted",
                "tls_reoriginated",
                "bucket D",
                "state mutating",
                "tls not preserved",
                "h2 not preserved"
            ]
        );
        assert_eq!(label.route_reason, "tls_intercepted");
        let anonymous: Vec<_> = (1..=4)
            .map(|i| ok(i, "tlsA", Bucket::B, true, false))
            .collect();
        assert_eq!(route(&anonymous).route_reasons, ["bucket B"]);
    }

    /// Quarantine, recovery after `recover_after` clean probes, and the transitions, run by run:
    /// each run's label is computed from the records so far and the previous run's label.
    #[test]
    fn quarantine_recovers_after_enough_clean_probes() {
        let rule = RouteRule::default();
        let mut records: Vec<ProbeRecord> = Vec::new();
        let mut previous: Option<ExitLabel> = None;
        // (probes of the run: true = clean success, false = failure; route, clean_samples,
        //  quarantined_since, recovered_at)
        type Run = (&'static [bool], Route, u32, Option<u32>, Option<u32>);
        #[rustfmt::skip]
        let runs: [Run; 5] = [
            (&[true, true, true], Route::Identity, 3, None, None),
            (&[false, false, false], Route::Quarantine, 0, Some(6), None),
            // 3 of 8 failed: the window would pass, but 3 clean probes are not 4.
            (&[true, true, true], Route::Quarantine, 3, Some(6), None),
            (&[true], Route::Identity, 4, None, Some(10)),
            (&[true], Route::Identity, 5, None, Some(10)),
        ];
        let mut at = 0;
        for (run, (probes, route, clean, since, recovered)) in runs.iter().enumerate() {
            for &clean in *probes {
                at += 1;
                records.push(if clean {
                    ok(at, "tlsA", Bucket::A, true, false)
                } else {
                    failed(at, "proxy_auth")
                });
            }
            let prior = Prior {
                baseline: None,
                previous: previous.as_ref(),
                baseline_h3: None,
            };
            let label = label_with(&records, &rule, prior);
            let time = |t: Option<u32>| t.map(|t| format!("2026-01-01T00:00:{t:02}Z"));
            assert_eq!(label.route, *route, "run {run}: {:?}", label.route_reasons);
            assert_eq!(label.clean_samples, *clean, "run {run}");
            assert_eq!(label.quarantined_since, time(*since), "run {run}");
            assert_eq!(label.recovered_at, time(*recovered), "run {run}");
            if run == 2 {
                assert_eq!(label.route_reasons[0], "recovering: 3 of 4 clean probes");
            }
            previous = Some(label);
        }
        // The last transition is kept: quarantine → identity at the recovery.
        let transition = previous.unwrap().transition.unwrap();
        assert_eq!(
            (transition.from, transition.to, transition.at.as_str()),
            (
                Some(Route::Quarantine),
                Route::Identity,
                "2026-01-01T00:00:10Z"
            )
        );
        // An intercepted success is not clean.
        let mixed = vec![
            ok(1, "tlsA", Bucket::A, true, false),
            ok(2, "tlsA", Bucket::A, true, true),
            ok(3, "tlsA", Bucket::A, true, false),
        ];
        assert_eq!(clean_streak(&mixed, &rule), 1);
    }

    fn from(at: u32, egress: &str, session: Option<&str>) -> ProbeRecord {
        let mut record = ok(at, "tlsA", Bucket::A, true, false);
        record.session = session.map(str::to_owned);
        if let Some(sample) = record.sample.as_mut() {
            sample.egress_ip = egress.to_owned();
        }
        record
    }

    /// Issue 15 §2: egress against the baseline's, rotation of a `rotate = true` exit, and
    /// sticky sessions that do not stick.
    #[test]
    fn egress_truth() {
        let baseline = from(0, "127.0.0.1", None).sample.unwrap();
        let prior = Prior {
            baseline: Some(&baseline),
            previous: None,
            baseline_h3: None,
        };
        let rotating = ExitInfo {
            rotate: true,
            ..info()
        };
        let judge = |exit: &ExitInfo, records: &[ProbeRecord], rule: &RouteRule| {
            label(exit, records, rule, DriftConfig::default(), prior)
        };
        let rule = RouteRule::default();
        let proxied: Vec<_> = (1..=4)
            .map(|i| from(i, &format!("127.0.0.{}", 1 + i), None))
            .collect();
        let label = judge(&rotating, &proxied, &rule);
        assert!(!label.flags.not_proxied);
        assert_eq!(label.egress.unique, 4);
        assert_eq!(label.egress.rotating, Some(true));
        assert_eq!(label.route, Route::Identity);

        let stuck: Vec<_> = (1..=4).map(|i| from(i, "127.0.0.9", None)).collect();
        let label = judge(&rotating, &stuck, &rule);
        assert_eq!(label.egress.rotating, Some(false));
        assert_eq!(
            (label.route, label.route_reason.as_str()),
            (Route::Quarantine, "not_rotating")
        );
        assert_eq!(
            judge(&info(), &stuck, &rule).egress.rotating,
            None,
            "not configured"
        );

        let direct: Vec<_> = (1..=4)
            .map(|i| from(i, if i == 2 { "127.0.0.1" } else { "127.0.0.5" }, None))
            .collect();
        let label = judge(&info(), &direct, &rule);
        assert!(label.flags.not_proxied);
        assert_eq!(label.route, Route::Identity, "a flag only, by default");
        let strict = RouteRule {
            quarantine_not_proxied: true,
            ..RouteRule::default()
        };
        assert_eq!(
            judge(&info(), &direct, &strict).route_reasons[0],
            "not_proxied"
        );

        let sticky: Vec<_> = [
            ("a", "127.0.0.2"),
            ("a", "127.0.0.2"),
            ("b", "127.0.0.3"),
            ("b", "127.0.0.3"),
        ]
        .iter()
        .zip(1..)
        .map(|((session, ip), i)| from(i, ip, Some(session)))
        .collect();
        assert!(!judge(&info(), &sticky, &rule).egress.sticky_broken);
        let mut broken = sticky.clone();
        broken.push(from(5, "127.0.0.4", Some("b")));
        assert!(judge(&info(), &broken, &rule).egress.sticky_broken);
    }

    /// Issue 15 §6: a switch of voice says which fields changed across it.
    #[test]
    fn a_switch_says_what_changed() {
        let records: Vec<_> = (1..=4)
            .map(|i| {
                let mut record = ok(i, if i <= 2 { "a" } else { "b" }, Bucket::A, true, false);
                if let Some(sample) = record.sample.as_mut() {
                    sample.echo.alpn.negotiated =
                        Some(if i <= 2 { "h2" } else { "http/1.1" }.into());
                }
                record
            })
            .collect();
        let label = route(&records);
        assert_eq!(label.switch_changes.len(), 1, "{:?}", label.switch_changes);
        let change = &label.switch_changes[0];
        assert_eq!(
            (change.layer.as_str(), change.field.as_str()),
            ("alpn", "negotiated")
        );
        assert_eq!(
            (change.before.as_str(), change.after.as_str()),
            ("h2", "http/1.1")
        );
        assert!(route(&records[..2]).switch_changes.is_empty(), "one voice");
    }

    #[test]
    fn library_h2_is_anonymous_and_rule_is_configurable() {
        let records: Vec<_> = (1..=4)
            .map(|i| ok(i, "tlsA", Bucket::B, true, false))
            .collect();
        assert_eq!(route(&records).route, Route::Anonymous);
        let rule = RouteRule {
            identity_buckets: vec![Bucket::A, Bucket::B],
            ..RouteRule::default()
        };
        let label = label(
            &info(),
            &records,
            &rule,
            DriftConfig::default(),
            Prior::default(),
        );
        assert_eq!(label.route, Route::Identity);
        let rule: RouteRule = toml::from_str("quarantine_buckets = [\"D\", \"C\"]").unwrap();
        assert_eq!(rule.quarantine_buckets, [Bucket::D, Bucket::C]);
        assert!(rule.quarantine_intercepted, "defaults fill the rest");
    }

    /// An echo whose ALPN and request position are the given ones.
    fn echo_at(alpn: (&[&str], Option<&str>, Spoken), stream_id: Option<u32>, index: u32) -> Echo {
        let (offered, negotiated, spoken) = alpn;
        Echo {
            alpn: Alpn {
                offered: offered.iter().map(|&p| p.to_owned()).collect(),
                negotiated: negotiated.map(str::to_owned),
                spoken,
            },
            request: RequestPosition { stream_id, index },
            bucket: Some(Bucket::A),
            ..echo()
        }
    }

    /// The record `crate::record` builds for a probe whose echo is `echo`.
    fn probed(at: u32, echo: Echo, baseline: Option<&Sample>) -> ProbeRecord {
        let context = crate::record::ProbeContext {
            run_id: "r",
            exit: None,
            token: "t",
            persona: "p",
            started_at: format!("2026-01-01T00:00:{at:02}Z"),
        };
        let outcome = crate::probe::ProbeOutcome {
            echo,
            alpn: Some("h2".into()),
            cert: None,
            latency: std::time::Duration::from_millis(5),
        };
        crate::record::record(context, Ok(outcome), baseline)
    }

    #[test]
    fn alpn_and_stream_position_are_compared_with_the_baseline() {
        const H2: &[&str] = &["h2"];
        const BOTH: &[&str] = &["h2", "http/1.1"];
        let baseline = probed(0, echo_at((H2, Some("h2"), Spoken::H2), Some(1), 1), None)
            .sample
            .unwrap();
        // (case, the odd sample's ALPN offered / negotiated / spoken, stream id, index,
        //  expected alpn_preserved, expected remuxed)
        type Case<'a> = (
            &'a str,
            (&'a [&'a str], Option<&'a str>, Spoken),
            Option<u32>,
            u32,
            bool,
            bool,
        );
        #[rustfmt::skip]
        let cases: [Case; 9] = [
            ("same as baseline", (H2, Some("h2"), Spoken::H2), Some(1), 1, true, false),
            ("spoken http/1.1", (H2, Some("h2"), Spoken::Http1), Some(1), 1, false, false),
            ("negotiated http/1.1", (H2, Some("http/1.1"), Spoken::H2), Some(1), 1, false, false),
            ("nothing negotiated", (H2, None, Spoken::H2), Some(1), 1, false, false),
            ("other offer", (BOTH, Some("h2"), Spoken::H2), Some(1), 1, false, false),
            ("downgrade to h1", (BOTH, Some("http/1.1"), Spoken::Http1), None, 1, false, false),
            ("stream 3", (H2, Some("h2"), Spoken::H2), Some(3), 1, true, true),
            ("index 2", (H2, Some("h2"), Spoken::H2), Some(1), 2, true, true),
            ("stream 3, index 2", (H2, Some("h2"), Spoken::H2), Some(3), 2, true, true),
        ];
        for (case, alpn, stream_id, index, alpn_preserved, remuxed) in cases {
            // Three samples like the baseline and the odd one in the middle: one sample decides.
            let mut records: Vec<_> = (1..=4)
                .map(|i| probed(i, baseline.echo.clone(), Some(&baseline)))
                .collect();
            records[2] = probed(3, echo_at(alpn, stream_id, index), Some(&baseline));
            let odd = records[2].sample.as_ref().unwrap();
            assert_eq!(odd.alpn_preserved, Some(alpn_preserved), "{case}: sample");
            assert_eq!(odd.remuxed, Some(remuxed), "{case}: sample");
            // Re-mux evidence makes the sample bucket C, whatever the echo's bucket.
            let bucket = if remuxed { Bucket::C } else { Bucket::A };
            assert_eq!(odd.bucket, Some(bucket), "{case}: bucket");
            assert_eq!(odd.echo.bucket, Some(Bucket::A), "{case}: the echo's own");
            let flags = route(&records).flags;
            assert_eq!(flags.alpn_preserved, alpn_preserved, "{case}: label");
            assert_eq!(flags.remuxed, remuxed, "{case}: label");
        }

        // A downgrade stays D even when re-muxed: the worse finding.
        let mut downgraded = echo_at((H2, Some("h2"), Spoken::Http1), None, 2);
        downgraded.bucket = Some(Bucket::D);
        let sample = probed(5, downgraded, Some(&baseline)).sample.unwrap();
        assert_eq!(
            (sample.remuxed, sample.bucket),
            (Some(true), Some(Bucket::D))
        );

        // Without a baseline nothing is compared, so nothing is claimed preserved or re-muxed.
        let alone: Vec<_> = (1..=4)
            .map(|i| probed(i, echo_at((H2, Some("h2"), Spoken::H2), Some(3), 2), None))
            .collect();
        let flags = route(&alone).flags;
        assert!(!flags.alpn_preserved && !flags.remuxed, "{flags:?}");
    }

    #[test]
    fn records_and_labels_from_before_the_alpn_and_remux_flags_still_load() {
        let record = ok(1, "tlsA", Bucket::A, true, false);
        let mut json = serde_json::to_value(&record).unwrap();
        let sample = json["sample"].as_object_mut().unwrap();
        assert!(sample.remove("alpn_preserved").is_some() && sample.remove("remuxed").is_some());
        let old: ProbeRecord = serde_json::from_value(json).unwrap();
        let sample = old.sample.unwrap();
        assert_eq!((sample.alpn_preserved, sample.remuxed), (None, None));

        let mut json = serde_json::to_value(route(&[record])).unwrap();
        let flags = json["flags"].as_object_mut().unwrap();
        assert!(flags.remove("alpn_preserved").is_some() && flags.remove("remuxed").is_some());
        let old: ExitLabel = serde_json::from_value(json).unwrap();
        assert!(!old.flags.alpn_preserved && !old.flags.remuxed);
    }

    #[test]
    fn labels_json_has_the_documented_fields() {
        let records = vec![
            ok(1, "tlsA", Bucket::A, true, false),
            failed(2, "timeout"),
            ok(3, "tlsA", Bucket::A, true, false),
            ok(4, "tlsA", Bucket::A, true, false),
        ];
        let json = serde_json::to_value(route(&records)).unwrap();
        for field in [
            "name",
            "url",
            "tags",
            "egress_ips",
            "egress",
            "state",
            "changed_at",
            "bucket",
            "flags",
            "voices",
            "route",
            "route_reasons",
            "quarantined_since",
            "recovered_at",
            "clean_samples",
            "transition",
            "changes",
            "switch_changes",
            "coherence",
            "coherence_dropped_at",
            "samples",
            "errors",
            "latency",
            "last_probe_at",
            "history",
        ] {
            assert!(json.get(field).is_some(), "missing {field}");
        }
        assert_eq!(json["state"], "stable");
        assert_eq!(json["route"], "identity");
        assert_eq!(json["errors"]["timeout"], 1);
        assert_eq!(json["flags"]["tls_intercepted"], false);
        assert_eq!(json["flags"]["alpn_preserved"], true);
        assert_eq!(json["flags"]["remuxed"], false);
        assert_eq!(json["history"][1]["error"], "timeout");
        assert_eq!(json["voices"][0], "tlsA+h2v1_x");
    }
}
