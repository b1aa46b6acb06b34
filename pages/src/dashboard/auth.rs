//! The dashboard's one credential: a token, presented as a bearer token (scripts reading
//! `/exits.json`) or as the password of HTTP Basic auth (a browser's own login prompt; any user
//! name). Compared in constant time; never logged, never rendered.

use std::fmt;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use subtle::ConstantTimeEq as _;

use super::DashboardState;

/// The token that opens the dashboard. Its `Debug` is redacted, so no log line or error can
/// carry it.
#[derive(Clone)]
pub struct DashboardToken(String);

/// The shortest token accepted, in characters: the token is the dashboard's only lock (failed
/// attempts are not rate-limited), so it must be too long to guess; `openssl rand -hex 16` gives
/// 32.
pub const MIN_TOKEN_CHARS: usize = 16;

impl DashboardToken {
    /// The token, unless it is shorter than [`MIN_TOKEN_CHARS`] (an empty one would open the
    /// dashboard to anyone, a short one to whoever tries enough).
    pub fn new(token: String) -> Option<Self> {
        (token.chars().count() >= MIN_TOKEN_CHARS).then_some(Self(token))
    }

    /// Whether `presented` is the token. The bytes are compared in constant time (`subtle`); only
    /// a difference in length returns early, which tells an attacker the length and nothing of
    /// the content.
    fn matches(&self, presented: &[u8]) -> bool {
        self.0.as_bytes().ct_eq(presented).into()
    }

    /// Whether the request's `Authorization` carries the token (`Bearer <token>`, or `Basic`
    /// with the token as password).
    pub(crate) fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let (scheme, credentials) = value.trim().split_once(' ').unwrap_or((value, ""));
        let credentials = credentials.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            return self.matches(credentials.as_bytes());
        }
        if scheme.eq_ignore_ascii_case("basic") {
            let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(credentials) else {
                return false;
            };
            // RFC 7617 section 2: user-id ":" password; the user id cannot contain a colon.
            let password = decoded
                .iter()
                .position(|b| *b == b':')
                .and_then(|colon| decoded.get(colon + 1..))
                .unwrap_or_default();
            return self.matches(password);
        }
        false
    }
}

impl fmt::Debug for DashboardToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DashboardToken(***)")
    }
}

/// Middleware: the request goes on only with the token; else 401 with a Basic challenge, so a
/// browser asks for it.
pub(crate) async fn require_token(
    State(state): State<DashboardState>,
    request: Request,
    next: Next,
) -> Response {
    if state.token.admits(request.headers()) {
        return next.run(request).await;
    }
    let mut response = (
        StatusCode::UNAUTHORIZED,
        "The exitvoice dashboard needs its token: the password of Basic auth (any user name) \
         or a bearer token.\n",
    )
        .into_response();
    response.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"exitvoice dashboard\", charset=\"UTF-8\""),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, value.parse().expect("header value"));
        headers
    }

    fn basic(user_password: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_password)
        )
    }

    #[test]
    fn only_the_token_opens() {
        let token = DashboardToken::new("s3cret-token-0123".to_owned()).expect("long enough");
        assert!(token.admits(&with("Bearer s3cret-token-0123")));
        assert!(token.admits(&with("bearer  s3cret-token-0123 ")));
        assert!(token.admits(&with(&basic("anyone:s3cret-token-0123"))));
        assert!(token.admits(&with(&basic(":s3cret-token-0123"))));
        assert!(!token.admits(&with("Bearer s3cret-token-012")));
        assert!(!token.admits(&with("Bearer s3cret-token-01234")));
        assert!(!token.admits(&with(&basic("s3cret-token-0123"))));
        assert!(!token.admits(&with(&basic("s3cret-token-0123:"))));
        assert!(!token.admits(&with("Basic !!!not base64")));
        assert!(!token.admits(&with("Digest s3cret-token-0123")));
        assert!(!token.admits(&HeaderMap::new()));
        assert!(DashboardToken::new(String::new()).is_none());
        assert!(DashboardToken::new("x".repeat(MIN_TOKEN_CHARS - 1)).is_none());
        assert!(!format!("{token:?}").contains("s3cret"));
    }
}
