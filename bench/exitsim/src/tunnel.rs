//! The tunnel itself: resolve the target (loopback only), connect, and relay bytes both ways
//! until both sides are done.
//!
//! A simulator that forwarded anywhere would be an open proxy; this one refuses every target
//! that does not resolve to a loopback address.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::tally::Open;

/// Longest wait for the target's TCP handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a tunnel could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum TunnelError {
    /// The target resolves to no loopback address.
    #[error("target is not on loopback")]
    NotLoopback,
    /// The target name did not resolve.
    #[error("target does not resolve")]
    Unresolved,
    /// No loopback address of the target accepted the connection in time.
    #[error("target refused or timed out")]
    Unreachable,
}

/// Connects to the first loopback address of `host:port` that answers.
///
/// # Errors
/// [`TunnelError`] when the name does not resolve, resolves off loopback, or nobody answers.
pub async fn connect(host: &str, port: u16) -> Result<TcpStream, TunnelError> {
    let addrs: Vec<SocketAddr> = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|_| TunnelError::Unresolved)?
            .collect(),
    };
    let loopback: Vec<SocketAddr> = addrs.into_iter().filter(|a| a.ip().is_loopback()).collect();
    if loopback.is_empty() {
        return Err(TunnelError::NotLoopback);
    }
    for addr in loopback {
        if let Ok(Ok(stream)) =
            tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await
        {
            let _ = stream.set_nodelay(true);
            return Ok(stream);
        }
    }
    Err(TunnelError::Unreachable)
}

/// Relays between `client` and `upstream` (after writing `early`, bytes the client sent behind
/// its request) until both directions ended. The exit counts the tunnel as open until its
/// client's side ended: a holder that closed is gone, even while the target is still closing
/// its own side (under load, a TLS server can take long to notice).
pub async fn relay(client: TcpStream, mut upstream: TcpStream, early: &[u8], open: Open<'_>) {
    if !early.is_empty() && upstream.write_all(early).await.is_err() {
        return;
    }
    let (mut client_read, mut client_write) = client.into_split();
    let (mut upstream_read, mut upstream_write) = upstream.into_split();
    let up = async {
        let _ = tokio::io::copy(&mut client_read, &mut upstream_write).await;
        drop(open);
        let _ = upstream_write.shutdown().await;
    };
    let down = async {
        let _ = tokio::io::copy(&mut upstream_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(up, down);
}
