//! The pool as a whole, from its exits' labels: how many in each state, bucket and route, the
//! success rate, and how many egress addresses the exits really leave from (25 exits behind one
//! egress are one exit: `collapsed_egress`).

use std::collections::BTreeMap;

use exitvoice_schema::{ExitLabel, Pool};

/// The pool summary of `labels`.
pub fn summary(labels: &[ExitLabel]) -> Pool {
    let mut pool = Pool {
        exits: u32::try_from(labels.len()).unwrap_or(u32::MAX),
        ..Pool::default()
    };
    let count = |map: &mut BTreeMap<String, u32>, key: String| *map.entry(key).or_default() += 1;
    let mut egress: Vec<&str> = Vec::new();
    let (mut probes, mut successes) = (0u64, 0u64);
    let mut answering = 0;
    for label in labels {
        count(&mut pool.by_state, label.state.to_string());
        count(
            &mut pool.by_bucket,
            label.bucket.map_or("none".to_owned(), |b| b.to_string()),
        );
        count(&mut pool.by_route, label.route.to_string());
        successes += u64::from(label.samples);
        probes +=
            u64::from(label.samples) + label.errors.values().map(|&n| u64::from(n)).sum::<u64>();
        if label.samples > 0 {
            answering += 1;
        }
        for ip in &label.egress_ips {
            if !egress.contains(&ip.as_str()) {
                egress.push(ip);
            }
        }
    }
    #[allow(clippy::cast_precision_loss)]
    {
        pool.success_rate = (probes > 0).then(|| successes as f64 / probes as f64);
    }
    pool.unique_egress = u32::try_from(egress.len()).unwrap_or(u32::MAX);
    pool.collapsed_egress = answering >= 2 && egress.len() == 1;
    pool
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitvoice_schema::{DriftState, Route};

    fn label(name: &str, egress: &[&str], samples: u32, errors: u32) -> ExitLabel {
        let json = serde_json::json!({
            "name": name, "url": "http://h:1", "tags": {},
            "egress_ips": egress, "state": "stable", "changed_at": null, "bucket": "A",
            "flags": {"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false},
            "voices": [], "route": "identity", "route_reason": "r", "samples": samples,
            "errors": if errors > 0 { serde_json::json!({"timeout": errors}) } else { serde_json::json!({}) },
            "latency": {"p50_ms": null, "p95_ms": null}, "last_probe_at": null, "history": [],
        });
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn counts_rates_and_collapsed_egress() {
        let mut failing = label("c", &[], 0, 4);
        failing.route = Route::Quarantine;
        failing.state = DriftState::Unknown;
        failing.bucket = None;
        let pool = summary(&[
            label("a", &["10.0.0.1"], 4, 0),
            label("b", &["10.0.0.2"], 3, 1),
            failing,
        ]);
        assert_eq!(pool.exits, 3);
        assert_eq!(pool.by_route.get("identity"), Some(&2));
        assert_eq!(pool.by_route.get("quarantine"), Some(&1));
        assert_eq!(pool.by_bucket.get("none"), Some(&1));
        assert_eq!(pool.by_state.get("unknown"), Some(&1));
        assert_eq!(pool.success_rate, Some(7.0 / 12.0));
        assert_eq!(pool.unique_egress, 2);
        assert!(!pool.collapsed_egress);
        let same = summary(&[
            label("a", &["10.0.0.1"], 4, 0),
            label("b", &["10.0.0.1"], 4, 0),
        ]);
        assert!(same.collapsed_egress && same.unique_egress == 1);
        // One answering exit is no pool to collapse.
        assert!(!summary(&[label("a", &["10.0.0.1"], 4, 0)]).collapsed_egress);
        assert_eq!(summary(&[]).success_rate, None);
    }
}
