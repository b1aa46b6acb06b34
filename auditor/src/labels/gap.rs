//! The round-trip gap of an exit over its window ([`exitvoice_schema::RoundTripLabel`]): the
//! samples' gaps as the echo measured them, against the direct baseline's.
//!
//! Every sample's gap holds the hidden leg behind the exit plus the auditor's own processing
//! (its TLS stack answering the flight, its HTTP/2 stack the PING), which the baseline's gap
//! measures alone. The verdict reads the smallest gap, less the baseline's: a hidden leg is in
//! every sample, so the fastest one still shows it, while a busy moment of either host only
//! ever makes a gap larger.

use exitvoice_schema::round_trip::{GapVerdict, POSSIBLE_GAP_US};
use exitvoice_schema::{RoundTripLabel, RoundTrips, Sample};

use super::window::Sampled;

/// One sample's gap, transport and application round trips.
#[derive(Clone, Copy)]
struct Point {
    gap: u32,
    tcp: u32,
    app: u32,
}

fn point(latency: &RoundTrips) -> Option<Point> {
    Some(Point {
        gap: latency.gap_us?,
        tcp: latency.tcp_min_rtt_us.or(latency.tcp_rtt_us)?,
        app: latency.app_rtt_us?,
    })
}

/// Smallest and median (nearest rank) of `values`; `None` when empty.
fn min_p50(mut values: Vec<u32>) -> Option<(u32, u32)> {
    values.sort_unstable();
    let min = *values.first()?;
    let rank = (50 * values.len()).div_ceil(100).max(1);
    Some((min, values.get(rank - 1).copied().unwrap_or(min)))
}

/// Whether two runs' smallest gaps differ by [`POSSIBLE_GAP_US`] and by a quarter of the
/// larger at least: past both, the path behind the exit changed, not its noise.
fn moved(before: u32, after: u32) -> bool {
    let delta = before.abs_diff(after);
    delta >= POSSIBLE_GAP_US && u64::from(delta) * 4 >= u64::from(before.max(after))
}

/// The exit's round-trip label from its window's `samples` (oldest first) and the direct
/// `baseline`; `None` when no sample measured a gap.
pub(super) fn round_trip(
    samples: &[Sampled<'_>],
    baseline: Option<&Sample>,
) -> Option<RoundTripLabel> {
    let points: Vec<(&str, Point)> = samples
        .iter()
        .filter_map(|(record, sample)| {
            let latency = sample.echo.latency.as_ref()?;
            Some((record.run_id.as_str(), point(latency)?))
        })
        .collect();
    let (gap_min, gap_p50) = min_p50(points.iter().map(|(_, p)| p.gap).collect())?;
    let (tcp_min, tcp_p50) = min_p50(points.iter().map(|(_, p)| p.tcp).collect())?;
    let (app_min, app_p50) = min_p50(points.iter().map(|(_, p)| p.app).collect())?;
    let baseline_gap = baseline
        .and_then(|b| b.echo.latency.as_ref())
        .and_then(|l| l.gap_us);
    let excess = gap_min.saturating_sub(baseline_gap.unwrap_or(0));
    let app_less_baseline = app_min.saturating_sub(baseline_gap.unwrap_or(0));
    let verdict = GapVerdict::of_gap(excess, app_less_baseline);
    let against = baseline_gap.map_or_else(
        || "no baseline gap to subtract".to_owned(),
        |b| format!("less the baseline's {b} us"),
    );
    let reason = format!(
        "smallest gap {gap_min} us of {} samples, {against}: {excess} us behind the exit",
        points.len()
    );
    // The newest run's smallest gap against the run before it in the window.
    let newest_run = points.last().map(|(run, _)| *run);
    let run_min = |wanted: &str| {
        points
            .iter()
            .filter(|(run, _)| *run == wanted)
            .map(|(_, p)| p.gap)
            .min()
    };
    let previous_run = points
        .iter()
        .rev()
        .map(|(run, _)| *run)
        .find(|run| Some(*run) != newest_run);
    let previous_run_gap_min_us = previous_run.and_then(run_min);
    let newest_min = newest_run.and_then(run_min);
    Some(RoundTripLabel {
        samples: u32::try_from(points.len()).unwrap_or(u32::MAX),
        gap_min_us: gap_min,
        gap_p50_us: gap_p50,
        tcp_rtt_min_us: tcp_min,
        tcp_rtt_p50_us: tcp_p50,
        app_rtt_min_us: app_min,
        app_rtt_p50_us: app_p50,
        baseline_gap_us: baseline_gap,
        excess_gap_us: excess,
        verdict,
        reason,
        previous_run_gap_min_us,
        moved: matches!((previous_run_gap_min_us, newest_min), (Some(a), Some(b)) if moved(a, b)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_moves_past_both_the_possible_gap_and_a_quarter() {
        assert!(moved(80_000, 240_000));
        assert!(moved(240_000, 80_000));
        assert!(!moved(80_000, 86_000), "noise");
        assert!(!moved(200_000, 215_000), "over 10 ms, under a quarter");
        assert!(!moved(1_000, 8_000), "over a quarter, under 10 ms");
    }
}
