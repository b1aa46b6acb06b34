//! A run's labels snapshot: every exit's label from its stored window, and which exits it
//! shows unsettled since the previous snapshot.

use std::collections::HashMap;

use exitvoice_exits::Exit;
use exitvoice_schema::{ExitLabel, LabelsDoc, Pool, LABELS_SCHEMA_VERSION};
use exitvoice_store::{Store, StoreError};

use super::config::RunConfig;
use crate::labels::{self, ExitInfo, Prior};
use crate::pool;
use crate::record::now_rfc3339;

/// Labels of `exits` from the stored history (the last `drift.window` probes of each, more for
/// the history and the recovery streak), each compared with the persona's latest baseline and
/// carrying on from the persona's previous labels snapshot (quarantine, transition).
///
/// # Errors
/// Store failures.
pub async fn compute_labels(
    exits: &[Exit],
    config: &RunConfig,
    store: &Store,
) -> Result<LabelsDoc, StoreError> {
    let persona = config.persona();
    let window = config
        .drift
        .window
        .max(labels::HISTORY_LEN)
        .max(usize::try_from(config.route.recover_after).unwrap_or(usize::MAX));
    let window = u32::try_from(window).unwrap_or(u32::MAX);
    let baselines = store.recent_probes(None, &persona, 8).await?;
    let baseline_record = baselines.iter().rev().find(|r| r.sample.is_some());
    let baseline_sample = baseline_record.and_then(|r| r.sample.as_ref());
    // Without QUIC probes, older ones would only be stale.
    let baseline_h3 = baselines
        .iter()
        .rev()
        .find_map(|r| r.h3.as_ref())
        .filter(|_| config.quic);
    let previous = store.latest_labels_of(&persona).await?;
    let previous: HashMap<&str, &ExitLabel> = previous
        .iter()
        .flat_map(|doc| &doc.exits)
        .map(|label| (label.name.as_str(), label))
        .collect();
    let mut out = Vec::with_capacity(exits.len());
    for exit in exits {
        let records = store
            .recent_probes(Some(&exit.name), &persona, window)
            .await?;
        let info = ExitInfo {
            name: exit.name.clone(),
            url: exit.redacted_url(),
            tags: exit.tags.clone(),
            rotate: exit.rotate,
            country: exit.country.clone(),
            asn: exit.asn,
        };
        let prior = Prior {
            baseline: baseline_sample,
            previous: previous.get(exit.name.as_str()).copied(),
            baseline_h3,
        };
        out.push(labels::label(
            &info,
            &records,
            &config.route,
            config.drift,
            prior,
        ));
    }
    Ok(LabelsDoc {
        schema_version: LABELS_SCHEMA_VERSION,
        generated_at: now_rfc3339(),
        persona: Some(persona),
        baseline: baseline_record.and_then(labels::baseline_of),
        pool: Some(Pool {
            geo_sources: config.geo.as_ref().map(|g| g.sources()).unwrap_or_default(),
            ..pool::summary(&out)
        }),
        exits: out,
    })
}

/// The exits whose label changed since `previous`: a new exit, another drift state, another
/// route, or coherence kept or lost. Under `--every` they are probed again after `--recheck` until they settle.
pub fn unsettled(previous: Option<&LabelsDoc>, current: &LabelsDoc) -> Vec<String> {
    let before: HashMap<&str, &ExitLabel> = previous
        .iter()
        .flat_map(|doc| &doc.exits)
        .map(|label| (label.name.as_str(), label))
        .collect();
    current
        .exits
        .iter()
        .filter(|label| {
            let before = before.get(label.name.as_str());
            let kept = |l: &ExitLabel| l.coherence.as_ref().map(|c| c.kept);
            before.is_none_or(|b| {
                b.state != label.state || b.route != label.route || kept(b) != kept(label)
            })
        })
        .map(|label| label.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsettled_exits_are_new_or_changed() {
        let label = |name: &str, state: &str, route: &str| {
            serde_json::json!({
                "name": name, "url": "u", "tags": {}, "egress_ips": [], "state": state,
                "changed_at": null, "bucket": null,
                "flags": {"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false},
                "voices": [], "route": route, "route_reason": "r", "samples": 1, "errors": {},
                "latency": {"p50_ms": null, "p95_ms": null}, "last_probe_at": null,
                "history": [],
            })
        };
        let doc = |exits: Vec<serde_json::Value>| -> LabelsDoc {
            serde_json::from_value(serde_json::json!({
                "schema_version": 2, "generated_at": "t", "baseline": null, "exits": exits,
            }))
            .unwrap()
        };
        let before = doc(vec![
            label("same", "stable", "identity"),
            label("state", "unknown", "anonymous"),
            label("route", "stable", "anonymous"),
        ]);
        let after = doc(vec![
            label("same", "stable", "identity"),
            label("state", "stable", "anonymous"),
            label("route", "stable", "quarantine"),
            label("new", "unknown", "anonymous"),
        ]);
        assert_eq!(unsettled(Some(&before), &after), ["state", "route", "new"]);
        let mut dropped = after.clone();
        dropped.exits[0].coherence = Some(exitvoice_schema::ExitCoherence {
            newest: exitvoice_schema::Coherence {
                score: 0.5,
                reasons: vec!["alpn_h2_spoke_http1".into()],
                tls_family: None,
                http_family: None,
                ua_family: None,
                ua_os: None,
                tcp_os: None,
            },
            baseline_score: Some(1.0),
            kept: false,
        });
        assert_eq!(unsettled(Some(&after), &dropped), ["same"]);
        assert_eq!(unsettled(Some(&after), &after), Vec::<String>::new());
        assert_eq!(unsettled(None, &before).len(), 3);
    }
}
