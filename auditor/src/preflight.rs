//! Preflight: does a pool pass, judged from the labels of a quick run (`audit --preflight`).
//!
//! An exit passes when its probes all succeeded (tunnel and auth work), none was intercepted,
//! its TLS voice was preserved, it never left from the direct baseline's egress, a rotating
//! exit rotated, and its p95 latency is within `max_p95_ms`. The pool passes when the share of
//! passing exits is at least `min_pass`, it leaves from at least `min_unique_egress` addresses,
//! and, when asked, its `h2_health` (the share of bucket A among the exits whose newest sample
//! had an HTTP/2 bucket) is at least `min_h2_health`. With `expect_os`, an exit passes only when
//! its host's TCP stack is known and of that operating system's kin (`exitvoice_schema::
//! coherence::os_kin`: Android's stack is Linux's).

use std::collections::BTreeMap;

use exitvoice_schema::coherence::os_kin;
use exitvoice_schema::{ExitLabel, Pool};

/// What a pool must reach.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    /// Least share of passing exits.
    pub min_pass: f64,
    /// Least number of distinct egress addresses over the pool.
    pub min_unique_egress: u32,
    /// Largest p95 latency of an exit, milliseconds.
    pub max_p95_ms: Option<u64>,
    /// Least share of bucket A among h2 exits.
    pub min_h2_health: Option<f64>,
    /// The operating system every exit host's TCP stack must show (`linux`, `windows`, …).
    pub expect_os: Option<String>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            min_pass: 0.8,
            min_unique_egress: 1,
            max_p95_ms: None,
            min_h2_health: None,
            expect_os: None,
        }
    }
}

/// One exit's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExitVerdict {
    /// The exit.
    pub name: String,
    /// Why it fails; empty when it passes.
    pub reasons: Vec<String>,
}

/// The pool's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// Each exit's, in labels order.
    pub exits: Vec<ExitVerdict>,
    /// Share of passing exits (0 for an empty pool).
    pub pass_share: f64,
    /// Share of exits with their TLS voice preserved.
    pub tls_preserved_share: f64,
    /// Exits by bucket of their newest sample (`none` without one).
    pub buckets: BTreeMap<String, u32>,
    /// Share of bucket A among exits with an HTTP/2 bucket; `None` without any.
    pub h2_health: Option<f64>,
    /// Distinct egress addresses over the pool.
    pub unique_egress: u32,
    /// Why the pool fails; empty when it passes.
    pub failures: Vec<String>,
}

impl Verdict {
    /// Whether the pool passes.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

#[allow(clippy::cast_precision_loss)]
fn share(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Judges a pool an exit's label at a time.
#[derive(Debug)]
pub struct Judge<'t> {
    thresholds: &'t Thresholds,
    exits: Vec<ExitVerdict>,
    preserved: usize,
}

impl<'t> Judge<'t> {
    /// A judge of nothing yet, against `thresholds`.
    #[must_use]
    pub fn new(thresholds: &'t Thresholds) -> Self {
        Self {
            thresholds,
            exits: Vec::new(),
            preserved: 0,
        }
    }

    /// Judges the next exit's label.
    pub fn add(&mut self, label: &ExitLabel) {
        let thresholds = self.thresholds;
        let mut reasons = Vec::new();
        if label.samples == 0 {
            reasons.push("no successful probe".to_owned());
        }
        for (class, count) in &label.errors {
            reasons.push(format!("{count} probe(s) failed: {class}"));
        }
        if label.flags.tls_intercepted {
            reasons.push("tls_intercepted".to_owned());
        } else if label.samples > 0 && !label.flags.tls_preserved {
            reasons.push("tls not preserved".to_owned());
        }
        if label.flags.not_proxied {
            reasons.push("not_proxied: left from the direct baseline's egress".to_owned());
        }
        if label.egress.rotating == Some(false) {
            reasons.push("not_rotating: one egress".to_owned());
        }
        if let Some(expected) = &thresholds.expect_os {
            let shown = label.stack.as_ref().and_then(|s| s.os.as_deref());
            match shown {
                None => reasons.push(format!("stack os unknown (expected {expected})")),
                Some(os) if os_kin(os).is_none() || os_kin(os) != os_kin(expected) => {
                    reasons.push(format!("stack os {os} (expected {expected})"));
                }
                Some(_) => {}
            }
        }
        if let (Some(max), Some(p95)) = (thresholds.max_p95_ms, label.latency.p95_ms) {
            if p95 > max {
                reasons.push(format!("p95 {p95} ms > {max} ms"));
            }
        }
        self.preserved += usize::from(label.flags.tls_preserved);
        self.exits.push(ExitVerdict {
            name: label.name.clone(),
            reasons,
        });
    }

    /// The pool's verdict on the labels judged, whose `pool` (buckets, egress addresses) the
    /// snapshot already counted.
    #[must_use]
    pub fn finish(self, pool: &Pool) -> Verdict {
        let Self {
            thresholds,
            exits,
            preserved,
        } = self;
        let buckets = pool.by_bucket.clone();
        let total = exits.len();
        let passing = exits.iter().filter(|e| e.reasons.is_empty()).count();
        let h2_exits: u32 = buckets
            .iter()
            .filter(|(b, _)| *b != "none")
            .map(|(_, n)| n)
            .sum();
        let a = buckets.get("A").copied().unwrap_or(0);
        let h2_health = (h2_exits > 0).then(|| f64::from(a) / f64::from(h2_exits));
        let unique_egress = pool.unique_egress;
        let pass_share = share(passing, total);
        let mut failures = Vec::new();
        if total == 0 {
            failures.push("no exit".to_owned());
        }
        if pass_share < thresholds.min_pass {
            failures.push(format!(
                "{passing} of {total} exits pass ({pass_share:.2} < {:.2})",
                thresholds.min_pass
            ));
        }
        if unique_egress < thresholds.min_unique_egress {
            failures.push(format!(
                "{unique_egress} unique egress (< {})",
                thresholds.min_unique_egress
            ));
        }
        if let Some(min) = thresholds.min_h2_health {
            let health = h2_health.unwrap_or(0.0);
            if health < min {
                failures.push(format!("h2_health {health:.2} < {min:.2}"));
            }
        }
        Verdict {
            exits,
            pass_share,
            tls_preserved_share: share(preserved, total),
            buckets,
            h2_health,
            unique_egress,
            failures,
        }
    }
}

/// Judges the pool whose labels are `doc`.
#[cfg(test)]
fn judge(doc: &exitvoice_schema::LabelsDoc, thresholds: &Thresholds) -> Verdict {
    let mut judge = Judge::new(thresholds);
    for label in &doc.exits {
        judge.add(label);
    }
    judge.finish(&crate::pool::summary(&doc.exits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitvoice_schema::{Bucket, LabelsDoc};

    fn label(name: &str, egress: &str, bucket: Option<Bucket>) -> ExitLabel {
        let json = serde_json::json!({
            "name": name, "url": "http://h:1", "tags": {},
            "egress_ips": [egress], "state": "stable", "changed_at": null, "bucket": bucket,
            "flags": {"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false},
            "voices": [], "route": "identity", "route_reason": "r", "samples": 1,
            "errors": {}, "latency": {"p50_ms": 10, "p95_ms": 30}, "last_probe_at": null,
            "history": [],
        });
        serde_json::from_value(json).unwrap()
    }

    fn doc(exits: Vec<ExitLabel>) -> LabelsDoc {
        LabelsDoc {
            schema_version: 2,
            generated_at: "t".into(),
            persona: None,
            baseline: None,
            pool: None,
            exits,
        }
    }

    #[test]
    fn a_pool_passes_or_fails_with_its_reasons() {
        let good = doc(vec![
            label("a", "127.0.0.2", Some(Bucket::A)),
            label("b", "127.0.0.3", Some(Bucket::A)),
            label("c", "127.0.0.4", None),
        ]);
        let verdict = judge(&good, &Thresholds::default());
        assert!(verdict.passed(), "{verdict:?}");
        assert_eq!(verdict.h2_health, Some(1.0));
        assert_eq!(verdict.unique_egress, 3);

        let mut bad = good.clone();
        bad.exits[0].flags.not_proxied = true;
        bad.exits[1].flags.tls_intercepted = true;
        bad.exits[1].bucket = Some(Bucket::B);
        bad.exits[2].samples = 0;
        bad.exits[2].errors.insert("proxy_auth".into(), 1);
        let thresholds = Thresholds {
            min_unique_egress: 4,
            max_p95_ms: Some(20),
            min_h2_health: Some(0.9),
            ..Thresholds::default()
        };
        let verdict = judge(&bad, &thresholds);
        assert!(!verdict.passed());
        assert_eq!(
            verdict.failures,
            [
                "0 of 3 exits pass (0.00 < 0.80)",
                "3 unique egress (< 4)",
                "h2_health 0.50 < 0.90"
            ]
        );
        assert_eq!(
            verdict.exits[1].reasons,
            ["tls_intercepted", "p95 30 ms > 20 ms"]
        );
        assert_eq!(
            verdict.exits[2].reasons[..2],
            ["no successful probe", "1 probe(s) failed: proxy_auth"]
        );
        assert!(!judge(&doc(vec![]), &Thresholds::default()).passed());

        // An expected operating system: the stack must show one of its kin.
        let mut stacks = good.clone();
        let stack = |os: Option<&str>| exitvoice_schema::ExitStack {
            voice: "tcpv1_00".into(),
            p0f: "4:64+0:0:*:mss*44,7:mss,sok,ts,nop,ws:df,id+:0".into(),
            os: os.map(str::to_owned),
            hops: 0,
            voices: vec!["tcpv1_00".into()],
        };
        stacks.exits[0].stack = Some(stack(Some("Linux 3.11 and newer")));
        stacks.exits[1].stack = Some(stack(Some("Windows 7 or 8")));
        stacks.exits[2].stack = Some(stack(None));
        let linux = Thresholds {
            expect_os: Some("android".into()),
            min_pass: 0.0,
            ..Thresholds::default()
        };
        let verdict = judge(&stacks, &linux);
        let reasons: Vec<_> = verdict.exits.iter().map(|e| e.reasons.clone()).collect();
        assert_eq!(
            reasons,
            [
                vec![],
                vec!["stack os Windows 7 or 8 (expected android)".to_owned()],
                vec!["stack os unknown (expected android)".to_owned()],
            ]
        );
    }
}
