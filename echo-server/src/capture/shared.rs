//! What every connection task shares: the TLS acceptor, the responder, the limits and admission
//! state, the counters, the shutdown signal, and the sink an ended connection's record goes to.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use exitvoice_protocol::tcp::P0fDb;
use exitvoice_schema::{Peer, PeerPolicy};
use ipnet::IpNet;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use super::admission::Admission;
use super::limiter::Limiter;
use super::record::Peers;
use super::responder::Responder;
use super::sink::RecordSink;
use crate::config::Limits;
use crate::metrics::Metrics;

/// State every connection task shares.
pub(crate) struct Shared {
    pub(crate) acceptor: TlsAcceptor,
    /// Answers each request (the API).
    pub(crate) responder: Arc<dyn Responder>,
    /// The `alt-svc` header every answer over TCP carries when QUIC is on (RFC 7838): set on
    /// the responder's answer by the connection's service, not by a middleware layer around
    /// every route.
    pub(crate) alt_svc: Option<http::HeaderValue>,
    pub(crate) limits: Limits,
    pub(crate) metrics: Arc<Metrics>,
    /// Takes each connection's record when it ends (the writer queues it).
    pub(crate) sink: Box<dyn RecordSink>,
    pub(crate) limiter: Arc<Limiter>,
    pub(crate) admission: Arc<Admission>,
    /// Flips to `true` once shutdown starts.
    pub(crate) shutdown: watch::Receiver<bool>,
    /// Start time of this server in ms since the epoch: the first part of connection ids.
    pub(crate) boot_id: String,
    /// How much of a peer's address is stored.
    pub(crate) store_peer_ip: PeerPolicy,
    /// Sources whose connections start with a PROXY protocol header (`--proxy-protocol-from`).
    pub(crate) proxy_from: Vec<IpNet>,
    /// The p0f signature database naming each SYN's OS (`--p0f-db`).
    pub(crate) p0f_db: Option<Arc<P0fDb>>,
    pub(crate) next_connection: AtomicU64,
}

impl Shared {
    /// A new connection id: the server's start time and the next sequence number (1, 2, …).
    pub(crate) fn connection_id(&self) -> String {
        let sequence = self.next_connection.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{}-{sequence:06}", self.boot_id)
    }

    /// A connection's peers as its record keeps them: the client, what `--store-peer-ip` lets
    /// be stored of it, and the load balancer that relayed it.
    pub(crate) fn peers(&self, peers: Peers) -> (Peers, Peer) {
        (peers, self.store_peer_ip.apply(peers.client))
    }

    /// Whether connections from `ip` must start with a PROXY protocol header.
    pub(crate) fn relays_proxy_protocol(&self, ip: IpAddr) -> bool {
        // An IPv4 client on a dual-stack socket arrives as `::ffff:a.b.c.d`.
        let ip = ip.to_canonical();
        self.proxy_from.iter().any(|net| net.contains(&ip))
    }
}

/// Resolves once shutdown has started (or the server is gone).
pub(crate) async fn stopping(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stopping| *stopping).await;
}
