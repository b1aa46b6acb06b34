//! The Redis URL (`--store redis://…`, `rediss://…`): its password is only for connecting.

/// A `redis://` or `rediss://` URL whose password never leaves this type but to connect:
/// `Display` and `Debug` show `***` in its place.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl(String);

/// Why a value is not a Redis URL.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RedisUrlError {
    /// Another scheme.
    #[error("not a redis:// or rediss:// URL")]
    Scheme,
    /// A URL that does not parse (the parser's reason; it never quotes the URL).
    #[error("the Redis URL does not parse ({0})")]
    Parse(String),
}

impl RedisUrl {
    /// The URL with its password, for the client only.
    pub(super) fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `value` names a Redis server (by its scheme), so that it parses as one.
    pub fn names_redis(value: &str) -> bool {
        value.starts_with("redis://") || value.starts_with("rediss://")
    }

    /// Whether the connection is TLS (`rediss://`).
    pub fn tls(&self) -> bool {
        self.0.starts_with("rediss://")
    }
}

impl std::str::FromStr for RedisUrl {
    type Err = RedisUrlError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        if !Self::names_redis(value) {
            return Err(RedisUrlError::Scheme);
        }
        url::Url::parse(value).map_err(|e| RedisUrlError::Parse(e.to_string()))?;
        Ok(Self(value.to_owned()))
    }
}

impl std::fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = exitvoice_store::redacted(&self.0);
        f.write_str(shown.as_deref().unwrap_or("redis://***"))
    }
}

impl std::fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RedisUrl").field(&self.to_string()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redis_url_never_shows_its_password() {
        let url: RedisUrl = "rediss://broker:s3cret@cache.example:6380/2"
            .parse()
            .unwrap();
        assert!(url.tls());
        for shown in [url.to_string(), format!("{url:?}")] {
            assert!(!shown.contains("s3cret"), "{shown}");
            assert!(shown.contains("broker:***@cache.example:6380/2"), "{shown}");
        }
        assert_eq!(
            "postgres://x".parse::<RedisUrl>(),
            Err(RedisUrlError::Scheme)
        );
        assert!(matches!(
            "redis://[::1".parse::<RedisUrl>(),
            Err(RedisUrlError::Parse(_))
        ));
    }
}
