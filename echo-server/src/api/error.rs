//! API errors as JSON responses. Nothing internal leaks to the client.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// Why a request could not be answered as asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The request reached a handler without its connection capture (never over a socket).
    #[error("no connection capture for this request")]
    NoCapture,
    /// The request body is over the body cap.
    #[error("request body over {cap} bytes")]
    BodyTooLarge {
        /// The cap in force.
        cap: usize,
    },
    /// The probe token has characters or a length the server does not accept.
    #[error("invalid probe token")]
    BadToken,
    /// A query parameter could not be read.
    #[error("invalid query: {0}")]
    BadQuery(&'static str),
    /// The observations endpoint needs the bearer token.
    #[error("missing or wrong bearer token")]
    Unauthorized,
    /// Listing observations without a capability token, on a server started without
    /// `--api-token`: closed by default, so a public endpoint publishes no visitor.
    #[error(
        "listing observations needs --api-token (EXITVOICE_API_TOKEN) and its bearer token, or \
         ?token=<probe token> of at least 16 characters of A-Z a-z 0-9 - _"
    )]
    Forbidden,
    /// Too many unauthenticated token queries from this source (the per-source rate limit).
    #[error("too many requests from this source")]
    RateLimited,
    /// The store failed.
    #[error("store error")]
    Store,
    /// The fingerprint page could not be written (the echo did not read back as an `Echo`).
    #[error("the page could not be written")]
    Page,
    /// The answer could not be written as JSON.
    #[error("the answer could not be written")]
    Encode,
}

impl ApiError {
    fn code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::NoCapture => (StatusCode::INTERNAL_SERVER_ERROR, "no_capture"),
            Self::BodyTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
            Self::BadToken => (StatusCode::BAD_REQUEST, "bad_token"),
            Self::BadQuery(_) => (StatusCode::BAD_REQUEST, "bad_query"),
            Self::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::Forbidden => (StatusCode::FORBIDDEN, "forbidden"),
            Self::RateLimited => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            Self::Store => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
            Self::Page => (StatusCode::INTERNAL_SERVER_ERROR, "page_failed"),
            Self::Encode => (StatusCode::INTERNAL_SERVER_ERROR, "encode_failed"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.code();
        let body = Json(serde_json::json!({
            "api_version": super::API_VERSION,
            "error": code,
            "message": self.to_string(),
        }));
        let mut response = (status, body).into_response();
        if matches!(self, Self::Unauthorized) {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}
