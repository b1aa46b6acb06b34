//! A run's labels snapshot: every exit's label from its stored window, written to the store
//! an exit at a time (a run holds one label, never the pool's), and which exits it shows
//! unsettled since the previous snapshot.

use std::collections::HashMap;

use exitvoice_exits::Exit;
use exitvoice_schema::{ExitLabel, LabelsDoc, Pool, ProbeRecord, LABELS_SCHEMA_VERSION};
use exitvoice_store::{Store, StoreError};

use super::config::RunConfig;
use crate::labels::{self, ExitInfo, Prior};
use crate::pool::PoolTally;
use crate::record::now_rfc3339;

/// A run's labels, as stored: read them back by `id` ([`Store::read_labels`]).
#[derive(Clone, Debug)]
pub struct StoredLabels {
    /// The snapshot's id.
    pub id: i64,
    /// Whether the run stored the period's snapshot. Else another auditor of the database
    /// did: this one is nobody's latest, and its reader discards it
    /// ([`Store::discard_labels`]).
    pub published: bool,
    /// The snapshot without its exits (baseline and pool).
    pub header: LabelsDoc,
    /// The exits whose label changed since the persona's previous snapshot: see [`unsettled`].
    pub unsettled: Vec<String>,
}

/// The persona's previous snapshot, an exit's label at a time.
enum Previous {
    None,
    /// Stored a row per exit.
    Rows(i64),
    /// Stored as one document (before the rows).
    Whole(HashMap<String, ExitLabel>),
}

impl Previous {
    async fn of(store: &Store, persona: &str) -> Result<Self, StoreError> {
        let Some(id) = store.latest_labels_id_of(persona).await? else {
            return Ok(Self::None);
        };
        match store.read_labels(id).await? {
            None => Ok(Self::None),
            Some(reader) if reader.by_rows() => Ok(Self::Rows(id)),
            Some(reader) => {
                let doc = reader.into_doc().await?;
                Ok(Self::Whole(
                    doc.exits.into_iter().map(|l| (l.name.clone(), l)).collect(),
                ))
            }
        }
    }

    async fn label(&mut self, store: &Store, name: &str) -> Result<Option<ExitLabel>, StoreError> {
        match self {
            Self::None => Ok(None),
            Self::Rows(id) => store.exit_label(*id, name).await,
            Self::Whole(labels) => Ok(labels.remove(name)),
        }
    }

    fn exists(&self) -> bool {
        !matches!(self, Self::None)
    }
}

/// Labels `exits` from the stored history (the last `drift.window` probes of each, more for
/// the history and the recovery streak), each compared with the persona's latest baseline and
/// carrying on from the persona's previous labels snapshot (quarantine, transition), and
/// stores them as a snapshot, published if `publish`.
///
/// # Errors
/// Store failures.
pub async fn store_labels(
    exits: &[Exit],
    config: &RunConfig,
    store: &Store,
    publish: bool,
) -> Result<StoredLabels, StoreError> {
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
    let mut previous = Previous::of(store, &persona).await?;
    let generated_at = now_rfc3339();
    let mut writer = store.begin_labels(&generated_at, Some(&persona)).await?;
    let mut tally = PoolTally::default();
    let mut unsettled = Vec::new();
    let mut upcoming = exits.iter();
    let mut current = with_window(store, upcoming.next(), &persona, window).await;
    while let Some((exit, records)) = current.take() {
        let records = records?;
        // The next exit's window is read while this one is labelled and written: one read in
        // flight, which the join polls to its end, so it never keeps a pooled connection from
        // the labels writer.
        let next = with_window(store, upcoming.next(), &persona, window);
        let this = async {
            let info = ExitInfo {
                name: exit.name.clone(),
                url: exit.redacted_url(),
                tags: exit.tags.clone(),
                rotate: exit.rotate,
                country: exit.country.clone(),
                asn: exit.asn,
            };
            let before = previous.label(store, &exit.name).await?;
            let prior = Prior {
                baseline: baseline_sample,
                previous: before.as_ref(),
                baseline_h3,
            };
            let label = labels::label(&info, &records, &config.route, config.drift, prior);
            if !previous.exists() || before.is_none_or(|b| changed(&b, &label)) {
                unsettled.push(label.name.clone());
            }
            tally.add(&label);
            writer.push(&label).await
        };
        let (next, written) = tokio::join!(next, this);
        written?;
        current = next;
    }
    let header = LabelsDoc {
        schema_version: LABELS_SCHEMA_VERSION,
        generated_at,
        persona: Some(persona),
        baseline: baseline_record.and_then(labels::baseline_of),
        pool: Some(Pool {
            geo_sources: config.geo.as_ref().map(|g| g.sources()).unwrap_or_default(),
            ..tally.finish()
        }),
        exits: Vec::new(),
    };
    let id = writer.finish(header.clone(), publish).await?;
    Ok(StoredLabels {
        id,
        published: publish,
        header,
        unsettled,
    })
}

/// `exit`, if any, with its stored window: the persona's last `window` probes of it.
async fn with_window<'e>(
    store: &Store,
    exit: Option<&'e Exit>,
    persona: &str,
    window: u32,
) -> Option<(&'e Exit, Result<Vec<ProbeRecord>, StoreError>)> {
    let exit = exit?;
    Some((
        exit,
        store.recent_probes(Some(&exit.name), persona, window).await,
    ))
}

/// Whether an exit's label changed from `before` to `now` in what makes it unsettled: another
/// drift state, another route, or coherence kept or lost. Under `--every` unsettled exits (and
/// new ones) are probed again after `--recheck` until they settle.
fn changed(before: &ExitLabel, now: &ExitLabel) -> bool {
    let kept = |l: &ExitLabel| l.coherence.as_ref().map(|c| c.kept);
    before.state != now.state || before.route != now.route || kept(before) != kept(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_is_unsettled_by_its_state_route_or_coherence() {
        let label = |state: &str, route: &str| -> ExitLabel {
            serde_json::from_value(serde_json::json!({
                "name": "x", "url": "u", "tags": {}, "egress_ips": [], "state": state,
                "changed_at": null, "bucket": null,
                "flags": {"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false},
                "voices": [], "route": route, "route_reason": "r", "samples": 1, "errors": {},
                "latency": {"p50_ms": null, "p95_ms": null}, "last_probe_at": null,
                "history": [],
            }))
            .unwrap()
        };
        let same = label("stable", "identity");
        assert!(!changed(&same, &label("stable", "identity")));
        assert!(changed(&label("unknown", "identity"), &same));
        assert!(changed(&label("stable", "anonymous"), &same));
        let mut dropped = same.clone();
        dropped.coherence = Some(exitvoice_schema::ExitCoherence {
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
        assert!(changed(&same, &dropped));
        assert!(!changed(&dropped, &dropped.clone()));
    }
}
