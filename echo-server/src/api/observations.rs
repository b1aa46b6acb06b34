//! `GET /api/observations?token=…&since=…&limit=…&raw=true`: stored observations, oldest first
//! (the raw bytes only with `raw=true`),
//! optionally behind a bearer token (`--api-token`, compared in constant time, never logged).

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::Json;
use exitvoice_schema::{ObservationQuery, StoredObservation, OBSERVATION_SCHEMA_VERSION};
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::{ApiError, ApiState};

/// Observations per answer when `limit` is not given.
const DEFAULT_LIMIT: u32 = 100;
/// Most observations per answer.
const MAX_LIMIT: u32 = 1000;

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
}

pub(super) async fn list(
    State(state): State<ApiState>,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Result<Json<Observations>, ApiError> {
    if let Some(expected) = &state.api_token {
        let presented = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|value| value.as_bytes().strip_prefix(b"Bearer "))
            .unwrap_or_default();
        if !expected.matches(presented) {
            return Err(ApiError::Unauthorized);
        }
    }
    let since_unix_ms = params.since.as_deref().map(parse_since).transpose()?;
    let query = ObservationQuery {
        token: params.token,
        since_unix_ms,
        limit: params.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT),
    };
    let mut observations = state.store.observations(&query).await.map_err(|error| {
        tracing::error!(%error, "observations query failed");
        ApiError::Store
    })?;
    if !params.raw {
        for stored in &mut observations {
            stored.observation.hello = Vec::new();
            stored.observation.prefix = Vec::new();
        }
    }
    Ok(Json(Observations {
        schema_version: OBSERVATION_SCHEMA_VERSION,
        observations,
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
    fn since_takes_milliseconds_or_rfc3339() {
        assert_eq!(parse_since("1700000000000").ok(), Some(1_700_000_000_000));
        assert_eq!(
            parse_since("2023-11-14T22:13:20Z").ok(),
            Some(1_700_000_000_000)
        );
        assert!(parse_since("yesterday").is_err());
    }
}
