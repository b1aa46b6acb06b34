//! `exitvoice dashboard`: the audited exits of an auditor's database, for people.
//!
//! | route | answer |
//! |---|---|
//! | `GET /exits` | every exit of the latest labels: state, bucket, route and reasons, flags, voices, errors, latency, last probe; the pool's bucket and route charts; filters and sorting as query parameters ([`filter`]) |
//! | `GET /exits/<name>` | one exit: its label, its voice timeline (inline SVG) and its recent probes |
//! | `GET /exits.json` | the labels export, as `exitvoice labels` prints it |
//! | `GET /exits.csv` | the same as CSV, as `exitvoice labels --format csv` prints it |
//! | `GET /` | a redirect to `/exits` |
//! | `/assets/…` | the stylesheet and script (no token needed: they describe nothing) |
//!
//! Every other route needs the token ([`auth`]). The dashboard only reads the store, the latest
//! labels snapshot and the probes behind it; it never writes.

mod auth;
mod charts;
mod exit;
mod exits;
mod filter;
mod timeline;

use std::sync::Arc;

use axum::extract::State;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};
use exitvoice_schema::LabelsDoc;
use exitvoice_store::{Store, StoreError};
use maud::html;

pub use auth::{DashboardToken, MIN_TOKEN_CHARS};

use crate::layout::document;

/// What the dashboard does to each labels snapshot it reads before showing it: `exitvoice
/// dashboard --geoip` places the exits audited without geo databases.
pub type Placer = Arc<dyn Fn(&mut LabelsDoc) + Send + Sync>;

/// What the handlers share.
#[derive(Clone)]
pub(crate) struct DashboardState {
    store: Store,
    token: Arc<DashboardToken>,
    place: Option<Placer>,
}

/// The dashboard's routes over `store`, behind `token`; `place`, if any, sees every snapshot
/// before it is shown.
pub fn router(store: Store, token: DashboardToken, place: Option<Placer>) -> Router {
    let state = DashboardState {
        store,
        token: Arc::new(token),
        place,
    };
    let guarded = Router::new()
        .route("/", get(|| async { Redirect::to("/exits") }))
        .route("/exits", get(exits::page))
        .route("/exits.json", get(export))
        .route("/exits.csv", get(export_csv))
        .route("/exits/{name}", get(exit::page))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
    guarded
        .merge(crate::assets::router())
        .layer(axum::middleware::map_response(content_security_policy))
        .with_state(state)
}

/// Every answer of the dashboard carries the pages' [`crate::CONTENT_SECURITY_POLICY`].
async fn content_security_policy(mut response: Response) -> Response {
    response.headers_mut().insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(crate::CONTENT_SECURITY_POLICY),
    );
    response
}

/// Why a dashboard page could not be shown.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DashboardError {
    /// The database has no labels snapshot yet.
    #[error("no labels yet: run `exitvoice audit` on this database first")]
    NoLabels,
    /// The latest labels have no exit of that name.
    #[error("no exit of that name in the latest labels")]
    NoExit,
    /// The store could not be read.
    #[error("the database could not be read")]
    Store(#[from] StoreError),
    /// The labels could not be written as CSV.
    #[error("the labels could not be written as CSV")]
    Csv(String),
}

impl IntoResponse for DashboardError {
    fn into_response(self) -> Response {
        let status = match &self {
            Self::NoLabels | Self::NoExit => StatusCode::NOT_FOUND,
            Self::Store(error) => {
                tracing::warn!(error = %error, "dashboard: reading the store failed");
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::Csv(error) => {
                tracing::warn!(%error, "dashboard: writing the CSV failed");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        let message = self.to_string();
        let body = document(
            "Exits",
            html! { (message) },
            html! { p { a href="/exits" { "All exits" } } },
        );
        (status, Html(body.into_string())).into_response()
    }
}

/// The latest labels snapshot, or [`DashboardError::NoLabels`].
async fn latest(state: &DashboardState) -> Result<LabelsDoc, DashboardError> {
    let mut doc = state
        .store
        .latest_labels()
        .await?
        .ok_or(DashboardError::NoLabels)?;
    if let Some(place) = &state.place {
        place(&mut doc);
    }
    Ok(doc)
}

/// `/exits.json`: the labels export, the document `exitvoice labels` prints.
async fn export(State(state): State<DashboardState>) -> Result<Json<LabelsDoc>, DashboardError> {
    Ok(Json(latest(&state).await?))
}

/// The newest labels as CSV ([`exitvoice_schema::labels_csv`]), as a download.
async fn export_csv(State(state): State<DashboardState>) -> Result<Response, DashboardError> {
    let csv = exitvoice_schema::labels_csv(&latest(&state).await?)
        .map_err(|error| DashboardError::Csv(error.to_string()))?;
    Ok((
        [
            (CONTENT_TYPE, "text/csv; charset=utf-8"),
            (CONTENT_DISPOSITION, "attachment; filename=\"exits.csv\""),
        ],
        csv,
    )
        .into_response())
}

/// `name` as one URL path segment: every byte outside RFC 3986's unreserved set
/// percent-encoded.
pub(crate) fn path_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::path_segment;

    #[test]
    fn exit_names_become_one_path_segment() {
        assert_eq!(path_segment("eu-1_a.b~"), "eu-1_a.b~");
        assert_eq!(path_segment("a/b c?#"), "a%2Fb%20c%3F%23");
        assert_eq!(path_segment("é"), "%C3%A9");
    }
}
