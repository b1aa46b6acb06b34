//! The broker's HTTP/JSON API (`GET /v1/openapi.json` describes it):
//! - `POST /v1/leases`
//!   `{class, holder, task?, origin?, ttl_ms?, wait_ms?, egress?, country?, max_gap_ms?}` →
//!   `201` a lease (on an exit of `country` when given, on one whose measured round-trip gap is
//!   at most `max_gap_ms` when given; with `egress: true`, the address it leaves from, checked
//!   at the echo server), or
//!   `503` with `retry_after_ms` when nothing is free within `wait_ms`;
//! - `POST /v1/leases/{id}/renew` `{fence, ttl_ms?}` → `200 {expires_at, ttl_ms}`;
//! - `DELETE /v1/leases/{id}?fence=…&outcome=…&latency_ms=…` → `200`;
//! - `POST /v1/tasks/{task}/outcome` `{outcome, latency_ms?}` → `200`: ends the task's live
//!   lease with the outcome (the forward proxy's tasks), `404` when it holds none;
//! - `GET /v1/exits`, `GET /metrics`, `GET /v1/openapi.json`, and `GET /healthz` (open).
//!
//! A refused renewal or release is `409` with its reason (`404` for an unknown lease); bad
//! input is `400` with what is wrong, and changes nothing. With a token every route but
//! `/healthz` needs `Authorization: Bearer <token>` (`401` otherwise). Proxy credentials appear
//! only in a lease's answer.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::auth::BrokerToken;
use crate::lease_store::LeaseStore;
use crate::service::{Broker, BrokerError, Ended, LeaseRequest};

/// The largest request body accepted.
const MAX_BODY: usize = 16 * 1024;
/// How far back `GET /v1/exits` reads outcomes, ms…
const REPORT_WINDOW_MS: i64 = 3_600_000;
/// …and how many ended leases at most, the newest: what one call costs stays bounded however
/// busy the broker (some 100 ms of the store's time).
const REPORT_MOST_LEASES: i64 = 100_000;
/// The OpenAPI description of this API.
const OPENAPI: &str = include_str!("../openapi.json");

struct Shared<S> {
    broker: Arc<Broker<S>>,
    token: Option<BrokerToken>,
}

/// The API's router over `broker`, behind `token` when there is one.
pub fn router<S: LeaseStore>(broker: Arc<Broker<S>>, token: Option<BrokerToken>) -> Router {
    let shared = Arc::new(Shared { broker, token });
    let guarded = Router::new()
        .route("/v1/leases", post(acquire::<S>))
        .route("/v1/leases/{id}/renew", post(renew::<S>))
        .route("/v1/leases/{id}", axum::routing::delete(release::<S>))
        .route("/v1/tasks/{task}/outcome", post(report::<S>))
        .route("/v1/exits", get(exits::<S>))
        .route("/v1/openapi.json", get(openapi))
        .route("/metrics", get(metrics::<S>))
        .route_layer(middleware::from_fn_with_state(
            shared.clone(),
            authorize::<S>,
        ));
    Router::new()
        .route("/healthz", get(healthz::<S>))
        .merge(guarded)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(shared)
}

async fn authorize<S: LeaseStore>(
    State(shared): State<Arc<Shared<S>>>,
    request: Request,
    next: Next,
) -> Response {
    match &shared.token {
        Some(token) if !token.admits(request.headers()) => {
            let mut response = error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
        _ => next.run(request).await,
    }
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// `503` with when to ask again, in the body (`retry_after_ms`) and in `Retry-After`.
fn unavailable(message: &str, retry_after_ms: u64) -> Response {
    let body = json!({ "error": message, "retry_after_ms": retry_after_ms });
    let seconds = retry_after_ms.div_ceil(1000).max(1);
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert(RETRY_AFTER, value);
    }
    response
}

/// How soon a worker may ask again after a store failure: a restarted or failed-over store is
/// usually back within a second.
const STORE_RETRY_MS: u64 = 1000;

impl IntoResponse for BrokerError {
    fn into_response(self) -> Response {
        match &self {
            Self::BadRequest(message) => error(StatusCode::BAD_REQUEST, message),
            Self::Unavailable { retry_after_ms, .. } => {
                unavailable(&self.to_string(), *retry_after_ms)
            }
            Self::Refused(exitvoice_lease::Refusal::Unknown) => {
                error(StatusCode::NOT_FOUND, "unknown_lease")
            }
            Self::Refused(refusal) => error(StatusCode::CONFLICT, refusal.as_str()),
            Self::Store(failure) => {
                tracing::warn!(%failure, "broker store failure");
                unavailable("the lease store is unavailable", STORE_RETRY_MS)
            }
            Self::Internal(message) => {
                tracing::error!(%message, "broker failure");
                error(StatusCode::INTERNAL_SERVER_ERROR, message)
            }
        }
    }
}

/// A JSON body of type `T`, or `400` with serde's reason.
fn body<T: serde::de::DeserializeOwned>(bytes: &Bytes) -> Result<T, BrokerError> {
    serde_json::from_slice(bytes)
        .map_err(|e| BrokerError::BadRequest(format!("bad JSON body: {e}")))
}

/// RFC 3339 of store milliseconds.
fn at(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireBody {
    class: String,
    holder: String,
    task: Option<String>,
    origin: Option<String>,
    ttl_ms: Option<u64>,
    wait_ms: Option<u64>,
    #[serde(default)]
    egress: bool,
    country: Option<String>,
    /// Read as any JSON value, so that a wrong one is refused with the field's name.
    max_gap_ms: Option<serde_json::Value>,
}

/// `max_gap_ms` as the broker takes it: a whole number of ms (the broker checks its range).
fn gap_limit(value: Option<serde_json::Value>) -> Result<Option<u64>, BrokerError> {
    let Some(value) = value.filter(|value| !value.is_null()) else {
        return Ok(None);
    };
    value.as_u64().map(Some).ok_or_else(|| {
        let shown: String = value.to_string().chars().take(40).collect();
        BrokerError::BadRequest(format!(
            "max_gap_ms must be a whole number of ms from 0 to {}, not {shown}",
            exitvoice_lease::MAX_GAP_MS
        ))
    })
}

async fn acquire<S: LeaseStore>(
    State(shared): State<Arc<Shared<S>>>,
    bytes: Bytes,
) -> Result<Response, BrokerError> {
    let request: AcquireBody = body(&bytes)?;
    let max_gap_ms = gap_limit(request.max_gap_ms)?;
    let lease = shared
        .broker
        .acquire(&LeaseRequest {
            class: request.class,
            holder: request.holder,
            task: request.task,
            origin: request.origin,
            ttl_ms: request.ttl_ms,
            wait_ms: request.wait_ms,
            egress: request.egress,
            country: request.country,
            max_gap_ms,
        })
        .await?;
    let granted = &lease.granted;
    let status = if granted.sticky {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((
        status,
        Json(json!({
            "lease_id": granted.lease_id,
            "fence": granted.fence,
            "exit": lease.exit,
            "proxy_url": lease.proxy_url.expose(),
            "session": granted.session,
            "expires_at": at(granted.expires_ms),
            "life_ends_at": at(granted.life_ends_ms),
            "ttl_ms": lease.ttl_ms,
            "sticky": granted.sticky,
            "egress": lease.egress.as_ref().map(|egress| match egress {
                Ok(seen) => {
                    let geo = seen.egress.geo.as_ref();
                    let place = geo.map(|g| &g.place);
                    json!({
                        "ip": seen.egress.ip, "tls_intercepted": seen.egress.intercepted,
                        "changed": seen.changed, "shared": seen.shared,
                        "country": place.and_then(|p| p.country.as_deref()),
                        "asn": place.and_then(|p| p.asn),
                        "organization": place.and_then(|p| p.organization.as_deref()),
                        "country_mismatch": seen.country_mismatch,
                        "country_changed": seen.country_changed,
                        "geo_sources": geo.map(|g| &g.sources),
                    })
                }
                Err(error) => json!({ "error": error }),
            }),
        })),
    )
        .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RenewBody {
    fence: i64,
    ttl_ms: Option<u64>,
}

async fn renew<S: LeaseStore>(
    State(shared): State<Arc<Shared<S>>>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, BrokerError> {
    let request: RenewBody = body(&bytes)?;
    let (expires, ttl) = shared
        .broker
        .renew(&id, request.fence, request.ttl_ms)
        .await?;
    Ok(Json(json!({ "expires_at": at(expires), "ttl_ms": ttl })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseQuery {
    fence: i64,
    outcome: String,
    latency_ms: Option<i64>,
}

async fn release<S: LeaseStore>(
    State(shared): State<Arc<Shared<S>>>,
    Path(id): Path<String>,
    query: Result<Query<ReleaseQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, BrokerError> {
    let Query(query) = query.map_err(|e| BrokerError::BadRequest(e.body_text()))?;
    if query.latency_ms.is_some_and(|ms| ms < 0) {
        return Err(BrokerError::BadRequest(
            "latency_ms must not be negative".to_owned(),
        ));
    }
    let ended = shared
        .broker
        .release(&id, query.fence, &query.outcome, query.latency_ms)
        .await?;
    let released = match ended {
        Ended::Released(released) => released,
        // The store is out of reach: the instance ends the lease when it answers again.
        Ended::Kept => {
            return Ok((
                StatusCode::ACCEPTED,
                Json(json!({ "released": false, "kept": true })),
            )
                .into_response())
        }
    };
    Ok(Json(json!({
        "released": true,
        "exit": released.exit_name,
        "banned_until": released.banned_until_ms.map(at),
        "session_retired": released.retired_session.is_some(),
    }))
    .into_response())
}

/// A task's outcome, as `POST /v1/tasks/{task}/outcome` takes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportBody {
    outcome: String,
    latency_ms: Option<i64>,
}

async fn report<S: LeaseStore>(
    State(shared): State<Arc<Shared<S>>>,
    Path(task): Path<String>,
    bytes: Bytes,
) -> Result<Response, BrokerError> {
    let body: ReportBody = body(&bytes)?;
    if body.latency_ms.is_some_and(|ms| ms < 0) {
        return Err(BrokerError::BadRequest(
            "latency_ms must not be negative".to_owned(),
        ));
    }
    let ended = shared
        .broker
        .report_task(&task, &body.outcome, body.latency_ms)
        .await?;
    Ok(match ended {
        None => error(StatusCode::NOT_FOUND, "the task holds no live lease"),
        Some(Ended::Kept) => (
            StatusCode::ACCEPTED,
            Json(json!({ "released": false, "kept": true })),
        )
            .into_response(),
        Some(Ended::Released(released)) => Json(json!({
            "released": true,
            "exit": released.exit_name,
            "banned_until": released.banned_until_ms.map(at),
            "session_retired": released.retired_session.is_some(),
        }))
        .into_response(),
    })
}

async fn exits<S: LeaseStore>(
    State(shared): State<Arc<Shared<S>>>,
) -> Result<Response, BrokerError> {
    let leases = shared.broker.leases();
    let now = leases.now_ms().await?;
    let reports = leases
        .exit_reports(now - REPORT_WINDOW_MS, REPORT_MOST_LEASES)
        .await?;
    let mut tunnels: BTreeMap<String, u64> = BTreeMap::new();
    for (unit, open) in shared.broker.metrics().tunnels().open_by_unit() {
        // A gateway's slots (`gw#2`) count toward the gateway.
        let exit = unit.split_once('#').map_or(unit.as_str(), |(exit, _)| exit);
        *tunnels.entry(exit.to_owned()).or_default() += open;
    }
    let exits: Vec<_> = reports
        .into_iter()
        .map(|report| {
            let ok = report.outcomes.iter().filter(|o| *o == "ok").count();
            let mut outcomes: BTreeMap<&str, u32> = BTreeMap::new();
            for outcome in &report.outcomes {
                *outcomes.entry(outcome).or_default() += 1;
            }
            let mut latencies = report.latencies_ms.clone();
            latencies.sort_unstable();
            #[allow(clippy::cast_precision_loss)]
            let success_rate = (!report.outcomes.is_empty()).then(|| {
                exitvoice_schema::decimal::thousandths(ok as f64 / report.outcomes.len() as f64)
            });
            json!({
                "exit": report.exit_name,
                "leased": !report.live.is_empty(),
                "holders": report.live.iter().map(|(unit, class, holder, expires)| json!({
                    "unit": unit, "class": class, "holder": holder, "expires_at": at(*expires),
                })).collect::<Vec<_>>(),
                "bans": report.bans.iter().map(|(origin, until)| json!({
                    "origin": (!origin.is_empty()).then_some(origin), "until": at(*until),
                })).collect::<Vec<_>>(),
                "leases_served": report.served,
                "tunnels_open_here": tunnels.get(&report.exit_name).copied().unwrap_or(0),
                "outcomes_last_hour": outcomes,
                "success_rate": success_rate,
                "latency_p50_ms": percentile(&latencies, 50),
                "latency_p95_ms": percentile(&latencies, 95),
            })
        })
        .collect();
    Ok(Json(json!({ "exits": exits })).into_response())
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[i64], pct: usize) -> Option<i64> {
    let rank = (sorted.len() * pct).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

async fn openapi() -> Response {
    ([(CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn metrics<S: LeaseStore>(
    State(shared): State<Arc<Shared<S>>>,
) -> Result<Response, BrokerError> {
    let gauges = shared.broker.leases().gauges().await?;
    let text = shared
        .broker
        .metrics()
        .encode(&gauges)
        .map_err(|_| BrokerError::Internal("metrics could not be encoded".to_owned()))?;
    Ok(([(CONTENT_TYPE, exitvoice_exposition::OPENMETRICS)], text).into_response())
}

async fn healthz<S: LeaseStore>(State(shared): State<Arc<Shared<S>>>) -> Response {
    match shared.broker.leases().now_ms().await {
        Ok(_) => (StatusCode::OK, "ok\n").into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "store unavailable\n").into_response(),
    }
}
