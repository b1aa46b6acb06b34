//! The echo routes: each describes the request's own connection and queues its observation.
//!
//! `/api/all` and `/probe/<token>` answer the full [`Echo`]; `/api/tls`, `/api/http2` and
//! `/api/http1` answer one layer of it; `/api/clean` only hashes and ids; every unknown path a
//! JSON 404 carrying the clean summary, so a browser pointed at `/` sees its fingerprint.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use exitvoice_schema::{
    Alpn, Bucket, Echo, Http1Echo, Http2Echo, Peer, RequestPosition, Spoken, TlsEcho, VoiceId,
};
use http_body_util::BodyExt as _;
use serde::Serialize;

use super::{ApiError, ApiState};
use crate::analysis::{self, RequestFacts};
use crate::capture::{Arrival, Connection};
use crate::writer::Job;

/// Longest probe token accepted.
const MAX_TOKEN_LEN: usize = 128;

/// The request's connection and how the request arrived on it.
pub(super) struct Ctx {
    conn: Arc<Connection>,
    arrival: Arrival,
}

impl<S: Send + Sync> FromRequestParts<S> for Ctx {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let conn = parts
            .extensions
            .get::<Arc<Connection>>()
            .cloned()
            .ok_or(ApiError::NoCapture)?;
        let arrival = parts
            .extensions
            .get::<Arrival>()
            .cloned()
            .ok_or(ApiError::NoCapture)?;
        Ok(Self { conn, arrival })
    }
}

/// A probe token: 1 to 128 characters of `A-Z a-z 0-9 - _ .` (URL-safe, no escaping needed).
fn valid_token(token: String) -> Result<String, ApiError> {
    let ok = !token.is_empty()
        && token.len() <= MAX_TOKEN_LEN
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(token)
    } else {
        Err(ApiError::BadToken)
    }
}

/// Bytes past the body cap still read (and discarded) before answering 413, so a client that is
/// still uploading gets the answer instead of a reset connection ("lingering close").
const BODY_DRAIN_SLACK: usize = 1 << 20;

/// Reads and discards the request body (nothing is buffered); an error when it is over `cap`.
async fn drain_body(mut body: axum::body::Body, cap: usize) -> Result<(), ApiError> {
    let mut seen = 0_usize;
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            seen = seen.saturating_add(data.len());
            if seen > cap.saturating_add(BODY_DRAIN_SLACK) {
                break;
            }
        }
    }
    if seen > cap {
        Err(ApiError::BodyTooLarge { cap })
    } else {
        Ok(())
    }
}

/// Reads (and discards) the body up to the cap, builds the echo, queues the observation.
async fn observe(state: &ApiState, ctx: &Ctx, request: Request) -> Result<Echo, ApiError> {
    let (parts, body) = request.into_parts();
    let token = ctx.arrival.token.clone().map(valid_token).transpose()?;
    drain_body(body, state.body_cap).await?;
    let facts = RequestFacts {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned()),
        token,
        index: ctx.arrival.index,
        earlier_other_probe: ctx.arrival.earlier_other_probe,
    };
    let echo = analysis::request_echo(&ctx.conn, &state.metrics, &facts);
    state.metrics.request();
    let observation = analysis::request_observation(&ctx.conn, &echo, &state.metrics);
    ctx.conn.mark_observed();
    state.writer.submit(Job::Request(Box::new(observation)));
    Ok(echo)
}

pub(super) async fn all(
    State(state): State<ApiState>,
    ctx: Ctx,
    request: Request,
) -> Result<Json<Echo>, ApiError> {
    observe(&state, &ctx, request).await.map(Json)
}

/// `/probe/<token>`: the token itself was read when the request arrived
/// ([`super::probe_token`]).
pub(super) async fn probe(
    State(state): State<ApiState>,
    ctx: Ctx,
    request: Request,
) -> Result<Json<Echo>, ApiError> {
    observe(&state, &ctx, request).await.map(Json)
}

/// `/api/tls`: the TLS layer.
#[derive(Debug, Serialize)]
pub(super) struct TlsView {
    schema_version: u32,
    time: String,
    peer: Peer,
    alpn: Alpn,
    tls: Option<TlsEcho>,
    request: RequestPosition,
}

pub(super) async fn tls(
    State(state): State<ApiState>,
    ctx: Ctx,
    request: Request,
) -> Result<Json<TlsView>, ApiError> {
    let echo = observe(&state, &ctx, request).await?;
    Ok(Json(TlsView {
        schema_version: echo.schema_version,
        time: echo.time,
        peer: echo.peer,
        alpn: echo.alpn,
        tls: echo.tls,
        request: echo.request,
    }))
}

/// `/api/http2`: the HTTP/2 layer, the request's position and the bucket.
#[derive(Debug, Serialize)]
pub(super) struct Http2View {
    schema_version: u32,
    time: String,
    alpn: Alpn,
    http2: Option<Http2Echo>,
    request: RequestPosition,
    bucket: Option<Bucket>,
    profile: Option<String>,
}

pub(super) async fn http2(
    State(state): State<ApiState>,
    ctx: Ctx,
    request: Request,
) -> Result<Json<Http2View>, ApiError> {
    let echo = observe(&state, &ctx, request).await?;
    Ok(Json(Http2View {
        schema_version: echo.schema_version,
        time: echo.time,
        alpn: echo.alpn,
        http2: echo.http2,
        request: echo.request,
        bucket: echo.bucket,
        profile: echo.profile,
    }))
}

/// `/api/http1`: the HTTP/1 layer.
#[derive(Debug, Serialize)]
pub(super) struct Http1View {
    schema_version: u32,
    time: String,
    alpn: Alpn,
    http1: Option<Http1Echo>,
    request: RequestPosition,
    bucket: Option<Bucket>,
}

pub(super) async fn http1(
    State(state): State<ApiState>,
    ctx: Ctx,
    request: Request,
) -> Result<Json<Http1View>, ApiError> {
    let echo = observe(&state, &ctx, request).await?;
    Ok(Json(Http1View {
        schema_version: echo.schema_version,
        time: echo.time,
        alpn: echo.alpn,
        http1: echo.http1,
        request: echo.request,
        bucket: echo.bucket,
    }))
}

/// `/api/clean`, and the summary inside every 404: hashes and ids only.
#[derive(Debug, Serialize)]
pub(super) struct Clean {
    schema_version: u32,
    ja3_hash: Option<String>,
    ja3n_hash: Option<String>,
    ja4: Option<String>,
    tls_voice_id: Option<VoiceId>,
    order_id: Option<String>,
    akamai_fingerprint_hash: Option<String>,
    http2_voice_id: Option<VoiceId>,
    http1_voice_id: Option<VoiceId>,
    spoken: Spoken,
    stream_id: Option<u32>,
    index: u32,
    bucket: Option<Bucket>,
    profile: Option<String>,
}

impl From<Echo> for Clean {
    fn from(echo: Echo) -> Self {
        let tls = echo.tls.as_ref();
        let http2 = echo.http2.as_ref();
        Self {
            schema_version: echo.schema_version,
            ja3_hash: tls.map(|t| t.ja3_hash.clone()),
            ja3n_hash: tls.map(|t| t.ja3n_hash.clone()),
            ja4: tls.map(|t| t.ja4.clone()),
            tls_voice_id: tls.map(|t| t.voice_id.clone()),
            order_id: tls.map(|t| t.order_id.clone()),
            akamai_fingerprint_hash: http2.map(|h| h.akamai_fingerprint_hash.clone()),
            http2_voice_id: http2.map(|h| h.voice_id.clone()),
            http1_voice_id: echo.http1.map(|h| h.voice_id),
            spoken: echo.alpn.spoken,
            stream_id: echo.request.stream_id,
            index: echo.request.index,
            bucket: echo.bucket,
            profile: echo.profile,
        }
    }
}

pub(super) async fn clean(
    State(state): State<ApiState>,
    ctx: Ctx,
    request: Request,
) -> Result<Json<Clean>, ApiError> {
    let echo = observe(&state, &ctx, request).await?;
    Ok(Json(Clean::from(echo)))
}

/// The JSON 404 of every unknown path.
#[derive(Debug, Serialize)]
struct NotFound {
    api_version: u32,
    error: &'static str,
    path: String,
    fingerprint: Clean,
}

pub(super) async fn not_found(
    State(state): State<ApiState>,
    ctx: Ctx,
    request: Request,
) -> Result<Response, ApiError> {
    let echo = observe(&state, &ctx, request).await?;
    let body = NotFound {
        api_version: super::API_VERSION,
        error: "not_found",
        path: echo.path.clone(),
        fingerprint: Clean::from(echo),
    };
    Ok((StatusCode::NOT_FOUND, Json(body)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_short_and_url_safe() {
        assert!(valid_token("abc-DEF_1.2".to_owned()).is_ok());
        assert!(valid_token(String::new()).is_err());
        assert!(valid_token("a b".to_owned()).is_err());
        assert!(valid_token("x".repeat(129)).is_err());
    }
}
