//! The Redis URL (`--store redis://…`, `rediss://…`, and for a Redis Cluster
//! `redis+cluster://[user:password@]host:port,host:port,…/` or `rediss+cluster://…`, any of its
//! nodes: the client finds the rest): its password is only for connecting.

/// A Redis URL whose password never leaves this type but to connect: `Display` and `Debug`
/// show `***` in its place.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl(String);

/// The schemes of a Redis Cluster's URL, and of its nodes'.
const CLUSTER_SCHEMES: [(&str, &str); 2] = [
    ("redis+cluster://", "redis://"),
    ("rediss+cluster://", "rediss://"),
];

/// Why a value is not a Redis URL.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RedisUrlError {
    /// Another scheme.
    #[error("not a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL")]
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

    /// Whether `value` names a Redis server or cluster (by its scheme), so that it parses as
    /// one.
    pub fn names_redis(value: &str) -> bool {
        [
            "redis://",
            "rediss://",
            "redis+cluster://",
            "rediss+cluster://",
        ]
        .iter()
        .any(|scheme| value.starts_with(scheme))
    }

    /// Whether the connection is TLS (`rediss://`, `rediss+cluster://`).
    pub fn tls(&self) -> bool {
        self.0.starts_with("rediss")
    }

    /// A cluster's nodes, each as a server's URL with the cluster URL's credentials; `None`
    /// for one server.
    pub(super) fn cluster_nodes(&self) -> Option<Vec<String>> {
        let (rest, scheme) = CLUSTER_SCHEMES
            .iter()
            .find_map(|(cluster, node)| Some((self.0.strip_prefix(cluster)?, *node)))?;
        let (credentials, hosts) = match rest.rsplit_once('@') {
            Some((credentials, hosts)) => (format!("{credentials}@"), hosts),
            None => (String::new(), rest),
        };
        let hosts = hosts.split('/').next().unwrap_or(hosts);
        Some(
            hosts
                .split(',')
                .map(|host| format!("{scheme}{credentials}{}/", host.trim()))
                .collect(),
        )
    }
}

impl std::str::FromStr for RedisUrl {
    type Err = RedisUrlError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        if !Self::names_redis(value) {
            return Err(RedisUrlError::Scheme);
        }
        let url = Self(value.to_owned());
        let nodes = url
            .cluster_nodes()
            .unwrap_or_else(|| vec![value.to_owned()]);
        for node in nodes {
            let parsed = url::Url::parse(&node).map_err(|e| RedisUrlError::Parse(e.to_string()))?;
            if parsed.host_str().is_none_or(str::is_empty) {
                return Err(RedisUrlError::Parse("a node without a host".to_owned()));
            }
        }
        Ok(url)
    }
}

impl std::fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some((scheme, rest)) = self.0.split_once("+cluster://") {
            // A cluster's URL is no URL to a parser (its hosts are a list): its password, the
            // part of what stands before the last `@` after the first `:`, is hidden by hand.
            return match rest.rsplit_once('@') {
                Some((credentials, hosts)) => {
                    let user = credentials.split(':').next().unwrap_or_default();
                    let hidden = if credentials.contains(':') {
                        ":***"
                    } else {
                        ""
                    };
                    write!(f, "{scheme}+cluster://{user}{hidden}@{hosts}")
                }
                None => write!(f, "{scheme}+cluster://{rest}"),
            };
        }
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

    #[test]
    fn a_cluster_url_names_its_nodes_and_never_shows_its_password() {
        let url: RedisUrl = "redis+cluster://broker:s3c@ret@10.0.0.1:7000, 10.0.0.2:7001/"
            .parse()
            .unwrap();
        assert!(!url.tls());
        assert_eq!(
            url.cluster_nodes().unwrap(),
            [
                "redis://broker:s3c@ret@10.0.0.1:7000/",
                "redis://broker:s3c@ret@10.0.0.2:7001/"
            ]
        );
        for shown in [url.to_string(), format!("{url:?}")] {
            assert!(!shown.contains("s3c"), "{shown}");
            assert!(
                shown.contains("redis+cluster://broker:***@10.0.0.1:7000"),
                "{shown}"
            );
        }
        let tls: RedisUrl = "rediss+cluster://h:1".parse().unwrap();
        assert!(tls.tls());
        assert_eq!(tls.cluster_nodes().unwrap(), ["rediss://h:1/"]);
        assert_eq!(
            "redis://h:1".parse::<RedisUrl>().unwrap().cluster_nodes(),
            None
        );
        assert!(matches!(
            "redis+cluster://h:1,:2".parse::<RedisUrl>(),
            Err(RedisUrlError::Parse(_))
        ));
    }
}
