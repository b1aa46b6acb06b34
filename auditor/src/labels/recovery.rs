//! Quarantine from run to run: a quarantined exit stays quarantined until `recover_after` clean
//! probes in a row, and the label keeps when it entered, left and last changed route.

use exitvoice_schema::{ExitLabel, ProbeRecord, Route, Transition};

use super::route::Decision;
use super::rule::RouteRule;

/// The route after recovery, and the exit's quarantine history with it.
pub(super) struct Standing {
    pub decision: Decision,
    pub clean_samples: u32,
    pub quarantined_since: Option<String>,
    pub recovered_at: Option<String>,
    pub transition: Option<Transition>,
}

/// The window's `decision` held in quarantine while the exit, quarantined in its `previous`
/// label, is still recovering; `records` are all the exit's records (oldest first).
pub(super) fn standing(
    mut decision: Decision,
    records: &[ProbeRecord],
    rule: &RouteRule,
    previous: Option<&ExitLabel>,
) -> Standing {
    let clean_samples = clean_streak(records, rule);
    let now = records.last().map(|r| r.started_at.clone());
    let was_quarantined = previous.is_some_and(|p| p.route == Route::Quarantine);
    if was_quarantined && decision.route != Route::Quarantine && clean_samples < rule.recover_after
    {
        decision.reasons.insert(
            0,
            format!(
                "recovering: {clean_samples} of {} clean probes",
                rule.recover_after
            ),
        );
        decision.route = Route::Quarantine;
    }
    let route = decision.route;
    let (quarantined_since, recovered_at) = match (route, was_quarantined) {
        (Route::Quarantine, true) => (
            previous
                .and_then(|p| p.quarantined_since.clone())
                .or_else(|| now.clone()),
            None,
        ),
        (Route::Quarantine, false) => (now.clone(), None),
        (_, true) => (None, now.clone()),
        (_, false) => (None, previous.and_then(|p| p.recovered_at.clone())),
    };
    let transition = match previous {
        Some(previous) if previous.route == route => previous.transition.clone(),
        previous => now.map(|at| Transition {
            from: previous.map(|p| p.route),
            to: route,
            at,
        }),
    };
    Standing {
        decision,
        clean_samples,
        quarantined_since,
        recovered_at,
        transition,
    }
}

/// Consecutive clean probes, newest back: successful at the first attempt, not intercepted and
/// not re-originated (when those quarantine), in no quarantine bucket.
pub(super) fn clean_streak(records: &[ProbeRecord], rule: &RouteRule) -> u32 {
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
