//! The HTTP/1.1 proxy request a client opens with (RFC 9110 §9.3.6 `CONNECT`, RFC 9112 §3.2.2
//! absolute-form): where it goes and the credentials it carries, read from the head alone.

use base64::Engine as _;

/// The longest request head read, in bytes: a head that has not ended by then is refused.
pub const MAX_HEAD: usize = 16 * 1024;

/// Header fields read at most.
const MAX_FIELDS: usize = 64;

/// A host and port, as the client named them (never resolved here: the exit resolves names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// A host name or an IP address (IPv6 without brackets).
    pub host: String,
    /// The port.
    pub port: u16,
}

impl Target {
    /// `host:port` as an authority (IPv6 in brackets).
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// What the request asks of the proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ask {
    /// `CONNECT host:port`: a tunnel.
    Connect,
    /// An absolute-form request for a plain-http origin: sent on through a tunnel to it, as
    /// `forward` (origin-form, the proxy's own fields removed, `Connection: close`).
    Forward {
        /// The request head to send to the origin.
        forward: Vec<u8>,
    },
}

/// A proxy request head, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// What is asked.
    pub ask: Ask,
    /// Where to.
    pub target: Target,
    /// `Proxy-Authorization: Basic` user name and password, if sent.
    pub credentials: Option<(String, String)>,
    /// The head's length: bytes after it belong to the tunnel.
    pub len: usize,
}

/// Why a head was refused (answered `400`, or `431` for its size).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadHead {
    /// Not HTTP/1.x.
    #[error("not an HTTP/1.1 request: {0}")]
    Syntax(String),
    /// Too many header fields, or a head longer than [`MAX_HEAD`].
    #[error("the request head is too large")]
    TooLarge,
    /// A `CONNECT` target that is not `host:port`, or a request that is neither `CONNECT` nor
    /// absolute-form `http://`.
    #[error("{0}")]
    Target(String),
    /// A `Proxy-Authorization` that is not `Basic` user:password.
    #[error("Proxy-Authorization must be Basic user:password")]
    Credentials,
}

/// The head at the start of `bytes`: `None` while it has not ended.
///
/// # Errors
/// A malformed or oversized head.
pub fn parse(bytes: &[u8]) -> Result<Option<Head>, BadHead> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut request = httparse::Request::new(&mut fields);
    let len = match request.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if bytes.len() >= MAX_HEAD => return Err(BadHead::TooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(BadHead::TooLarge),
        Err(error) => return Err(BadHead::Syntax(error.to_string())),
    };
    if len > MAX_HEAD {
        return Err(BadHead::TooLarge);
    }
    let method = request.method.unwrap_or_default();
    let path = request.path.unwrap_or_default();
    let mut credentials = None;
    for field in request.headers.iter() {
        if field.name.eq_ignore_ascii_case("proxy-authorization") {
            credentials = Some(basic(field.value).ok_or(BadHead::Credentials)?);
        }
    }
    let (ask, target) = if method == "CONNECT" {
        (Ask::Connect, authority(path, None)?)
    } else {
        let rest = path
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
            .map(|_| &path[7..])
            .ok_or_else(|| {
                BadHead::Target(format!(
                    "{method} {}: a proxy takes CONNECT host:port or an absolute http:// URL",
                    shown(path)
                ))
            })?;
        let (host_port, origin_path) = rest.find('/').map_or((rest, "/"), |i| rest.split_at(i));
        let target = authority(host_port, Some(80))?;
        let forward = forwarded(method, origin_path, request.version, request.headers);
        (Ask::Forward { forward }, target)
    };
    Ok(Some(Head {
        ask,
        target,
        credentials,
        len,
    }))
}

/// `host:port` (or `[v6]:port`); `default` when the port may be left out.
fn authority(text: &str, default: Option<u16>) -> Result<Target, BadHead> {
    let bad = || BadHead::Target(format!("{} is not host:port", shown(text)));
    if text.contains('@') {
        return Err(bad());
    }
    let (host, port) = if let Some(v6) = text.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or_else(bad)?;
        (host, after.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match (port, default) {
        (Some(port), _) => port
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0 && port.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(bad)?,
        (None, Some(default)) => default,
        (None, None) => return Err(bad()),
    };
    let fits = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':');
    if host.is_empty() || host.len() > 253 || !host.bytes().all(fits) {
        return Err(bad());
    }
    Ok(Target {
        host: host.to_ascii_lowercase(),
        port,
    })
}

/// The user name and password of a `Basic` credential (RFC 7617).
fn basic(value: &[u8]) -> Option<(String, String)> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// The request as the origin gets it: origin-form, without the fields meant for the proxy or
/// one hop (RFC 9110 §7.6.1), and `Connection: close`, so that the client's next request on
/// the connection, which may be for another origin, comes to the proxy as a new one.
fn forwarded(
    method: &str,
    path: &str,
    version: Option<u8>,
    fields: &[httparse::Header<'_>],
) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.{}\r\n", version.unwrap_or(1)).into_bytes();
    let hop = [
        "proxy-authorization",
        "proxy-connection",
        "connection",
        "keep-alive",
        "te",
        "upgrade",
    ];
    for field in fields {
        if hop.iter().any(|h| field.name.eq_ignore_ascii_case(h)) {
            continue;
        }
        head.extend_from_slice(field.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(field.value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head
}

/// At most 60 characters of what the client sent, for an error.
fn shown(text: &str) -> String {
    text.chars().take(60).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic_field(user: &str, password: &str) -> String {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Proxy-Authorization: Basic {encoded}\r\n")
    }

    #[test]
    fn connect_with_credentials_and_early_bytes() {
        let text = format!(
            "CONNECT Example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n{}\r\n\x16\x03\x01",
            basic_field("class-identity-task-t1", "tok:en")
        );
        let head = parse(text.as_bytes()).unwrap().unwrap();
        assert_eq!(head.ask, Ask::Connect);
        assert_eq!(head.target.authority(), "example.org:443");
        assert_eq!(
            head.credentials,
            Some(("class-identity-task-t1".into(), "tok:en".into()))
        );
        assert_eq!(&text.as_bytes()[head.len..], b"\x16\x03\x01");
        let v6 = parse(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((v6.target.host.as_str(), v6.target.port), ("::1", 8443));
        assert_eq!(v6.target.authority(), "[::1]:8443");
    }

    #[test]
    fn an_unfinished_head_waits_and_a_huge_one_is_refused() {
        assert_eq!(parse(b"CONNECT a:1 HTTP/1.1\r\nHost: a"), Ok(None));
        let huge = format!("CONNECT a:1 HTTP/1.1\r\nX: {}", "a".repeat(MAX_HEAD));
        assert_eq!(parse(huge.as_bytes()), Err(BadHead::TooLarge));
        let many: String = (0..=MAX_FIELDS).map(|i| format!("X{i}: 1\r\n")).collect();
        let flood = format!("CONNECT a:1 HTTP/1.1\r\n{many}\r\n");
        assert_eq!(parse(flood.as_bytes()), Err(BadHead::TooLarge));
    }

    #[test]
    fn absolute_form_is_forwarded_in_origin_form() {
        let text = format!(
            "GET http://Example.org:8080/a/b?c=1 HTTP/1.1\r\nHost: example.org:8080\r\n\
             Proxy-Connection: keep-alive\r\n{}User-Agent: t\r\n\r\n",
            basic_field("class-stateless", "secret-token")
        );
        let head = parse(text.as_bytes()).unwrap().unwrap();
        assert_eq!(head.target.authority(), "example.org:8080");
        let Ask::Forward { forward } = head.ask else {
            panic!("not forwarded");
        };
        let forward = String::from_utf8(forward).unwrap();
        assert_eq!(
            forward,
            "GET /a/b?c=1 HTTP/1.1\r\nHost: example.org:8080\r\nUser-Agent: t\r\n\
             Connection: close\r\n\r\n"
        );
        assert!(!forward.contains("secret-token"));
        let bare = parse(b"GET http://example.org HTTP/1.1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(bare.target.authority(), "example.org:80");
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        for (text, says) in [
            ("GET /index.html HTTP/1.1\r\n\r\n", "absolute http:// URL"),
            ("GET https://a/ HTTP/1.1\r\n\r\n", "absolute http:// URL"),
            ("CONNECT example.org HTTP/1.1\r\n\r\n", "is not host:port"),
            ("CONNECT example.org:0 HTTP/1.1\r\n\r\n", "is not host:port"),
            (
                "CONNECT example.org:99999 HTTP/1.1\r\n\r\n",
                "is not host:port",
            ),
            (
                "CONNECT user@example.org:443 HTTP/1.1\r\n\r\n",
                "is not host:port",
            ),
            (
                "CONNECT exa mple:443 HTTP/1.1\r\n\r\n",
                "not an HTTP/1.1 request",
            ),
            ("\x05\x01\x02", "not an HTTP/1.1 request"),
            (
                "CONNECT a:1 HTTP/1.1\r\nProxy-Authorization: Bearer x\r\n\r\n",
                "must be Basic",
            ),
            (
                "CONNECT a:1 HTTP/1.1\r\nProxy-Authorization: Basic !!!\r\n\r\n",
                "must be Basic",
            ),
        ] {
            let error = parse(text.as_bytes()).expect_err(text).to_string();
            assert!(error.contains(says), "{text:?}: {error}");
        }
    }
}
