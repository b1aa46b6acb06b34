//! A run's first probe: straight to the echo, without an exit, and its QUIC probe with it.

use std::sync::atomic::Ordering;

use exitvoice_exits::EchoTarget;
use exitvoice_schema::ProbeRecord;

use super::config::RunConfig;
use super::retry::probe_with_retries;
use crate::probe;
use crate::record::{self, now_rfc3339, ProbeContext};

/// The direct baseline's record of run `run_id` (failures recorded in it, not returned).
pub(super) async fn probe_baseline(
    echo: &EchoTarget,
    config: &RunConfig,
    run_id: &str,
    persona: &str,
) -> ProbeRecord {
    let token = probe::new_token();
    let started_at = now_rfc3339();
    let (outcome, retried) = probe_with_retries(None, echo, config, &token).await;
    config.progress.done.fetch_add(1, Ordering::Relaxed);
    if let Err(error) = &outcome {
        tracing::warn!(class = %error.class(), error = %error, "direct baseline failed");
    }
    let mut baseline = record::record(
        ProbeContext {
            run_id,
            exit: None,
            token: &token,
            persona,
            started_at,
            geo: config.geo.as_deref(),
        },
        outcome,
        None,
    );
    baseline.retried = retried;
    if config.quic {
        let h3 = probe::h3::probe(None, echo, &probe::new_token(), &config.quic_timeouts()).await;
        if let Some(error) = &h3.error {
            tracing::warn!(class = %error.class, error = %error.message, "direct QUIC probe failed");
        }
        baseline.h3 = Some(h3);
    }
    baseline
}
