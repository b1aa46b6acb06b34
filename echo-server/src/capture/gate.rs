//! The gate every new connection passes before any byte is read: admission by its source (rate
//! limit and penalty box, `admission.rs`) and the limits on open connections (total and per IP,
//! `limiter.rs`). A refused connection is reset, not closed politely, so it leaves no TIME_WAIT
//! behind; one from a source in the penalty box is first held for the handshake deadline (a
//! tarpit).

use std::net::IpAddr;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::time::Instant;

use super::admission::Denied;
use super::limiter::{Permit, Refused};
use super::shared::{stopping, Shared};

/// What admission decided for a new connection.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Serve it, holding its place under the open-connection limits.
    Serve(Permit),
    /// Its source is in the penalty box: hold it, then reset it ([`tarpit`]).
    Hold(Permit),
    /// A limit refused it (counted): reset it at once.
    Refuse,
}

/// Admits a new connection from `ip` (the TCP peer, or the client a trusted PROXY header
/// names), or says why not; every refusal is counted.
pub(crate) fn admit(shared: &Shared, ip: IpAddr) -> Verdict {
    let admitted = shared.admission.admit(ip, Instant::now());
    if admitted == Err(Denied::Rate) {
        shared.metrics.reject_rate();
        return Verdict::Refuse;
    }
    let permit = match shared.limiter.admit(ip) {
        Ok(permit) => permit,
        Err(refused) => {
            match (admitted, refused) {
                (Err(_), _) => shared.metrics.reject_penalty(),
                (Ok(()), Refused::Total) => shared.metrics.reject_max_connections(),
                (Ok(()), Refused::PerIp) => shared.metrics.reject_per_ip(),
            }
            return Verdict::Refuse;
        }
    };
    if admitted.is_err() {
        shared.metrics.reject_penalty();
        return Verdict::Hold(permit);
    }
    Verdict::Serve(permit)
}

/// Holds a connection from a source in the penalty box without reading from it, then resets
/// it (a tarpit): an attacker that reconnects the moment it is refused waits out the hold
/// instead of making the server accept and reset thousands of connections a second. The held
/// connection keeps its place under the open-connection limits, so a source gets at most
/// `--per-ip-connections` held at once and is reset at once beyond that.
pub(crate) async fn tarpit(shared: Arc<Shared>, tcp: TcpStream, permit: Permit) {
    let mut shutdown = shared.shutdown.clone();
    tokio::select! {
        () = tokio::time::sleep(shared.limits.handshake_timeout) => {}
        () = stopping(&mut shutdown) => {}
    }
    reset(tcp);
    drop(permit);
}

/// Drops a refused connection with a TCP reset (`SO_LINGER` 0): the peer learns at once, and
/// the server keeps no TIME_WAIT state for it.
pub(crate) fn reset(tcp: TcpStream) {
    let _ = tcp.set_zero_linger();
    drop(tcp);
}
