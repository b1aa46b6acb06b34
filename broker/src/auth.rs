//! The broker's one credential: a bearer token (`--broker-token`), at least
//! [`MIN_TOKEN_CHARS`] characters, compared in constant time (`subtle`), never logged.

use std::fmt;

use axum::http::header::AUTHORIZATION;
use axum::http::HeaderMap;
use subtle::ConstantTimeEq as _;

/// The shortest token accepted: it is the broker's only lock.
pub const MIN_TOKEN_CHARS: usize = 16;

/// The token; its `Debug` is redacted.
#[derive(Clone)]
pub struct BrokerToken(String);

impl BrokerToken {
    /// The token, unless it is shorter than [`MIN_TOKEN_CHARS`].
    pub fn new(token: String) -> Option<Self> {
        (token.chars().count() >= MIN_TOKEN_CHARS).then_some(Self(token))
    }

    /// Whether `presented` (a proxy password) is the token. Only a difference in length
    /// returns early.
    pub fn matches(&self, presented: &str) -> bool {
        bool::from(self.0.as_bytes().ct_eq(presented.as_bytes()))
    }

    /// Whether the request's `Authorization: Bearer …` carries the token. Only a difference in
    /// length returns early.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let Some((scheme, presented)) = value.trim().split_once(' ') else {
            return false;
        };
        scheme.eq_ignore_ascii_case("bearer")
            && bool::from(self.0.as_bytes().ct_eq(presented.trim().as_bytes()))
    }
}

impl fmt::Debug for BrokerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BrokerToken(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn bearer_only_the_whole_token() {
        assert!(BrokerToken::new("short".into()).is_none());
        let token = BrokerToken::new("0123456789abcdef".into()).unwrap();
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            token.admits(&headers)
        };
        assert!(with("Bearer 0123456789abcdef"));
        assert!(with("bearer  0123456789abcdef "));
        assert!(!with("Bearer 0123456789abcde"));
        assert!(!with("Basic 0123456789abcdef"));
        assert!(!with("Bearer"));
        assert!(!token.admits(&HeaderMap::new()));
        assert!(token.matches("0123456789abcdef"));
        assert!(!token.matches("0123456789abcdeF"));
        assert!(!token.matches(""));
        assert_eq!(format!("{token:?}"), "BrokerToken(***)");
    }
}
