//! The stylesheet and the copy-button script, compiled into the binary and served by it.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// Where the stylesheet is served.
pub const STYLESHEET_PATH: &str = "/assets/exitvoice.css";
/// Where the copy-button script is served.
pub const SCRIPT_PATH: &str = "/assets/copy.js";

const STYLESHEET: &str = include_str!("../assets/exitvoice.css");
const SCRIPT: &str = include_str!("../assets/copy.js");

/// Both assets change only with the binary: an hour of caching spares a page view two requests.
const CACHE: &str = "public, max-age=3600";

/// The two asset routes, for any router state. They describe nothing about anyone: no
/// authentication, nothing stored.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            STYLESHEET_PATH,
            get(|| async { asset("text/css; charset=utf-8", STYLESHEET) }),
        )
        .route(
            SCRIPT_PATH,
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(CONTENT_TYPE, content_type), (CACHE_CONTROL, CACHE)], body).into_response()
}
