//! The inputs of a label: an exit's window of records and what its samples say together
//! (drift and voices, egress, flags, errors, latency).

use std::collections::BTreeMap;

use exitvoice_schema::{
    Bucket, Egress, ExitGeo, ExitStack, Flags, H3Label, Latency, Place, ProbeRecord,
    RoundTripLabel, Sample,
};

use crate::drift::{self, Drift, DriftConfig};

/// A record with its successful sample.
pub(super) type Sampled<'a> = (&'a ProbeRecord, &'a Sample);

/// An exit's last `drift.window` records and their successful samples.
pub(super) struct Window<'a> {
    records: &'a [ProbeRecord],
    /// The successful samples, oldest first.
    pub samples: Vec<Sampled<'a>>,
    /// The samples voiced like the newest one.
    pub comparable: Vec<Sampled<'a>>,
}

impl<'a> Window<'a> {
    /// The last `len` of `records` (oldest first).
    pub fn of(records: &'a [ProbeRecord], len: usize) -> Self {
        let start = records.len().saturating_sub(len);
        let records = records.get(start..).unwrap_or_default();
        let samples: Vec<Sampled<'a>> = records
            .iter()
            .filter_map(|r| r.sample.as_ref().map(|s| (r, s)))
            .collect();
        // A new normalization (`tlsv1_` → `tlsv2_` after an upgrade, say) renames every voice of
        // its layer at once: drift and the voice list only compare samples voiced like the
        // newest one.
        let newest = samples.last().map(|(_, s)| *s);
        let comparable = samples
            .iter()
            .filter(|(_, s)| newest.is_none_or(|newest| s.voiced_like(newest)))
            .copied()
            .collect();
        Self {
            records,
            samples,
            comparable,
        }
    }

    /// The newest successful sample.
    pub fn newest(&self) -> Option<&'a Sample> {
        self.samples.last().map(|(_, s)| *s)
    }

    /// The drift of the comparable samples' voices, and those voices, first seen first.
    pub fn drift(&self, config: DriftConfig) -> (Drift<String>, Vec<String>) {
        let voiced: Vec<(String, String)> = self
            .comparable
            .iter()
            .map(|(r, s)| (s.voice(), r.started_at.clone()))
            .collect();
        let drift = drift::classify(&voiced, config);
        let mut voices: Vec<String> = Vec::new();
        for (voice, _) in voiced {
            if !voices.contains(&voice) {
                voices.push(voice);
            }
        }
        (drift, voices)
    }

    /// The samples' egress addresses, first seen first, and what they say of the exit's egress
    /// (`rotate`: configured as rotating).
    pub fn egress(&self, rotate: bool) -> (Vec<String>, Egress) {
        let mut egress_ips: Vec<String> = Vec::new();
        for (_, sample) in &self.samples {
            if !egress_ips.contains(&sample.egress_ip) {
                egress_ips.push(sample.egress_ip.clone());
            }
        }
        let egress = Egress {
            unique: u32::try_from(egress_ips.len()).unwrap_or(u32::MAX),
            rotating: (rotate && self.samples.len() >= 2).then_some(egress_ips.len() >= 2),
            sticky_broken: self.sticky_broken(),
        };
        (egress_ips, egress)
    }

    /// Whether one gateway session id's samples left from more than one egress (a sticky
    /// session that did not stick). Samples without a session id are not compared.
    fn sticky_broken(&self) -> bool {
        let samples = &self.samples;
        samples.iter().enumerate().any(|(i, (record, sample))| {
            record.session.is_some()
                && samples[..i]
                    .iter()
                    .any(|(r, s)| r.session == record.session && s.egress_ip != sample.egress_ip)
        })
    }

    /// The samples' comparisons folded (see the module docs), against the direct `baseline`
    /// for `not_proxied`, the window's places ([`Window::geo`]) for `geo_changed` and its TCP
    /// voices ([`Window::stack`]) for `stack_changed`.
    pub fn flags(
        &self,
        baseline: Option<&Sample>,
        h3: Option<&H3Label>,
        geo: Option<&ExitGeo>,
        stack: Option<&ExitStack>,
        round_trip: Option<&RoundTripLabel>,
    ) -> Flags {
        let samples = &self.samples;
        Flags {
            tls_preserved: !samples.is_empty()
                && samples.iter().all(|(_, s)| s.tls_preserved == Some(true)),
            h2_preserved: !samples.is_empty()
                && samples.iter().all(|(_, s)| s.h2_preserved == Some(true)),
            tls_intercepted: samples.iter().any(|(_, s)| s.tls_intercepted),
            alpn_preserved: !samples.is_empty()
                && samples.iter().all(|(_, s)| s.alpn_preserved == Some(true)),
            remuxed: samples.iter().any(|(_, s)| s.remuxed == Some(true)),
            not_proxied: baseline
                .is_some_and(|b| samples.iter().any(|(_, s)| s.egress_ip == b.egress_ip)),
            tls_reoriginated: samples.iter().any(|(_, s)| s.tls_preserved == Some(false)),
            h3_gap: crate::h3_label::gap(h3),
            geo_changed: geo.is_some_and(|geo| geo.countries.len() >= 2),
            stack_changed: stack.is_some_and(|stack| stack.voices.len() >= 2),
            gap_moved: round_trip.is_some_and(|rt| rt.moved),
        }
    }

    /// The exit host's TCP stack: the newest SYN the echo read, and every TCP voice of the
    /// window; `None` when the echo read no SYN of any sample.
    pub fn stack(&self) -> Option<ExitStack> {
        let syns: Vec<_> = self
            .samples
            .iter()
            .filter_map(|(_, s)| s.echo.tcp.as_ref())
            .collect();
        let newest = *syns.last()?;
        let mut voices: Vec<String> = Vec::new();
        for syn in syns {
            if !voices.contains(&syn.voice_id.0) {
                voices.push(syn.voice_id.0.clone());
            }
        }
        Some(ExitStack {
            voice: newest.voice_id.0.clone(),
            p0f: newest.p0f.clone(),
            os: newest.os.clone(),
            hops: newest.hops,
            voices,
        })
    }

    /// Where the samples left from, as recorded with them; `None` when no sample was looked up
    /// (no `audit --geoip`).
    pub fn geo(&self) -> Option<ExitGeo> {
        let places: Vec<&Place> = self
            .samples
            .iter()
            .filter_map(|(_, s)| s.geo.as_ref())
            .collect();
        let newest = (*places.last()?).clone();
        let mut geo = ExitGeo {
            newest,
            ..ExitGeo::default()
        };
        for place in places {
            if let Some(country) = &place.country {
                if !geo.countries.contains(country) {
                    geo.countries.push(country.clone());
                }
            }
            if let Some(asn) = place.asn {
                if !geo.asns.contains(&asn) {
                    geo.asns.push(asn);
                }
            }
        }
        Some(geo)
    }

    /// Whether a sample left from another country than `country` or another network than
    /// `asn` (the exits file's expectations). A sample no database placed does not count.
    pub fn geo_mismatch(&self, country: Option<&str>, asn: Option<u32>) -> bool {
        self.samples
            .iter()
            .filter_map(|(_, s)| s.geo.as_ref())
            .any(|place| {
                let other_country = country
                    .zip(place.country.as_deref())
                    .is_some_and(|(want, got)| !want.eq_ignore_ascii_case(got));
                let other_network = asn.zip(place.asn).is_some_and(|(want, got)| want != got);
                other_country || other_network
            })
    }

    /// The window's failed probes by class. Every connection through the exit counts, the
    /// retried attempts of a sample too.
    pub fn errors(&self) -> BTreeMap<String, u32> {
        let mut errors: BTreeMap<String, u32> = BTreeMap::new();
        let failures = self
            .records
            .iter()
            .flat_map(|r| r.retried.iter().chain(r.error.as_ref()));
        for failure in failures {
            *errors.entry(failure.class.clone()).or_default() += 1;
        }
        errors
    }

    /// Why the exit is failing, if it is: no successful sample, or a share of failed probes
    /// (retried attempts included) at or above `error_ratio`.
    pub fn failing(&self, error_ratio: f64) -> Option<String> {
        let retried: usize = self.records.iter().map(|r| r.retried.len()).sum();
        let failed = self.records.len() - self.samples.len() + retried;
        let probes = self.records.len() + retried;
        #[allow(clippy::cast_precision_loss)]
        let ratio = if self.records.is_empty() {
            1.0
        } else {
            failed as f64 / probes as f64
        };
        (self.samples.is_empty() || ratio >= error_ratio)
            .then(|| format!("failing: {failed} of {probes} probes failed"))
    }

    /// Buckets of every sample.
    pub fn buckets(&self) -> Vec<Bucket> {
        self.samples.iter().filter_map(|(_, s)| s.bucket).collect()
    }

    /// The samples' latency percentiles.
    pub fn latency(&self) -> Latency {
        let mut latencies: Vec<u64> = self
            .samples
            .iter()
            .filter_map(|(r, _)| r.latency_ms)
            .collect();
        latencies.sort_unstable();
        Latency {
            p50_ms: percentile(&latencies, 50),
            p95_ms: percentile(&latencies, 95),
            round_trip: None,
        }
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[u64], pct: usize) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (pct * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}
