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

use crate::capture::Connection;
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

/// The request's position on its connection, set by the counting layer before any handler.
#[derive(Clone, Copy, Debug)]
struct RequestIndex(u32);

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
        .layer(axum::middleware::from_fn(count_request))
        .with_state(state)
}

/// Numbers every request on its connection in arrival order (hyper calls the service in the
/// order requests arrive, on HTTP/2 in the order of their HEADERS frames).
async fn count_request(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if let Some(conn) = request.extensions().get::<Arc<Connection>>() {
        let index = conn.next_request();
        request.extensions_mut().insert(RequestIndex(index));
    }
    next.run(request).await
}
