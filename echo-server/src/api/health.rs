//! `GET /healthz`: liveness plus every counter (open-connection gauge, handshake failures by
//! reason, parse errors by kind, queue depth and drops, write failures).

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use time::OffsetDateTime;

use super::{ApiState, API_VERSION};
use crate::metrics::MetricsReport;
use crate::SERVER;

/// The `/healthz` body.
#[derive(Debug, Serialize)]
pub(super) struct Health {
    api_version: u32,
    status: &'static str,
    server: &'static str,
    uptime_s: i64,
    queue: Queue,
    #[serde(flatten)]
    metrics: MetricsReport,
}

#[derive(Debug, Serialize)]
struct Queue {
    depth: usize,
    capacity: usize,
    /// Raw bytes held by queued and uncommitted observations (capped by `--queue-bytes`).
    bytes: usize,
}

pub(super) async fn healthz(State(state): State<ApiState>) -> Json<Health> {
    let metrics = state.metrics.report();
    // Degraded while the store is refusing writes: echoes still work, observations are lost.
    let status = if metrics.observations.store_failing {
        "degraded"
    } else {
        "ok"
    };
    Json(Health {
        api_version: API_VERSION,
        status,
        server: SERVER,
        uptime_s: (OffsetDateTime::now_utc() - state.started).whole_seconds(),
        queue: Queue {
            depth: state.writer.depth(),
            capacity: state.writer.capacity(),
            bytes: state.writer.bytes(),
        },
        metrics,
    })
}
