//! Many proxy exits in one loopback process, for audits at scale (`exitsim`, and the
//! end-to-end test `tests/audit_scale.rs`).
//!
//! Exit `n` is the user name `exit-<n>` (one shared password) on one HTTP `CONNECT` port and,
//! optionally, one SOCKS5 port: 10,000 exits cost 10,000 counters, not 10,000 listeners. Each
//! tunnel really forwards the client's bytes to its target (loopback targets only), so the echo
//! server sees the auditor's own TLS and HTTP/2, as through a tunnelling proxy such as squid.
//!
//! Per exit it counts tunnels opened and the most open at once (a tunnel is open from the
//! proxy's success reply until its client closed its side), and the same per gateway session id
//! (`exit-<n>-sessid-<id>`): [`Simulator::snapshot`], `GET /stats`. Holders can be counted
//! toward one origin only ([`Simulator::count_holders_to`]), as that origin would see them.
#![forbid(unsafe_code)]

pub mod exits_file;
mod http_connect;
mod socks5;
mod stats;
pub mod tally;
mod tunnel;
pub mod users;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};

use tally::{Snapshot, Tally};
use users::Users;

/// What every connection handler shares.
#[derive(Debug)]
struct Sim {
    tally: Tally,
    users: Users,
    /// The target port whose tunnels count as holders; 0: every tunnel does.
    origin_port: AtomicU16,
}

impl Sim {
    /// Whether a tunnel to `port` counts in the holder gauges.
    fn counts(&self, port: u16) -> bool {
        let origin = self.origin_port.load(Ordering::Relaxed);
        origin == 0 || origin == port
    }
}

/// Running exits: their listeners, served by tasks of the runtime that started them. A clone
/// reads the same counters.
#[derive(Clone, Debug)]
pub struct Simulator {
    sim: Arc<Sim>,
    /// The bound HTTP `CONNECT` listener.
    pub http: SocketAddr,
    /// The bound SOCKS5 listener, if any.
    pub socks: Option<SocketAddr>,
}

impl Simulator {
    /// Binds `http` (and `socks`) and serves `exits` exits, all with `password`, on the current
    /// tokio runtime.
    ///
    /// # Errors
    /// A listener that cannot be bound.
    pub async fn start(
        exits: usize,
        password: String,
        http: SocketAddr,
        socks: Option<SocketAddr>,
    ) -> std::io::Result<Self> {
        let sim = Arc::new(Sim {
            tally: Tally::new(exits),
            users: Users::new(exits, password),
            origin_port: AtomicU16::new(0),
        });
        let http = TcpListener::bind(http).await?;
        let http_addr = http.local_addr()?;
        tokio::spawn(accept(http, sim.clone(), |s, sim| {
            tokio::spawn(http_connect::serve(s, sim));
        }));
        let mut socks_addr = None;
        if let Some(addr) = socks {
            let socks = TcpListener::bind(addr).await?;
            socks_addr = Some(socks.local_addr()?);
            tokio::spawn(accept(socks, sim.clone(), |s, sim| {
                tokio::spawn(socks5::serve(s, sim));
            }));
        }
        Ok(Self {
            sim,
            http: http_addr,
            socks: socks_addr,
        })
    }

    /// Serves `GET /stats` on `addr`; the bound address.
    ///
    /// # Errors
    /// A listener that cannot be bound.
    pub async fn serve_stats(&self, addr: SocketAddr) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        tokio::spawn(stats::serve(listener, self.sim.clone()));
        Ok(bound)
    }

    /// From now on, only tunnels to target port `port` count in the holders-at-once gauges
    /// (every tunnel still counts in `tunnels`): what one origin sees, while other clients of the
    /// same exits (an auditor probing an echo server) talk to another.
    pub fn count_holders_to(&self, port: u16) {
        self.sim.origin_port.store(port, Ordering::Relaxed);
    }

    /// The counters now, with the per-exit list when `per_exit` is set.
    pub fn snapshot(&self, per_exit: bool) -> Snapshot {
        self.sim.tally.snapshot(per_exit)
    }

    /// Tunnels of exit number `exit` open now, among those counted (see
    /// [`Self::count_holders_to`]); `None` if there is no such exit.
    pub fn in_flight(&self, exit: usize) -> Option<u32> {
        self.sim.tally.in_flight(exit)
    }
}

/// Accepts connections until the process ends; one bad accept (out of descriptors, a reset)
/// skips that connection only.
async fn accept(listener: TcpListener, sim: Arc<Sim>, handle: fn(TcpStream, Arc<Sim>)) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                handle(stream, sim.clone());
            }
            Err(_) => {
                sim.tally.refuse();
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}
