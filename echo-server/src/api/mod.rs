//! The HTTP API: routes, the per-connection capture extractor, JSON echo, errors as responses.
//!
//! Every route answers JSON. The echo routes (`/api/all`, `/api/tls`, `/api/http2`,
//! `/api/http1`, `/api/clean`, `/probe/<token>`, and the JSON 404 of every unknown path) describe
//! the request's own connection, which the connection task hands in as a request extension, and
//! queue the request's observation. `/healthz` and `/api/observations` are read-only.

mod echo;
mod error;
mod health;
mod observations;

use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use exitvoice_schema::Store;
use time::OffsetDateTime;

use crate::config::ApiToken;
use crate::metrics::Metrics;
use crate::writer::WriterHandle;

pub use error::ApiError;

/// Version of the API's JSON shapes other than the echo itself (which carries its own).
pub const API_VERSION: u32 = 1;

/// What the handlers share.
#[derive(Clone, Debug)]
pub(crate) struct ApiState {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) store: Store,
    pub(crate) writer: WriterHandle,
    pub(crate) api_token: Option<ApiToken>,
    pub(crate) body_cap: usize,
    pub(crate) started: OffsetDateTime,
}

/// All routes.
pub(crate) fn router(state: ApiState) -> Router {
    Router::new()
        .route("/api/all", get(echo::all).post(echo::all))
        .route("/api/tls", get(echo::tls))
        .route("/api/http2", get(echo::http2))
        .route("/api/http1", get(echo::http1))
        .route("/api/clean", get(echo::clean))
        .route("/api/observations", get(observations::list))
        .route("/probe/{token}", get(echo::probe).post(echo::probe))
        .route("/healthz", get(health::healthz))
        .fallback(echo::not_found)
        .with_state(state)
}

/// The probe token of a request, unchecked: the segment after `/probe/`, else the `token`
/// query parameter. Checked by the handler (see [`echo`]).
pub(crate) fn probe_token(uri: &axum::http::Uri) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct TokenParam {
        token: Option<String>,
    }
    if let Some(rest) = uri.path().strip_prefix("/probe/") {
        return Some(rest.split('/').next().unwrap_or_default().to_owned());
    }
    axum::extract::Query::<TokenParam>::try_from_uri(uri)
        .ok()
        .and_then(|query| query.0.token)
}
