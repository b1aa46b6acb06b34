//! `GET /api/observations?token=…&since=…&limit=…&raw=true`: stored observations, oldest first
//! (the raw bytes only with `raw=true`): TCP's in `observations`, HTTP/3 requests with their
//! QUIC connections in `quic` (each list up to `limit`).
//!
//! Closed by default, because an echo endpoint is reachable from the internet and its rows hold
//! every visitor's address and fingerprints. Who may read what:
//! - the bearer token of `--api-token` (compared in constant time, never logged): every row;
//! - anyone presenting a *capability* token, `?token=T` with `T` at least
//!   [`CAPABILITY_MIN_LEN`] characters of `A-Z a-z 0-9 - _` (the auditor's 128-bit hex tokens
//!   qualify): only the rows stored under exactly `T`. Such queries take from the source's
//!   rate-limit bucket, the one new connections take from, so guessing is as slow as connecting;
//! - anyone else: `403` without `--api-token`, `401` with it.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::Json;
use exitvoice_schema::{ObservationQuery, StoredObservation, OBSERVATION_SCHEMA_VERSION};
use exitvoice_store::StoredQuicRequest;
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::echo::Ctx;
use super::{ApiError, ApiState};
use crate::config::ApiToken;

/// Observations per answer when `limit` is not given.
const DEFAULT_LIMIT: u32 = 100;
/// Most observations per answer.
const MAX_LIMIT: u32 = 1000;
/// Shortest probe token that opens its own rows without the bearer token: 16 characters of a
/// 64-letter alphabet are 96 bits, beyond guessing at the per-source rate limit.
pub const CAPABILITY_MIN_LEN: usize = 16;

/// What a request may read.
#[derive(Debug, PartialEq, Eq)]
enum Access {
    /// Every row (the bearer token).
    All,
    /// Only the rows stored under this probe token.
    Token(String),
}

/// Whether `token` is long and plain enough to act as its own credential.
fn is_capability(token: &str) -> bool {
    token.len() >= CAPABILITY_MIN_LEN
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// Decides what the request may read, from its `Authorization` header and `token` parameter.
fn access(
    api_token: Option<&ApiToken>,
    headers: &HeaderMap,
    token: Option<&str>,
) -> Result<Access, ApiError> {
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.as_bytes().strip_prefix(b"Bearer "));
    match (api_token, presented) {
        (Some(expected), Some(presented)) if expected.matches(presented) => return Ok(Access::All),
        (Some(_), Some(_)) => return Err(ApiError::Unauthorized),
        _ => {}
    }
    match token {
        Some(token) if is_capability(token) => Ok(Access::Token(token.to_owned())),
        _ if api_token.is_some() => Err(ApiError::Unauthorized),
        _ => Err(ApiError::Forbidden),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct Params {
    token: Option<String>,
    /// RFC 3339 time, or milliseconds since the Unix epoch.
    since: Option<String>,
    limit: Option<u32>,
    /// Include the raw `hello` and `prefix` bytes (hex; up to 128 KiB per observation).
    #[serde(default)]
    raw: bool,
}

#[derive(Debug, Serialize)]
pub(super) struct Observations {
    schema_version: u32,
    observations: Vec<StoredObservation>,
    quic: Vec<StoredQuicRequest>,
}

pub(super) async fn list(
    State(state): State<ApiState>,
    ctx: Ctx,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Result<Json<Observations>, ApiError> {
    let access = access(state.api_token.as_ref(), &headers, params.token.as_deref())?;
    if let Access::Token(_) = &access {
        if state
            .admission
            .admit(ctx.0.conn.peer.ip(), tokio::time::Instant::now())
            .is_err()
        {
            state.metrics.reject_token_query();
            return Err(ApiError::RateLimited);
        }
    }
    let since_unix_ms = params.since.as_deref().map(parse_since).transpose()?;
    let query = ObservationQuery {
        token: match access {
            Access::All => params.token,
            Access::Token(token) => Some(token),
        },
        since_unix_ms,
        limit: params.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT),
        raw: params.raw,
    };
    let failed = |error: exitvoice_store::StoreError| {
        tracing::error!(%error, "observations query failed");
        ApiError::Store
    };
    let observations = state
        .store
        .observations(&query, exitvoice_protocol::analysis::layers)
        .await
        .map_err(failed)?;
    let quic = state.store.quic_requests(&query).await.map_err(failed)?;
    Ok(Json(Observations {
        schema_version: OBSERVATION_SCHEMA_VERSION,
        observations,
        quic,
    }))
}

fn parse_since(since: &str) -> Result<i64, ApiError> {
    if let Ok(ms) = since.parse::<i64>() {
        return Ok(ms);
    }
    let time = OffsetDateTime::parse(since, &Rfc3339)
        .map_err(|_| ApiError::BadQuery("since: RFC 3339 time or Unix milliseconds"))?;
    i64::try_from(time.unix_timestamp_nanos() / 1_000_000)
        .map_err(|_| ApiError::BadQuery("since: out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_tokens_are_long_and_plain() {
        assert!(is_capability("0123456789abcdef"));
        assert!(is_capability("A-b_C-d_E-f_G-h_"));
        assert!(!is_capability("0123456789abcde"), "15 characters");
        assert!(
            !is_capability("0123456789abcde."),
            "a dot is a valid probe token, no capability"
        );
    }

    #[test]
    fn access_is_closed_unless_bearer_or_capability() {
        let secret = ApiToken::new("bearer-secret".to_owned());
        let none = HeaderMap::new();
        let mut good = HeaderMap::new();
        good.insert(
            "authorization",
            "Bearer bearer-secret".parse().expect("header"),
        );
        let mut bad = HeaderMap::new();
        bad.insert("authorization", "Bearer nope".parse().expect("header"));
        let long = Some("0123456789abcdef0123");

        assert!(matches!(
            access(None, &none, None),
            Err(ApiError::Forbidden)
        ));
        assert!(matches!(
            access(None, &none, Some("short")),
            Err(ApiError::Forbidden)
        ));
        assert!(matches!(
            access(None, &good, None),
            Err(ApiError::Forbidden)
        ));
        assert_eq!(
            access(None, &none, long).ok(),
            Some(Access::Token("0123456789abcdef0123".to_owned()))
        );
        assert!(matches!(
            access(secret.as_ref(), &none, None),
            Err(ApiError::Unauthorized)
        ));
        assert!(matches!(
            access(secret.as_ref(), &bad, long),
            Err(ApiError::Unauthorized)
        ));
        assert_eq!(access(secret.as_ref(), &good, None).ok(), Some(Access::All));
        assert_eq!(
            access(secret.as_ref(), &good, Some("x")).ok(),
            Some(Access::All)
        );
        assert_eq!(
            access(secret.as_ref(), &none, long).ok(),
            Some(Access::Token("0123456789abcdef0123".to_owned()))
        );
    }

    #[test]
    fn since_takes_milliseconds_or_rfc3339() {
        assert_eq!(parse_since("1700000000000").ok(), Some(1_700_000_000_000));
        assert_eq!(
            parse_since("2023-11-14T22:13:20Z").ok(),
            Some(1_700_000_000_000)
        );
        assert!(parse_since("yesterday").is_err());
    }
}
