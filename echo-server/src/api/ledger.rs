//! `GET /api/ledger?token=`: the h3 downgrade ledger's identities whose TCP requests carried the
//! token, each with its verdict (`crate::ledger`). A probe token is a capability: the caller
//! sees only the identities that used it.

use axum::extract::{Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};

use super::echo::valid_token;
use super::{ApiError, ApiState, API_VERSION};
use crate::clock::now_ms;
use crate::ledger::{Entry, Verdict};

#[derive(Debug, Deserialize)]
pub(super) struct Params {
    token: Option<String>,
}

#[derive(Debug, Serialize)]
struct Identity {
    #[serde(flatten)]
    entry: Entry,
    verdict: Verdict,
    why: String,
}

#[derive(Debug, Serialize)]
pub(super) struct LedgerAnswer {
    api_version: u32,
    token: String,
    identities: Vec<Identity>,
}

pub(super) async fn by_token(
    State(state): State<ApiState>,
    Query(params): Query<Params>,
) -> Result<Json<LedgerAnswer>, ApiError> {
    let token = valid_token(
        params
            .token
            .ok_or(ApiError::BadQuery("token is required"))?,
    )?;
    let now = now_ms();
    let identities = state
        .ledger
        .by_token(&token)
        .into_iter()
        .map(|entry| {
            let (verdict, why) = entry.verdict(now, state.ledger.rule());
            Identity {
                entry,
                verdict,
                why,
            }
        })
        .collect();
    Ok(Json(LedgerAnswer {
        api_version: API_VERSION,
        token,
        identities,
    }))
}
