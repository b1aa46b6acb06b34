//! The Redis URL: its password is only for connecting.
//!
//! - one server: `redis://[user:password@]host:port[/db]`, `rediss://…` for TLS;
//! - a Redis Cluster: `redis+cluster://[user:password@]host:port,host:port,…/` (any of its
//!   nodes: the client finds the rest), `rediss+cluster://…`;
//! - a primary watched by Redis Sentinel: `redis+sentinel://[user:password@]host:26379,…/<name>`
//!   (the sentinels, and the name they watch the primary by; the credentials are the
//!   primary's), `rediss+sentinel://…` (TLS to the sentinels and the primary).

/// A Redis URL whose password never leaves this type but to connect: `Display` and `Debug`
/// show `***` in its place.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl(String);

/// Why a value is not a Redis URL.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RedisUrlError {
    /// Another scheme.
    #[error("not a redis://, rediss://, redis+cluster:// or redis+sentinel:// (rediss+…) URL")]
    Scheme,
    /// A URL that does not parse (the parser's reason; it never quotes the URL).
    #[error("the Redis URL does not parse ({0})")]
    Parse(String),
}

/// Where a URL leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Topology {
    /// One server.
    One,
    /// A cluster's nodes, each as a server's URL with the credentials.
    Cluster(Vec<String>),
    /// Sentinels, each as a server's URL without the credentials, and the name they watch the
    /// primary by.
    Sentinel {
        sentinels: Vec<String>,
        name: String,
    },
}

/// The schemes of many hosts: a cluster's and a sentinel's, plain and TLS.
const MANY_HOSTS: [&str; 4] = [
    "redis+cluster://",
    "rediss+cluster://",
    "redis+sentinel://",
    "rediss+sentinel://",
];

impl RedisUrl {
    /// The URL with its password, for the client only.
    pub(super) fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `value` names a Redis server, cluster or sentinel (by its scheme), so that it
    /// parses as one.
    pub fn names_redis(value: &str) -> bool {
        value.starts_with("redis://")
            || value.starts_with("rediss://")
            || MANY_HOSTS.iter().any(|scheme| value.starts_with(scheme))
    }

    /// Whether the connection is TLS (`rediss://`, `rediss+…://`).
    pub fn tls(&self) -> bool {
        self.0.starts_with("rediss")
    }

    /// The user and password, percent-decoded, for the client only (`None` without either).
    pub(super) fn credentials(&self) -> Option<(String, Option<String>)> {
        let (_, rest) = self.0.split_once("://")?;
        let (credentials, _) = rest.rsplit_once('@')?;
        let decode = |text: &str| {
            url::form_urlencoded::parse(format!("x={text}").as_bytes())
                .next()
                .map_or_else(String::new, |(_, value)| value.into_owned())
        };
        Some(match credentials.split_once(':') {
            Some((user, password)) => (decode(user), Some(decode(password))),
            None => (decode(credentials), None),
        })
    }

    /// Where the URL leads.
    pub(super) fn topology(&self) -> Topology {
        let Some(scheme) = MANY_HOSTS.iter().find(|scheme| self.0.starts_with(*scheme)) else {
            return Topology::One;
        };
        let node_scheme = if self.tls() { "rediss://" } else { "redis://" };
        let rest = &self.0[scheme.len()..];
        let (credentials, hosts) = match rest.rsplit_once('@') {
            Some((credentials, hosts)) => (format!("{credentials}@"), hosts),
            None => (String::new(), rest),
        };
        let (hosts, path) = hosts.split_once('/').unwrap_or((hosts, ""));
        let urls = |credentials: &str| -> Vec<String> {
            hosts
                .split(',')
                .map(|host| format!("{node_scheme}{credentials}{}/", host.trim()))
                .collect()
        };
        if scheme.ends_with("+cluster://") {
            Topology::Cluster(urls(&credentials))
        } else {
            Topology::Sentinel {
                sentinels: urls(""),
                name: path.trim_end_matches('/').to_owned(),
            }
        }
    }
}

impl std::str::FromStr for RedisUrl {
    type Err = RedisUrlError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        if !Self::names_redis(value) {
            return Err(RedisUrlError::Scheme);
        }
        let url = Self(value.to_owned());
        let nodes = match url.topology() {
            Topology::One => vec![value.to_owned()],
            Topology::Cluster(nodes) => nodes,
            Topology::Sentinel { sentinels, name } => {
                if name.is_empty() || name.contains('/') {
                    return Err(RedisUrlError::Parse(
                        "a sentinel URL names the primary after its hosts (`/<name>`)".to_owned(),
                    ));
                }
                sentinels
            }
        };
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
        if let Some((scheme, rest)) = self
            .0
            .split_once("://")
            .filter(|(scheme, _)| scheme.contains('+'))
        {
            // A URL of many hosts is no URL to a parser: its password, the part of what stands
            // before the last `@` after the first `:`, is hidden by hand.
            return match rest.rsplit_once('@') {
                Some((credentials, hosts)) => {
                    let user = credentials.split(':').next().unwrap_or_default();
                    let hidden = if credentials.contains(':') {
                        ":***"
                    } else {
                        ""
                    };
                    write!(f, "{scheme}://{user}{hidden}@{hosts}")
                }
                None => write!(f, "{scheme}://{rest}"),
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
            url.topology(),
            Topology::Cluster(vec![
                "redis://broker:s3c@ret@10.0.0.1:7000/".to_owned(),
                "redis://broker:s3c@ret@10.0.0.2:7001/".to_owned()
            ])
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
        assert_eq!(
            tls.topology(),
            Topology::Cluster(vec!["rediss://h:1/".to_owned()])
        );
        let one: RedisUrl = "redis://h:1".parse().unwrap();
        assert_eq!(one.topology(), Topology::One);
        assert!(matches!(
            "redis+cluster://h:1,:2".parse::<RedisUrl>(),
            Err(RedisUrlError::Parse(_))
        ));
    }

    #[test]
    fn a_sentinel_url_names_its_sentinels_the_primary_and_its_credentials() {
        let url: RedisUrl = "redis+sentinel://app:p%40ss@s1:26379,s2:26379/leases"
            .parse()
            .unwrap();
        assert_eq!(
            url.topology(),
            Topology::Sentinel {
                sentinels: vec![
                    "redis://s1:26379/".to_owned(),
                    "redis://s2:26379/".to_owned()
                ],
                name: "leases".to_owned()
            }
        );
        assert_eq!(
            url.credentials(),
            Some(("app".to_owned(), Some("p@ss".to_owned())))
        );
        let shown = url.to_string();
        assert!(!shown.contains("p%40ss"), "{shown}");
        assert!(
            shown.starts_with("redis+sentinel://app:***@s1:26379"),
            "{shown}"
        );
        assert!(matches!(
            "redis+sentinel://s1:26379/".parse::<RedisUrl>(),
            Err(RedisUrlError::Parse(_))
        ));
        let bare: RedisUrl = "redis+sentinel://s1:1/m".parse().unwrap();
        assert_eq!(bare.credentials(), None);
    }
}
