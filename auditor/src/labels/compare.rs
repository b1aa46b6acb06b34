//! A label's comparisons: what differs from the baseline and across the last voice switch
//! ([`crate::changes`]), and whether the samples keep the baseline's coherence.

use exitvoice_schema::{Change, ExitCoherence, Sample};

use super::window::Sampled;
use crate::changes::{self, VoiceView};

/// What differs between the `newest` sample and the latest `comparable` one that spoke another
/// voice.
pub(super) fn switch_changes(newest: Option<&Sample>, comparable: &[Sampled<'_>]) -> Vec<Change> {
    newest
        .and_then(|newest| {
            let voice = newest.voice();
            comparable
                .iter()
                .rev()
                .find(|(_, s)| s.voice() != voice)
                .map(|(_, before)| between(before, newest))
        })
        .unwrap_or_default()
}

/// What differs between the `baseline` and the `newest` sample, unless that one preserved both
/// voices.
pub(super) fn baseline_changes(baseline: Option<&Sample>, newest: Option<&Sample>) -> Vec<Change> {
    match (baseline, newest) {
        (Some(baseline), Some(newest))
            if !(newest.tls_preserved == Some(true) && newest.h2_preserved == Some(true)) =>
        {
            between(baseline, newest)
        }
        _ => Vec::new(),
    }
}

fn between(before: &Sample, after: &Sample) -> Vec<Change> {
    changes::between(
        &VoiceView::of_echo(&before.echo),
        &VoiceView::of_echo(&after.echo),
    )
}

/// The newest sample's coherence with the baseline's score beside it, and the first sample
/// that dropped the baseline's coherence.
pub(super) fn coherence(
    baseline: Option<&Sample>,
    samples: &[Sampled<'_>],
    newest: Option<&Sample>,
) -> (Option<ExitCoherence>, Option<String>) {
    // Coherence is judged against the baseline's: a sample keeps it when it has no reason the
    // baseline lacks (the rustls persona with the chrome profile is incoherent on purpose).
    let baseline_coherence = baseline.and_then(|b| b.coherence.as_ref());
    let keeps = |sample: &Sample| {
        sample.coherence.as_ref().is_none_or(|c| {
            c.reasons
                .iter()
                .all(|r| baseline_coherence.is_some_and(|b| b.reasons.contains(r)))
        })
    };
    let dropped_at = samples
        .iter()
        .find(|(_, s)| !keeps(s))
        .map(|(r, _)| r.started_at.clone());
    let coherence = newest
        .and_then(|s| s.coherence.as_ref())
        .map(|c| ExitCoherence {
            newest: c.clone(),
            baseline_score: baseline_coherence.map(|b| b.score),
            kept: dropped_at.is_none(),
        });
    (coherence, dropped_at)
}
