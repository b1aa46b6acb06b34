//! Dialers: a byte stream to the echo server, directly or through an exit.
//!
//! [`http_connect`] opens an HTTP `CONNECT` tunnel with pre-emptive Basic auth (over TLS to the
//! proxy for `https://`, see [`proxy_tls`]); [`socks5`]
//! opens a SOCKS5 tunnel (no auth or RFC 1929 username/password) with `tokio-socks`. Both run
//! the TCP connect under [`Timeouts::connect`] and the proxy handshake under
//! [`Timeouts::tunnel`].

pub mod http_connect;
pub mod proxy_tls;
pub mod socks5;
pub mod socks5_udp;

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::error::{within, Phase, ProbeError};
use crate::{Exit, ProxyScheme};

/// A bidirectional byte stream: a TCP socket or a tunnel through an exit.
pub trait Tunnel: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Tunnel for T {}

/// Per-phase limits of one probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP connect to the exit (or to the echo server for the baseline).
    pub connect: Duration,
    /// The proxy handshake (CONNECT request and response, SOCKS5 negotiation).
    pub tunnel: Duration,
    /// The TLS handshake with the echo server.
    pub tls: Duration,
    /// Writing the request and reading the whole echo.
    pub response: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(5),
            tunnel: Duration::from_secs(10),
            tls: Duration::from_secs(10),
            response: Duration::from_secs(15),
        }
    }
}

/// Opens a stream to `host:port`: directly when `exit` is `None`, else through the exit.
///
/// # Errors
/// DNS, connect, timeout, proxy auth and proxy refusal errors, each with its class.
pub async fn dial(
    exit: Option<&Exit>,
    host: &str,
    port: u16,
    timeouts: &Timeouts,
) -> Result<Box<dyn Tunnel>, ProbeError> {
    let Some(exit) = exit else {
        return Ok(Box::new(connect_tcp(host, port, timeouts.connect).await?));
    };
    let proxy = &exit.proxy;
    let ProxyLeg { tcp, credentials } = connect_proxy(exit, timeouts).await?;
    let auth = credentials.auth();
    match proxy.scheme {
        ProxyScheme::Http => {
            let tunnel = within(
                Phase::Tunnel,
                timeouts.tunnel,
                http_connect::connect(tcp, host, port, auth),
            )
            .await?;
            Ok(Box::new(tunnel))
        }
        ProxyScheme::Socks5 | ProxyScheme::Socks5h => {
            let target = socks5_target(proxy.scheme, host, port, timeouts.connect).await?;
            let tunnel = within(
                Phase::Tunnel,
                timeouts.tunnel,
                socks5::connect(tcp, target, auth),
            )
            .await?;
            Ok(Box::new(tunnel))
        }
        ProxyScheme::Https => {
            let tunnel = within(Phase::Tunnel, timeouts.tunnel, async {
                let tls = proxy_tls::connect(tcp, &proxy.host, exit.proxy_ca.as_deref()).await?;
                http_connect::connect(tls, host, port, auth).await
            })
            .await?;
            Ok(Box::new(tunnel))
        }
    }
}

/// The first leg through an exit: TCP to its proxy, and the credentials for its handshake.
#[derive(Debug)]
pub struct ProxyLeg<'a> {
    /// The connection to the proxy.
    pub tcp: TcpStream,
    /// The exit's credentials, borrowed once.
    pub credentials: Credentials<'a>,
}

/// An exit's user name and password, if it has them.
#[derive(Debug)]
pub struct Credentials<'a>(Option<(String, &'a str)>);

impl Credentials<'_> {
    /// As the proxy handshakes take them.
    pub fn auth(&self) -> Option<(&str, &str)> {
        self.0.as_ref().map(|(user, pass)| (user.as_str(), *pass))
    }
}

/// Connects TCP to `exit`'s proxy under [`Timeouts::connect`] and borrows its credentials.
///
/// # Errors
/// DNS, refused, timeout or other I/O errors of the connect phase.
pub async fn connect_proxy<'a>(
    exit: &'a Exit,
    timeouts: &Timeouts,
) -> Result<ProxyLeg<'a>, ProbeError> {
    let tcp = connect_tcp(&exit.proxy.host, exit.proxy.port, timeouts.connect).await?;
    Ok(ProxyLeg {
        tcp,
        credentials: Credentials(exit.auth()),
    })
}

/// Where a SOCKS5 exit should lead for `host:port`: `socks5h` leaves the name to the exit,
/// `socks5` sends the auditor's address, resolved under `limit`.
///
/// # Errors
/// DNS errors or a connect-phase timeout (`socks5` only).
pub async fn socks5_target(
    scheme: ProxyScheme,
    host: &str,
    port: u16,
    limit: Duration,
) -> Result<socks5::Target, ProbeError> {
    Ok(if scheme == ProxyScheme::Socks5h {
        socks5::Target::Name(host.to_owned(), port)
    } else {
        socks5::Target::Addr(resolve(host, port, limit).await?)
    })
}

/// Resolves `host:port` to its first address, under `limit`.
///
/// # Errors
/// [`ProbeError::Dns`] or a connect-phase timeout.
pub async fn resolve(
    host: &str,
    port: u16,
    limit: Duration,
) -> Result<std::net::SocketAddr, ProbeError> {
    let lookup = async {
        tokio::net::lookup_host((host, port))
            .await
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| ProbeError::Dns {
                host: host.to_owned(),
            })
    };
    within(Phase::Connect, limit, lookup).await
}

/// Connects TCP to `host:port` (resolving names first, trying each address in turn), with
/// `TCP_NODELAY`, under `limit`.
///
/// # Errors
/// DNS, refused, timeout or other I/O errors of the connect phase.
pub async fn connect_tcp(host: &str, port: u16, limit: Duration) -> Result<TcpStream, ProbeError> {
    let connect = async {
        let addrs: Vec<_> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|_| ProbeError::Dns {
                host: host.to_owned(),
            })?
            .collect();
        let mut last = ProbeError::Dns {
            host: host.to_owned(),
        };
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(stream) => {
                    // Nagle would hold back the small CONNECT and HTTP/2 frames; best effort.
                    stream.set_nodelay(true).ok();
                    return Ok(stream);
                }
                Err(e) => last = ProbeError::io(Phase::Connect, &addr.to_string(), &e),
            }
        }
        Err(last)
    };
    within(Phase::Connect, limit, connect).await
}
