//! How one request arrived on its connection: the connection, the request's position on it,
//! and its probe token as sent.

use std::sync::Arc;

use super::Connection;

/// How one request arrived on its connection, handed to the [`super::Responder`] with the
/// request.
#[derive(Clone, Debug)]
pub struct Arrival {
    /// The connection.
    pub conn: Arc<Connection>,
    /// 1 for the first request on the connection, 2 for the second, … in arrival order.
    pub index: u32,
    /// The probe token as sent (`/probe/<token>` or `?token=`), not yet checked.
    pub token: Option<String>,
    /// An earlier request on the connection carried a different probe token.
    pub earlier_other_probe: bool,
}

/// The probe token of a request, unchecked: the segment after `/probe/`, else the `token`
/// query parameter. Checked by the handler.
pub(crate) fn probe_token(uri: &http::Uri) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct TokenParam {
        token: Option<String>,
    }
    if let Some(rest) = uri.path().strip_prefix("/probe/") {
        return Some(rest.split('/').next().unwrap_or_default().to_owned());
    }
    // Most requests have no query: nothing to parse.
    uri.query()?;
    axum::extract::Query::<TokenParam>::try_from_uri(uri)
        .ok()
        .and_then(|query| query.0.token)
}
