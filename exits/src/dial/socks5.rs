//! SOCKS5 tunnels (RFC 1928) with no auth or username/password (RFC 1929), via `tokio-socks`.
//!
//! `socks5h` sends the target name to the proxy (ATYP 0x03, remote DNS); `socks5` sends an
//! address the auditor resolved. Reply codes (RFC 1928 section 6) become
//! [`ProbeError::SocksReply`]; authentication failures become [`ProbeError::ProxyAuth`].

use std::net::SocketAddr;

use tokio::net::TcpStream;
use tokio_socks::tcp::Socks5Stream;

use crate::error::{Phase, ProbeError};

/// Where the tunnel should lead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A name the proxy resolves (`socks5h`).
    Name(String, u16),
    /// An address resolved by the auditor (`socks5`).
    Addr(SocketAddr),
}

/// Negotiates a SOCKS5 `CONNECT` to `target` on `tcp`.
///
/// # Errors
/// Auth failures, reply codes, protocol violations and I/O errors of the tunnel phase.
pub async fn connect(
    tcp: TcpStream,
    target: Target,
    auth: Option<(&str, &str)>,
) -> Result<Socks5Stream<TcpStream>, ProbeError> {
    let result = match (&target, auth) {
        (Target::Name(host, port), None) => {
            Socks5Stream::connect_with_socket(tcp, (host.as_str(), *port)).await
        }
        (Target::Name(host, port), Some((user, pass))) => {
            Socks5Stream::connect_with_password_and_socket(tcp, (host.as_str(), *port), user, pass)
                .await
        }
        (Target::Addr(addr), None) => Socks5Stream::connect_with_socket(tcp, *addr).await,
        (Target::Addr(addr), Some((user, pass))) => {
            Socks5Stream::connect_with_password_and_socket(tcp, *addr, user, pass).await
        }
    };
    result.map_err(map_error)
}

/// Maps a `tokio-socks` error to a probe error. Never includes credentials.
fn map_error(error: tokio_socks::Error) -> ProbeError {
    use tokio_socks::Error as E;
    let reply = |code: u8, reason: &'static str| ProbeError::SocksReply { code, reason };
    match error {
        E::Io(e) => ProbeError::io(Phase::Tunnel, "socks5 proxy", &e),
        E::NoAcceptableAuthMethods | E::AuthorizationRequired => ProbeError::ProxyAuth {
            detail: "socks5 no acceptable authentication method".to_owned(),
        },
        E::PasswordAuthFailure(status) => ProbeError::ProxyAuth {
            detail: format!("socks5 auth status {status}"),
        },
        E::GeneralSocksServerFailure => reply(1, "general SOCKS server failure"),
        E::ConnectionNotAllowedByRuleset => reply(2, "connection not allowed by ruleset"),
        E::NetworkUnreachable => reply(3, "network unreachable"),
        E::HostUnreachable => reply(4, "host unreachable"),
        E::ConnectionRefused => reply(5, "connection refused"),
        E::TtlExpired => reply(6, "TTL expired"),
        E::CommandNotSupported => reply(7, "command not supported"),
        E::AddressTypeNotSupported => reply(8, "address type not supported"),
        E::UnknownError => reply(0xff, "unassigned reply code"),
        E::InvalidAuthValues(_) => {
            ProbeError::Unsupported("SOCKS5 user name and password must be 1–255 bytes")
        }
        E::InvalidTargetAddress(_) => ProbeError::Unsupported("invalid SOCKS5 target address"),
        _ => ProbeError::ProxyProtocol("malformed SOCKS5 reply"),
    }
}
