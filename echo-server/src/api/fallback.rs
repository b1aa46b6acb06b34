//! Every path without a route: for a client that prefers HTML, the fingerprint page (`200` at
//! `/`, `404` elsewhere); for any other, the JSON 404 with the clean summary. Paths under
//! `/api/` and `/probe/` are always JSON. Above both the echo (which observes the request and
//! writes the JSON 404) and the page (which renders the request's echo).

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use exitvoice_pages::negotiate::prefers_html;

use super::echo::{not_found_json, read_and_observe, Ctx};
use super::page;
use super::{ApiError, ApiState};

/// The router's fallback.
pub(super) async fn not_found(
    State(state): State<ApiState>,
    ctx: Ctx,
    request: Request,
) -> Result<Response, ApiError> {
    let path = request.uri().path();
    let status = if path == "/" {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    let html = !path.starts_with("/api/")
        && !path.starts_with("/probe/")
        && prefers_html(request.headers());
    if html {
        // The page shows the round trips, the first PING's answer with them.
        ctx.0.conn.round_trips.first_ping().await;
    }
    let seen = read_and_observe(&state, ctx.0, request, html).await?;
    if html {
        return page::fingerprint(&state, &seen, status);
    }
    not_found_json(&state, &seen)
}
