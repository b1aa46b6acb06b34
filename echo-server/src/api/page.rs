//! The fingerprint page: the echo of a request, as `/api/all` writes it, rendered for people
//! (`exitvoice_pages::fingerprint`).
//!
//! The JSON the page shows and renders from is the API's own: the request's [`super::echo`]
//! view serialized once, then read back as the schema's [`Echo`], so the page cannot show a
//! value `/api/all` would not.

use axum::http::header::{CONTENT_SECURITY_POLICY, CONTENT_TYPE, VARY};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use exitvoice_pages::fingerprint::{render, FingerprintPage};
use exitvoice_schema::Echo;

use super::echo::Observed;
use super::{ApiError, ApiState};

/// The page of `seen`, with `status`.
pub(super) fn fingerprint(
    state: &ApiState,
    seen: &Observed,
    status: StatusCode,
) -> Result<Response, ApiError> {
    let json = seen.echo_json(state).map_err(|_| ApiError::Page)?;
    let echo: Echo = serde_json::from_str(&json).map_err(|_| ApiError::Page)?;
    let unseen = seen.layer_errors(&state.metrics);
    let html = render(&FingerprintPage {
        echo: &echo,
        json: &json,
        bucket_rule: seen.bucket_rule().explain(),
        unseen: &unseen,
    });
    Ok((
        status,
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                CONTENT_SECURITY_POLICY,
                exitvoice_pages::CONTENT_SECURITY_POLICY,
            ),
            // The same URL answers JSON to other clients (RFC 9110 section 12.5.5).
            (VARY, "Accept"),
        ],
        html,
    )
        .into_response())
}
