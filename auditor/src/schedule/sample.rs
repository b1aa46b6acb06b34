//! One exit's part of a run: claim it, then its samples one after another (so no two probes
//! ever share an exit or a gateway session at once), each spaced from the last, each record
//! handed to the store's writer as soon as it is made.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use exitvoice_exits::{EchoTarget, Exit, SessionMinter};
use exitvoice_schema::{ProbeRecord, Sample};
use rand::Rng;
use tokio::sync::Semaphore;

use super::claims::Claims;
use super::config::{Persona, RunConfig};
use super::inflight::{in_flight_key, InFlight};
use super::retry::probe_with_retries;
use super::sink::Sink;
use crate::probe;
use crate::record::{self, now_rfc3339, ProbeContext};

/// What every exit's task of a run reads and shares: a task holds only its exit, this and the
/// sink.
pub(super) struct RunContext {
    pub echo: EchoTarget,
    pub config: RunConfig,
    pub run_id: String,
    pub persona: String,
    pub baseline: Option<Sample>,
    /// The run's direct QUIC probe got through: exits get theirs.
    pub quic: bool,
    pub claims: Claims,
    /// Caps the probes in flight over all exits ([`RunConfig::concurrency`]).
    pub semaphore: Semaphore,
    pub in_flight: InFlight,
    /// Fresh ids for gateway sessions that failed.
    pub minter: Mutex<SessionMinter>,
}

/// The samples of `exit`, if this run can claim it (no other auditor holds it, and it was not
/// done in this period). Returns the exit (its gateway session rotated after failures) and
/// whether it was claimed.
pub(super) async fn sample_exit(mut exit: Exit, run: Arc<RunContext>, sink: Sink) -> (Exit, bool) {
    let config = &run.config;
    // The token of the first sample that reached the echo: at the end, the Chromium persona
    // asks the echo's ledger about the identity it made.
    let mut first_token = None;
    for sample in 0..config.samples {
        if sample > 0 {
            tokio::time::sleep(jittered(config.spacing, config.jitter)).await;
        }
        let Ok(_permit) = run.semaphore.acquire().await else {
            break;
        };
        // Claimed once a probe slot is free, not before: a run does not hold exits it is not
        // probing yet, which other auditors could be.
        if sample == 0 && !claim(&run, &exit).await {
            return (exit, false);
        }
        let (mut record, failed) = probe_sample(&run, &exit, sample).await;
        if !failed {
            first_token.get_or_insert_with(|| record.token.clone());
        }
        if sample == 0 && run.quic {
            add_quic_probe(&run, &exit, &mut record).await;
        }
        if sample + 1 == config.samples && matches!(config.persona, Persona::Chromium(_)) {
            if let Some(token) = &first_token {
                add_ledger_verdict(&run, &exit, token, &mut record).await;
            }
        }
        if !sink.store(record).await {
            break;
        }
        // A failed gateway session is retired; the slot gets a fresh id.
        if failed {
            if let Ok(mut minter) = run.minter.lock() {
                minter.rotate(&mut exit);
            }
        }
    }
    if let Err(error) = run.claims.finish_exit(&exit.name).await {
        tracing::warn!(exit = %exit.name, %error, "marking the exit done failed");
    }
    (exit, true)
}

/// Whether this run claimed `exit`; a failure to claim is logged and not a claim.
async fn claim(run: &RunContext, exit: &Exit) -> bool {
    match run.claims.claim_exit(&exit.name).await {
        Ok(claimed) => claimed,
        Err(error) => {
            tracing::warn!(exit = %exit.name, %error, "claiming the exit failed");
            false
        }
    }
}

/// Sample number `sample` of `exit`, retried while it fails transiently: its record, and
/// whether it failed.
async fn probe_sample(run: &RunContext, exit: &Exit, sample: u32) -> (ProbeRecord, bool) {
    let config = &run.config;
    let token = probe::new_token();
    let started_at = now_rfc3339();
    let (outcome, retried) = {
        let _guard = run.in_flight.enter(in_flight_key(exit));
        // Boxed: a probe's state (TLS client, HTTP/2 writer, buffers) exists only while the
        // probe runs, instead of inside each of the run's many waiting tasks.
        Box::pin(probe_with_retries(Some(exit), &run.echo, config, &token)).await
    };
    config.progress.done.fetch_add(1, Ordering::Relaxed);
    let failed = match &outcome {
        Ok(_) => {
            tracing::info!(exit = %exit.name, sample, "probe ok");
            false
        }
        Err(error) => {
            tracing::warn!(
                exit = %exit.name,
                url = %exit.redacted_url(),
                sample,
                class = %error.class(),
                error = %error,
                "probe failed"
            );
            true
        }
    };
    let mut record = record::record(
        ProbeContext {
            run_id: &run.run_id,
            exit: Some(exit),
            token: &token,
            persona: &run.persona,
            started_at,
            geo: run.config.geo.as_deref(),
        },
        outcome,
        run.baseline.as_ref(),
    );
    record.retried = retried;
    (record, failed)
}

/// The exit's QUIC probe, kept on its first sample's record.
async fn add_quic_probe(run: &RunContext, exit: &Exit, record: &mut ProbeRecord) {
    let token = probe::new_token();
    let h3 = Box::pin(probe::h3::probe(
        Some(exit),
        &run.echo,
        &token,
        &run.config.quic_timeouts(),
    ))
    .await;
    tracing::info!(exit = %exit.name, via = ?h3.via, carried = h3.udp_carried, "QUIC probe");
    record.h3 = Some(h3);
}

/// The echo's ledger on the identity the Chromium persona made with `token`, kept on the
/// exit's last sample's record.
async fn add_ledger_verdict(run: &RunContext, exit: &Exit, token: &str, record: &mut ProbeRecord) {
    match probe::ledger::verdict(&run.echo, token, &run.config.timeouts).await {
        Ok(verdict) => record.ledger = Some(verdict),
        Err(error) => {
            tracing::warn!(exit = %exit.name, %error, "reading the echo's h3 ledger failed");
        }
    }
}

/// `base` plus a random extra gap, uniform in `0..=jitter`.
fn jittered(base: Duration, jitter: Duration) -> Duration {
    let extra = u64::try_from(jitter.as_millis()).unwrap_or(u64::MAX);
    base + Duration::from_millis(if extra == 0 {
        0
    } else {
        rand::rng().random_range(0..=extra)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_in_range() {
        for _ in 0..100 {
            let d = jittered(Duration::from_millis(100), Duration::from_millis(50));
            assert!(d >= Duration::from_millis(100) && d <= Duration::from_millis(150));
        }
    }
}
