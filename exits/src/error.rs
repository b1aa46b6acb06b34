//! Probe errors and their classes.
//!
//! Every failure of a probe is one [`ProbeError`]; its [`ErrorClass`] is what labels count
//! (`dns`, `connect_refused`, `timeout`, `proxy_auth`, `proxy_refused`, `tls`, `bad_echo`, `io`).
//! No variant carries a credential: errors are built from host names, ports, status codes and
//! reply codes only, so they can be logged and stored as they are.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The phase of a probe a timeout hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Phase {
    /// TCP connect to the exit (or, for the baseline, to the echo server).
    Connect,
    /// The proxy handshake: HTTP CONNECT request and response, or SOCKS5 negotiation.
    Tunnel,
    /// The TLS handshake with the echo server through the tunnel.
    Tls,
    /// Sending the request and reading the echo response.
    Response,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Connect => "connect",
            Self::Tunnel => "tunnel",
            Self::Tls => "tls",
            Self::Response => "response",
        })
    }
}

/// The class of a probe failure, as counted in labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorClass {
    /// A host name did not resolve.
    Dns,
    /// The TCP connection was refused.
    ConnectRefused,
    /// A phase did not finish within its limit.
    Timeout,
    /// The proxy rejected the credentials (HTTP 407, SOCKS5 auth failure).
    ProxyAuth,
    /// The proxy refused the tunnel (CONNECT non-2xx, SOCKS5 reply code ≠ 0).
    ProxyRefused,
    /// The TLS handshake with the echo server failed.
    Tls,
    /// The echo server's answer was not a valid echo for this probe.
    BadEcho,
    /// Any other I/O failure (reset, unexpected close).
    Io,
}

impl ErrorClass {
    /// The class name used in labels and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dns => "dns",
            Self::ConnectRefused => "connect_refused",
            Self::Timeout => "timeout",
            Self::ProxyAuth => "proxy_auth",
            Self::ProxyRefused => "proxy_refused",
            Self::Tls => "tls",
            Self::BadEcho => "bad_echo",
            Self::Io => "io",
        }
    }

    /// Whether a retry (with backoff) may succeed: timeouts, resets and refusals of the origin
    /// are transient; credentials, refused tunnels, TLS and bad echoes are not.
    pub fn is_transient(self) -> bool {
        matches!(self, Self::Timeout | Self::Io | Self::Dns)
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a probe failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// A host name did not resolve.
    #[error("cannot resolve {host}")]
    Dns {
        /// The name that did not resolve.
        host: String,
    },
    /// The TCP connection to `addr` was refused.
    #[error("connection to {addr} refused")]
    ConnectRefused {
        /// `host:port` that refused.
        addr: String,
    },
    /// A phase took longer than its limit.
    #[error("{phase} timed out after {limit:?}")]
    Timeout {
        /// The phase that timed out.
        phase: Phase,
        /// The configured limit.
        limit: Duration,
    },
    /// The HTTP proxy answered 407, or the SOCKS5 proxy rejected the credentials.
    #[error("proxy rejected the credentials ({detail})")]
    ProxyAuth {
        /// `http 407`, `socks5 auth status N`, `socks5 no acceptable method`.
        detail: String,
    },
    /// The HTTP proxy answered CONNECT with a non-2xx status.
    #[error("proxy refused CONNECT with HTTP {status}")]
    ConnectStatus {
        /// The status code of the CONNECT response.
        status: u16,
    },
    /// The SOCKS5 proxy answered with a non-zero reply code (RFC 1928 section 6).
    #[error("SOCKS5 proxy refused the connection: {reason} (reply {code})")]
    SocksReply {
        /// The reply code, 1–8 per RFC 1928, 255 when the library did not expose it.
        code: u8,
        /// The meaning of the code.
        reason: &'static str,
    },
    /// The proxy spoke something that is not the proxy protocol.
    #[error("malformed proxy response: {0}")]
    ProxyProtocol(&'static str),
    /// The TLS handshake failed.
    #[error("TLS handshake failed: {0}")]
    Tls(String),
    /// The TLS handshake with an `https://` proxy failed.
    #[error("TLS to the proxy failed: {0}")]
    ProxyTls(String),
    /// The echo answer was malformed, had the wrong token, or a non-200 status.
    #[error("bad echo response: {0}")]
    BadEcho(String),
    /// The HTTP/2 peer broke the protocol or reset the stream.
    #[error("HTTP/2 error: {0}")]
    H2(&'static str),
    /// Any other I/O error in a phase.
    #[error("I/O error during {phase}: {kind:?}")]
    Io {
        /// The phase.
        phase: Phase,
        /// The kind of the I/O error (the message may quote peer bytes, so only the kind is kept).
        kind: std::io::ErrorKind,
    },
    /// A browser's page load failed with a network error: Chromium's `net_error` (negative, as
    /// in `net_error_list.h`).
    #[error("chromium net error {0}")]
    Browser(i32),
    /// The exit cannot be dialed as configured.
    #[error("unsupported exit: {0}")]
    Unsupported(&'static str),
}

impl ProbeError {
    /// The class counted in labels.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Dns { .. } => ErrorClass::Dns,
            Self::ConnectRefused { .. } => ErrorClass::ConnectRefused,
            Self::Timeout { .. } => ErrorClass::Timeout,
            Self::ProxyAuth { .. } => ErrorClass::ProxyAuth,
            Self::ConnectStatus { .. } | Self::SocksReply { .. } | Self::ProxyProtocol(_) => {
                ErrorClass::ProxyRefused
            }
            Self::Tls(_) | Self::ProxyTls(_) => ErrorClass::Tls,
            Self::BadEcho(_) | Self::H2(_) => ErrorClass::BadEcho,
            Self::Io { .. } | Self::Unsupported(_) => ErrorClass::Io,
            Self::Browser(code) => browser_class(*code),
        }
    }

    /// The phase, for timeouts.
    pub fn phase(&self) -> Option<Phase> {
        match self {
            Self::Timeout { phase, .. } | Self::Io { phase, .. } => Some(*phase),
            _ => None,
        }
    }

    /// Maps an I/O error of `phase` to a probe error (refused connects get their own class).
    pub fn io(phase: Phase, addr: &str, error: &std::io::Error) -> Self {
        match error.kind() {
            std::io::ErrorKind::ConnectionRefused => Self::ConnectRefused {
                addr: addr.to_owned(),
            },
            std::io::ErrorKind::TimedOut => Self::Timeout {
                phase,
                limit: Duration::ZERO,
            },
            kind => Self::Io { phase, kind },
        }
    }
}

/// The class of Chromium's `net_error` `code`, by the ranges of `net_error_list.h`: 100–199
/// connection errors (a refusal has its own class), 200–299 certificate errors, 800–899 and
/// `NAME_NOT_RESOLVED` (105) name resolution; `TIMED_OUT` (7) and `CONNECTION_TIMED_OUT` (118)
/// time-outs; `EMPTY_RESPONSE` (324) a connection closed before any answer. Any other error
/// (HTTP, cache, a protocol error of the answer) is the echo's answer gone wrong.
fn browser_class(code: i32) -> ErrorClass {
    match code {
        -7 | -118 => ErrorClass::Timeout,
        -102 => ErrorClass::ConnectRefused,
        -105 | -899..=-800 => ErrorClass::Dns,
        -299..=-200 => ErrorClass::Tls,
        -324 | -199..=-100 => ErrorClass::Io,
        _ => ErrorClass::BadEcho,
    }
}

/// Runs `future` under `limit`, mapping expiry to [`ProbeError::Timeout`] for `phase`.
///
/// # Errors
/// The future's own error, or a timeout.
pub async fn within<T>(
    phase: Phase,
    limit: Duration,
    future: impl std::future::Future<Output = Result<T, ProbeError>>,
) -> Result<T, ProbeError> {
    match tokio::time::timeout(limit, future).await {
        Ok(result) => result,
        Err(_) => Err(ProbeError::Timeout { phase, limit }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_of_variants() {
        let cases = [
            (ProbeError::Dns { host: "x".into() }, "dns"),
            (
                ProbeError::ConnectRefused { addr: "a".into() },
                "connect_refused",
            ),
            (
                ProbeError::Timeout {
                    phase: Phase::Tunnel,
                    limit: Duration::from_secs(1),
                },
                "timeout",
            ),
            (
                ProbeError::ProxyAuth {
                    detail: "http 407".into(),
                },
                "proxy_auth",
            ),
            (ProbeError::ConnectStatus { status: 403 }, "proxy_refused"),
            (
                ProbeError::SocksReply {
                    code: 2,
                    reason: "not allowed",
                },
                "proxy_refused",
            ),
            (ProbeError::Tls("x".into()), "tls"),
            (ProbeError::BadEcho("x".into()), "bad_echo"),
            // Chromium's codes, named as in net_error_list.h.
            (ProbeError::Browser(-100), "io"), // CONNECTION_CLOSED
            (ProbeError::Browser(-324), "io"), // EMPTY_RESPONSE
            (ProbeError::Browser(-118), "timeout"), // CONNECTION_TIMED_OUT
            (ProbeError::Browser(-102), "connect_refused"), // CONNECTION_REFUSED
            (ProbeError::Browser(-105), "dns"), // NAME_NOT_RESOLVED
            (ProbeError::Browser(-202), "tls"), // CERT_AUTHORITY_INVALID
            (ProbeError::Browser(-337), "bad_echo"), // HTTP2_PROTOCOL_ERROR
        ];
        for (error, class) in cases {
            assert_eq!(error.class().as_str(), class, "{error}");
        }
    }

    #[test]
    fn only_transient_classes_retry() {
        assert!(ErrorClass::Timeout.is_transient());
        assert!(!ErrorClass::ProxyAuth.is_transient());
        assert!(!ErrorClass::Tls.is_transient());
        assert!(!ErrorClass::ConnectRefused.is_transient());
    }
}
