//! The accept loop: our own, not `axum::serve`, because each connection's handlers need that
//! connection's capture. Every accepted connection runs in its own task; a bad peer ends only
//! its own connection. Admission (rate limit and penalty box, `admission.rs`) and the limits on
//! open connections (total and per IP) are enforced here, before any byte is read; a refused
//! connection is reset, not closed politely, so it leaves no TIME_WAIT behind, and one from a
//! source in the penalty box is first held for the handshake deadline (a tarpit). A connection
//! relayed by a trusted load balancer is admitted the same way, by its client's address, once
//! its PROXY header is read.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::admission::Denied;
use super::connection;
use super::shared::Shared;

/// Pause after a failed `accept` (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Counts open connections, in total and per IP address.
#[derive(Debug)]
pub(crate) struct Limiter {
    max_total: usize,
    max_per_ip: usize,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// Why a connection was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `--max-connections` reached.
    Total,
    /// `--per-ip-connections` reached for this address.
    PerIp,
}

/// One admitted connection's place in the [`Limiter`]; released on drop.
#[derive(Debug)]
pub(crate) struct Permit {
    limiter: Arc<Limiter>,
    ip: IpAddr,
}

impl Limiter {
    pub(crate) fn new(max_total: usize, max_per_ip: usize) -> Self {
        Self {
            max_total,
            max_per_ip,
            open: Mutex::new(Open::default()),
        }
    }

    /// Admits a connection from `ip`, or says which limit refuses it.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Permit, Refused> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.total >= self.max_total {
            return Err(Refused::Total);
        }
        let from_ip = open.per_ip.entry(ip).or_insert(0);
        if *from_ip >= self.max_per_ip {
            return Err(Refused::PerIp);
        }
        *from_ip += 1;
        open.total += 1;
        Ok(Permit {
            limiter: Arc::clone(self),
            ip,
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut open = self
            .limiter
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(from_ip) = open.per_ip.get_mut(&self.ip) {
            *from_ip = from_ip.saturating_sub(1);
            if *from_ip == 0 {
                open.per_ip.remove(&self.ip);
            }
        }
    }
}

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

/// Accepts connections on `listener` until shutdown is signalled, spawning one task each.
///
/// A connection from a `--proxy-protocol-from` source is admitted only once its PROXY header
/// has named the client (`connection::serve_relayed`): the limits and the penalty box are the
/// client's, not the load balancer's, which carries everyone's connections.
pub(crate) async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let mut shutdown = shared.shutdown.clone();
    loop {
        if *shutdown.borrow() {
            break;
        }
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => break,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        if shared.relays_proxy_protocol(peer.ip()) {
            let open = shared.metrics.accept();
            tokio::spawn(connection::serve_relayed(
                Arc::clone(&shared),
                tcp,
                peer,
                open,
            ));
            continue;
        }
        match admit(&shared, peer.ip()) {
            Verdict::Refuse => reset(tcp),
            Verdict::Hold(permit) => {
                tokio::spawn(tarpit(Arc::clone(&shared), tcp, permit));
            }
            Verdict::Serve(permit) => {
                let open = shared.metrics.accept();
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    let _open = open;
                    let _permit = permit;
                    connection::serve(shared, tcp, peer).await;
                });
            }
        }
    }
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
        _ = shutdown.wait_for(|stopping| *stopping) => {}
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_enforces_total_and_per_ip_and_releases_on_drop() {
        let limiter = Arc::new(Limiter::new(3, 2));
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        let first = limiter.admit(a).expect("first");
        let _second = limiter.admit(a).expect("second");
        assert_eq!(limiter.admit(a).err(), Some(Refused::PerIp));
        let _third = limiter.admit(b).expect("other ip");
        assert_eq!(limiter.admit(b).err(), Some(Refused::Total));
        drop(first);
        assert!(limiter.admit(a).is_ok());
    }
}
