//! The UDP listener beside the TCP one, on the same port: quinn completes the QUIC handshake
//! (on the same rustls and aws-lc-rs as TCP) and serves HTTP/3, while a tap on its socket hands
//! each client's Initial datagrams to the offline Initial reader first (`exitvoice_protocol::quic`).
//!
//! The listener never sends Retry: a Retry changes the client's DCID and so its Initial keys
//! (RFC 9000 section 17.2.5, RFC 9001 section 5.2). Before the client's address is validated,
//! quinn sends at most three times the bytes it received from it (RFC 9000 section 8.1).

mod attempts;
mod http3;
mod socket;

use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use quinn::crypto::rustls::QuicServerConfig;
use quinn::{Endpoint, EndpointConfig, Incoming, Runtime, TokioRuntime, TransportConfig, VarInt};
use tokio::sync::{mpsc, watch};

use crate::ledger::Ledger;
use crate::metrics::Metrics;
use attempts::{Attempts, Key};
use socket::TapSocket;

pub(crate) use http3::{Answer, H3Answer, H3Request, QuicConnection};

/// Datagram copies waiting for the capture; past this the tap drops (and counts) them.
const TAP_QUEUE: usize = 1024;
/// Time a client has to complete the handshake.
const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);
/// A connection with nothing to say is closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a new connection looks for its Initials' capture (the tap's copy is read by
/// another task, usually long before the handshake completes).
const CLAIM_WAIT: Duration = Duration::from_millis(500);
const CLAIM_POLL: Duration = Duration::from_millis(10);
/// Streams a client may open at once.
const MAX_BIDI_STREAMS: u32 = 64;
const MAX_UNI_STREAMS: u32 = 16;

/// A bound UDP listener.
pub(crate) struct QuicListener {
    endpoint: Endpoint,
    attempts: Arc<Mutex<Attempts>>,
    capture: tokio::task::JoinHandle<()>,
    answer: Answer,
    metrics: Arc<Metrics>,
    next_id: Arc<dyn Fn() -> String + Send + Sync>,
    ledger: Arc<Ledger>,
}

/// Binds quinn to `socket` with the tap in front of it.
///
/// # Errors
/// When rustls' configuration has no TLS 1.3 suite QUIC can use for Initials, or the socket
/// cannot be set up.
pub(crate) fn bind(
    socket: std::net::UdpSocket,
    tls: rustls::ServerConfig,
    metrics: Arc<Metrics>,
    answer: Answer,
    next_id: Arc<dyn Fn() -> String + Send + Sync>,
    ledger: Arc<Ledger>,
) -> io::Result<QuicListener> {
    let crypto = QuicServerConfig::try_from(tls).map_err(io::Error::other)?;
    let mut transport = TransportConfig::default();
    transport
        .max_idle_timeout(Some(IDLE_TIMEOUT.try_into().map_err(io::Error::other)?))
        .max_concurrent_bidi_streams(VarInt::from_u32(MAX_BIDI_STREAMS))
        .max_concurrent_uni_streams(VarInt::from_u32(MAX_UNI_STREAMS));
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(Arc::new(transport));
    socket.set_nonblocking(true)?;
    let runtime: Arc<dyn Runtime> = Arc::new(TokioRuntime);
    let (copies, copied) = mpsc::channel(TAP_QUEUE);
    let tap = TapSocket::new(
        runtime.wrap_udp_socket(socket)?,
        copies,
        Arc::clone(&metrics),
    );
    let endpoint = Endpoint::new_with_abstract_socket(
        EndpointConfig::default(),
        Some(server),
        Arc::new(tap),
        runtime,
    )?;
    let attempts = Arc::new(Mutex::new(Attempts::default()));
    let capture = tokio::spawn(attempts::run(
        Arc::clone(&attempts),
        copied,
        Arc::clone(&metrics),
    ));
    Ok(QuicListener {
        endpoint,
        attempts,
        capture,
        answer,
        metrics,
        next_id,
        ledger,
    })
}

impl QuicListener {
    /// The UDP address bound.
    pub(crate) fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.endpoint.local_addr().ok()
    }

    /// Accepts connections until `shutdown` turns true, then closes the endpoint.
    pub(crate) async fn run(self, mut shutdown: watch::Receiver<bool>) {
        loop {
            let incoming = tokio::select! {
                incoming = self.endpoint.accept() => incoming,
                _ = shutdown.wait_for(|stopping| *stopping) => None,
            };
            let Some(incoming) = incoming else { break };
            self.metrics.quic("connections_incoming");
            tokio::spawn(connection(
                incoming,
                Arc::clone(&self.attempts),
                Arc::clone(&self.answer),
                Arc::clone(&self.metrics),
                Arc::clone(&self.ledger),
                (self.next_id)(),
            ));
        }
        self.endpoint.close(VarInt::from_u32(0), b"shutdown");
        let _ = tokio::time::timeout(Duration::from_secs(1), self.endpoint.wait_idle()).await;
        self.capture.abort();
    }
}

/// One connection: the handshake (never a Retry), its capture, then HTTP/3. The ledger hears
/// of it as an attempt only when it carried no request (its requests speak for it).
async fn connection(
    incoming: Incoming,
    attempts: Arc<Mutex<Attempts>>,
    answer: Answer,
    metrics: Arc<Metrics>,
    ledger: Arc<Ledger>,
    id: String,
) {
    let key: Key = (incoming.remote_address(), incoming.orig_dst_cid().to_vec());
    let arrived_ms = crate::clock::now_ms();
    let failed = || {
        metrics.quic("handshake_failures");
        ledger.quic_attempt(key.0.ip(), arrived_ms);
    };
    let Ok(connecting) = incoming.accept() else {
        failed();
        return;
    };
    let connection = match tokio::time::timeout(HANDSHAKE_DEADLINE, connecting).await {
        Ok(Ok(connection)) => connection,
        _ => {
            failed();
            return;
        }
    };
    metrics.quic("handshakes");
    let deadline = tokio::time::Instant::now() + CLAIM_WAIT;
    let initial = loop {
        let claimed = attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .claim(&key);
        if claimed.is_some() || tokio::time::Instant::now() >= deadline {
            break claimed;
        }
        tokio::time::sleep(CLAIM_POLL).await;
    };
    if initial.is_none() {
        metrics.quic("connections_without_capture");
    }
    let quic = Arc::new(QuicConnection::new(id, key.0, initial).timed(connection.clone()));
    http3::serve(connection, Arc::clone(&quic), answer, metrics).await;
    if quic.requests() == 0 {
        ledger.quic_attempt(key.0.ip(), arrived_ms);
    }
}
