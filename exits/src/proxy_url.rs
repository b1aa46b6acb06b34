//! Proxy URLs: `http://`, `https://`, `socks5://`, `socks5h://`, with optional credentials.
//!
//! Parsed by hand rather than with a general URL parser because proxy passwords in the wild
//! contain `@`, `:` and `/`: the user information ends at the *last* `@`, the user name at the
//! *first* `:`, and both are percent-decoded (RFC 3986 section 3.2.1), so `p%40ss` and a raw
//! `p@ss` both mean `p@ss`. The password is held in a [`Secret`] from here on.

use std::fmt;

use percent_encoding::percent_decode_str;
use serde::Serialize;

use crate::secret::{Secret, REDACTED};

/// How the auditor talks to the exit.
///
/// Not `#[non_exhaustive]`, unlike this crate's other enums: a new scheme must fail to compile
/// in every crate that matches on one (the auditor's QUIC probe decides per scheme whether UDP
/// is carried), not fall into a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProxyScheme {
    /// HTTP proxy, `CONNECT` tunnel (RFC 9110 section 9.3.6).
    Http,
    /// HTTP proxy reached over TLS, then `CONNECT`.
    Https,
    /// SOCKS5 (RFC 1928); the auditor resolves the target name itself.
    Socks5,
    /// SOCKS5 with the proxy resolving the target name (remote DNS).
    Socks5h,
}

impl ProxyScheme {
    /// The URL scheme.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
            Self::Socks5 => "socks5",
            Self::Socks5h => "socks5h",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
            Self::Socks5 | Self::Socks5h => 1080,
        }
    }
}

/// A parsed proxy URL. `Debug` and `Display` print the redacted form.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrl {
    /// The scheme.
    pub scheme: ProxyScheme,
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// User name, percent-decoded.
    pub username: Option<String>,
    /// Password, percent-decoded.
    pub password: Option<Secret>,
}

/// Why a proxy URL was rejected. Never quotes the URL (it may hold a password).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// No `scheme://`.
    #[error("missing scheme (expected http://, https://, socks5:// or socks5h://)")]
    MissingScheme,
    /// A scheme that is not a proxy scheme.
    #[error("unsupported scheme (expected http, https, socks5 or socks5h)")]
    UnsupportedScheme,
    /// Empty host.
    #[error("missing host")]
    MissingHost,
    /// A port that is not a number in 1–65535.
    #[error("invalid port")]
    InvalidPort,
    /// A `[` without its `]`, or garbage after it.
    #[error("invalid IPv6 literal")]
    InvalidIpv6,
    /// A path, query or fragment after the authority.
    #[error("a proxy URL has no path, query or fragment")]
    TrailingPath,
    /// Percent-decoding produced invalid UTF-8.
    #[error("credentials are not valid UTF-8 after percent-decoding")]
    InvalidEncoding,
    /// A control character or space in the host.
    #[error("invalid character in host")]
    InvalidHost,
}

impl ProxyUrl {
    /// Parses a proxy URL.
    ///
    /// # Errors
    /// A [`UrlError`] naming what is wrong; the error never contains the URL itself.
    pub fn parse(input: &str) -> Result<Self, UrlError> {
        let input = input.trim();
        let (scheme, rest) = input.split_once("://").ok_or(UrlError::MissingScheme)?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => ProxyScheme::Http,
            "https" => ProxyScheme::Https,
            "socks5" => ProxyScheme::Socks5,
            "socks5h" => ProxyScheme::Socks5h,
            _ => return Err(UrlError::UnsupportedScheme),
        };
        // The user information ends at the last '@': passwords may contain raw '@' and '/'.
        let (userinfo, hostport) = match rest.rfind('@') {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        let hostport = hostport.strip_suffix('/').unwrap_or(hostport);
        if hostport.contains(['/', '?', '#']) {
            return Err(UrlError::TrailingPath);
        }
        let (host, port) = split_host_port(hostport)?;
        let port = match port {
            Some(port) => port
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or(UrlError::InvalidPort)?,
            None => scheme.default_port(),
        };
        if host.is_empty() {
            return Err(UrlError::MissingHost);
        }
        if host.chars().any(|c| c.is_control() || c == ' ' || c == '@') {
            return Err(UrlError::InvalidHost);
        }
        let (username, password) = match userinfo {
            None => (None, None),
            Some(info) => {
                let (user, pass) = match info.split_once(':') {
                    Some((user, pass)) => (user, Some(pass)),
                    None => (info, None),
                };
                let user = decode(user)?;
                let pass = pass.map(decode).transpose()?.map(Secret::new);
                (Some(user), pass)
            }
        };
        Ok(Self {
            scheme,
            host: host.to_owned(),
            port,
            username,
            password,
        })
    }

    /// `host:port`, with brackets around an IPv6 host.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The URL with the password replaced by `***`; safe to log, store and export.
    pub fn redacted(&self) -> String {
        let password = self.password.as_ref().map(|_| REDACTED);
        self.render(self.username.as_deref(), password)
    }

    /// The whole URL, credentials included, with `username` in place of the parsed one (a
    /// gateway's user name with its session id substituted): for the one holder it is meant
    /// for, so it comes back as a [`Secret`].
    pub fn with_user(&self, username: Option<&str>) -> Secret {
        let password = self.password.as_ref().map(Secret::expose);
        Secret::new(self.render(username, password))
    }

    fn render(&self, username: Option<&str>, password: Option<&str>) -> String {
        let mut out = format!("{}://", self.scheme.as_str());
        if let Some(user) = username {
            out.push_str(&percent_encoding::utf8_percent_encode(user, USERINFO).to_string());
            if let Some(password) = password {
                out.push(':');
                out.push_str(
                    &percent_encoding::utf8_percent_encode(password, USERINFO).to_string(),
                );
            }
            out.push('@');
        }
        out.push_str(&self.authority());
        out
    }
}

/// Characters escaped when a user name is printed back into a URL.
const USERINFO: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'@')
    .add(b':')
    .add(b'/')
    .add(b'%');

fn decode(part: &str) -> Result<String, UrlError> {
    percent_decode_str(part)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| UrlError::InvalidEncoding)
}

fn split_host_port(hostport: &str) -> Result<(&str, Option<&str>), UrlError> {
    if let Some(rest) = hostport.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or(UrlError::InvalidIpv6)?;
        return match after {
            "" => Ok((host, None)),
            _ => after
                .strip_prefix(':')
                .map(|port| (host, Some(port)))
                .ok_or(UrlError::InvalidIpv6),
        };
    }
    Ok(match hostport.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (hostport, None),
    })
}

impl fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Display for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Serialize for ProxyUrl {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.redacted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &str) -> ProxyUrl {
        match ProxyUrl::parse(input) {
            Ok(url) => url,
            Err(error) => panic!("{input}: {error}"),
        }
    }

    #[test]
    fn schemes_and_default_ports() {
        for (input, scheme, port) in [
            ("http://127.0.0.1:13128", ProxyScheme::Http, 13128),
            ("HTTP://proxy.example", ProxyScheme::Http, 80),
            ("https://proxy.example", ProxyScheme::Https, 443),
            ("socks5://127.0.0.1", ProxyScheme::Socks5, 1080),
            ("socks5h://127.0.0.1:11080/", ProxyScheme::Socks5h, 11080),
        ] {
            let url = parse(input);
            assert_eq!((url.scheme, url.port), (scheme, port), "{input}");
            assert_eq!(url.username, None);
        }
    }

    #[test]
    fn percent_decoded_credentials() {
        let url = parse("http://us%3Aer:p%40ss%3Aw%2Frd@127.0.0.1:13128");
        assert_eq!(url.username.as_deref(), Some("us:er"));
        assert_eq!(url.password.as_ref().map(Secret::expose), Some("p@ss:w/rd"));
    }

    #[test]
    fn raw_at_colon_slash_in_password() {
        let url = parse("socks5h://zoo:p@ss:w/rd@[::1]:1080");
        assert_eq!(url.username.as_deref(), Some("zoo"));
        assert_eq!(url.password.as_ref().map(Secret::expose), Some("p@ss:w/rd"));
        assert_eq!(url.host, "::1");
        assert_eq!(url.authority(), "[::1]:1080");
    }

    /// A lease's URL parses back to the same proxy, its credentials intact.
    #[test]
    fn the_whole_url_round_trips() {
        let url = parse("http://zoo-{session}:p%40ss%3Aw%2Frd@[::1]:13128");
        let whole = url.with_user(Some("zoo-s1:x"));
        let back = parse(whole.expose());
        assert_eq!(back.username.as_deref(), Some("zoo-s1:x"));
        assert_eq!(
            back.password.as_ref().map(Secret::expose),
            Some("p@ss:w/rd")
        );
        assert_eq!(back.authority(), "[::1]:13128");
        assert!(
            !format!("{whole:?}").contains("p@ss"),
            "a Secret never prints"
        );
    }

    #[test]
    fn redacted_form_hides_only_the_password() {
        let url = parse("http://zoo:zoopass@127.0.0.1:13128");
        assert_eq!(url.redacted(), "http://zoo:***@127.0.0.1:13128");
        assert_eq!(format!("{url:?}"), "http://zoo:***@127.0.0.1:13128");
        assert_eq!(format!("{url}"), "http://zoo:***@127.0.0.1:13128");
        assert!(!serde_json::to_string(&url)
            .unwrap_or_default()
            .contains("zoopass"));
        let user_only = parse("http://u%40x@h:1");
        assert_eq!(user_only.redacted(), "http://u%40x@h:1");
    }

    #[test]
    fn hostile_inputs_are_typed_errors() {
        for (input, error) in [
            ("127.0.0.1:3128", UrlError::MissingScheme),
            ("ftp://h:1", UrlError::UnsupportedScheme),
            ("http://:1", UrlError::MissingHost),
            ("http://u:p@", UrlError::MissingHost),
            ("http://h:0", UrlError::InvalidPort),
            ("http://h:99999", UrlError::InvalidPort),
            ("http://h:x", UrlError::InvalidPort),
            ("http://[::1", UrlError::InvalidIpv6),
            ("http://[::1]x", UrlError::InvalidIpv6),
            ("http://h:1/path", UrlError::TrailingPath),
            ("http://u:%ff%fe@h:1", UrlError::InvalidEncoding),
            ("http://h\n:1", UrlError::InvalidHost),
        ] {
            assert_eq!(ProxyUrl::parse(input).err(), Some(error), "{input:?}");
        }
    }

    #[test]
    fn errors_never_quote_the_password() {
        for input in [
            "ftp://u:s3cret@h:1",
            "http://u:s3cret@h:99999",
            "http://u:s3cret@h:1/x",
        ] {
            let error = ProxyUrl::parse(input)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(!error.is_empty() && !error.contains("s3cret"), "{error}");
        }
    }
}
