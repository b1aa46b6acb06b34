//! One connection from accept to close: read the ClientHello under the handshake deadline,
//! replay it into rustls, tap the decrypted stream, sniff what the client speaks, serve it with
//! hyper's HTTP/1 or HTTP/2 server, and queue what was seen.
//!
//! Nothing here parses on the accept path: the hello records and the tapped bytes are kept raw,
//! analysed once when the first request (or the writer, for a connection without one) needs
//! the facts ([`Connection::analysis`]), and each request reads only its own head
//! ([`Connection::request_head`]).

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use time::OffsetDateTime;
use tokio::net::TcpStream;
use tokio::time::{timeout, timeout_at, Instant};
use tower::ServiceExt as _;

use super::admission::{Source, Struck};
use super::builders;
use super::hello::{read_client_hello, Replay};
use super::tap::{Tap, TapBuffer};
use crate::analysis::{self, Analysis, ConnectionInput, Follower, LayerError, RequestHead};
use crate::classify::sniff;
use crate::metrics::Metrics;
use crate::server::Shared;
use crate::writer::Job;
use exitvoice_schema::{Failure, FirstRequest, Peer, Spoken};

/// What the server knows about one connection; handlers get it as a request extension.
#[derive(Debug)]
pub struct Connection {
    /// Connection id, unique per server start.
    pub id: String,
    /// The TCP peer.
    pub peer: SocketAddr,
    /// The peer as `--store-peer-ip` lets it be stored.
    pub stored_peer: Peer,
    /// When the connection was accepted.
    pub accepted: OffsetDateTime,
    /// The ClientHello records as received (a partial hello when reading it failed).
    pub hello: Bytes,
    /// The negotiated session, when the handshake completed.
    pub session: Option<Session>,
    /// The decrypted client bytes kept so far.
    pub tap: Arc<TapBuffer>,
    /// What the client's first decrypted bytes were.
    spoken: OnceLock<Spoken>,
    /// Requests started on this connection.
    requests: AtomicU32,
    /// Request observations queued for this connection.
    observed: AtomicU32,
    /// The first distinct probe tokens of the requests so far (at most two).
    tokens: Mutex<Vec<String>>,
    /// The analysis of the hello and the prefix, computed on first use.
    analysis: OnceLock<Analysis>,
    /// Reads each request's head from where the last one ended.
    follower: Mutex<Option<Follower>>,
    /// The connection row was queued for the store (by its first request).
    queued: AtomicBool,
    /// Requests and prefix bytes in the row last written for the store (`u32::MAX`: none).
    written_requests: AtomicU32,
    written_prefix: AtomicUsize,
    /// The first request, once it was answered.
    pub(crate) first_request: OnceLock<FirstRequest>,
}

/// How one request arrived on its connection; handlers get it as a request extension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// 1 for the first request on the connection, 2 for the second, … in arrival order.
    pub index: u32,
    /// The probe token as sent (`/probe/<token>` or `?token=`), not yet checked.
    pub token: Option<String>,
    /// An earlier request on the connection carried a different probe token.
    pub earlier_other_probe: bool,
}

/// The parameters rustls negotiated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The ALPN protocol the server selected.
    pub alpn: Option<String>,
    /// The TLS version, e.g. `TLSv1.3`.
    pub tls_version: Option<String>,
    /// The cipher suite (IANA name, or hex when unnamed).
    pub cipher: Option<String>,
}

impl Connection {
    fn new(
        id: String,
        peer: (SocketAddr, Peer),
        accepted: OffsetDateTime,
        hello: Bytes,
        session: Option<Session>,
        tap: Arc<TapBuffer>,
    ) -> Self {
        let (peer, stored_peer) = peer;
        Self {
            id,
            peer,
            stored_peer,
            accepted,
            hello,
            session,
            tap,
            spoken: OnceLock::new(),
            requests: AtomicU32::new(0),
            observed: AtomicU32::new(0),
            tokens: Mutex::new(Vec::new()),
            analysis: OnceLock::new(),
            follower: Mutex::new(None),
            queued: AtomicBool::new(false),
            written_requests: AtomicU32::new(u32::MAX),
            written_prefix: AtomicUsize::new(0),
            first_request: OnceLock::new(),
        }
    }

    /// What the client spoke after the handshake (`Unknown` until it said something).
    pub fn spoken(&self) -> Spoken {
        self.spoken.get().copied().unwrap_or(Spoken::Unknown)
    }

    /// Counts a new request and returns its index on the connection (1 for the first).
    pub fn next_request(&self) -> u32 {
        self.requests
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1)
    }

    /// Requests started so far.
    pub fn requests(&self) -> u32 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Notes that a request observation of this connection was queued.
    pub(crate) fn mark_observed(&self) {
        self.observed.fetch_add(1, Ordering::Relaxed);
    }

    /// Records the probe token of a request and says whether an earlier request on this
    /// connection carried a different one (the re-mux evidence of bucket C).
    pub fn note_token(&self, token: Option<&str>) -> bool {
        let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        let earlier_other = tokens.iter().any(|seen| Some(seen.as_str()) != token);
        // Two distinct tokens are enough to answer for any later request, so a connection
        // carrying thousands of probes holds at most two.
        if let Some(token) = token {
            if tokens.len() < DISTINCT_TOKENS_KEPT && !tokens.iter().any(|seen| seen == token) {
                tokens.push(token.to_owned());
            }
        }
        earlier_other
    }

    /// Request observations queued so far; with none, the connection is stored on its own.
    pub fn observed(&self) -> u32 {
        self.observed.load(Ordering::Relaxed)
    }

    /// Marks the connection row as queued; `true` only for the first caller.
    pub(crate) fn queue_once(&self) -> bool {
        !self.queued.swap(true, Ordering::Relaxed)
    }

    /// Notes what the row built for the store holds.
    pub(crate) fn note_queued(&self, requests: u32, prefix_len: usize) {
        self.written_prefix.store(prefix_len, Ordering::Relaxed);
        self.written_requests.store(requests, Ordering::Relaxed);
    }

    /// Whether a row was built and the connection has not changed since (same requests, same
    /// captured bytes): storing it again would write the same row.
    pub(crate) fn unchanged_since_queued(&self) -> bool {
        self.written_requests.load(Ordering::Relaxed) == self.requests()
            && self.written_prefix.load(Ordering::Relaxed) == self.tap.len()
    }

    /// The connection's analysis: made on the first call, from the bytes captured by then (the
    /// first request's, for a connection that carried one), and counted once per failing layer.
    pub(crate) fn analysis(&self, metrics: &Metrics) -> &Analysis {
        self.analysis.get_or_init(|| {
            let prefix = self.tap.snapshot();
            let session = self.session.as_ref();
            let analysis = analysis::analyse(&ConnectionInput {
                hello: &self.hello,
                prefix: &prefix,
                alpn_negotiated: session.and_then(|s| s.alpn.as_deref()),
                tls_version: session.and_then(|s| s.tls_version.as_deref()),
                cipher: session.and_then(|s| s.cipher.as_deref()),
                spoken: self.spoken.get().copied(),
            });
            for error in &analysis.errors {
                metrics.parse_error(error.layer);
            }
            analysis
        })
    }

    /// The head of request `index`, read from the capture past the heads read before it.
    pub(crate) fn request_head(&self, index: u32, metrics: &Metrics) -> RequestHead {
        let mut follower = self.follower.lock().unwrap_or_else(PoisonError::into_inner);
        let follower = follower.get_or_insert_with(|| Follower::new(self.spoken()));
        let (head, error) = self.tap.with_bytes(|capture| follower.head(capture, index));
        if let Some(LayerError { layer, .. }) = error {
            metrics.parse_error(layer);
        }
        head
    }
}

/// Why a connection failed, typed, with the server's description.
pub(crate) type Failed = (Failure, String);

/// The failure of a connection whose first request head missed the request deadline.
fn request_timed_out() -> Failed {
    (
        Failure::RequestTimeout,
        "request_timeout: no complete request before the request deadline".into(),
    )
}

/// Distinct probe tokens remembered per connection (see [`Connection::note_token`]).
const DISTINCT_TOKENS_KEPT: usize = 2;

/// Builds the connection id: server start time and a sequence number.
fn connection_id(shared: &Shared) -> String {
    format!("{}-{:06}", shared.boot_id, shared.next_connection())
}

/// Serves one accepted TCP connection to its end. Never panics on peer input; every way out
/// queues one connection record.
pub(crate) async fn serve(shared: Arc<Shared>, mut tcp: TcpStream, peer: SocketAddr) {
    let id = connection_id(&shared);
    let peers = (peer, shared.store_peer_ip.apply(peer));
    let accepted = OffsetDateTime::now_utc();
    let limits = &shared.limits;
    let tap = Arc::new(TapBuffer::new(limits.capture_bytes));
    let deadline = Instant::now() + limits.handshake_timeout;
    let _ = tcp.set_nodelay(true);

    let mut raw = Vec::new();
    let mut shutdown = shared.shutdown.clone();
    // Only a stalling peer keeps the hello read waiting: at shutdown it is cut, not waited for.
    let hello_read = tokio::select! {
        read = timeout_at(deadline, read_client_hello(&mut tcp, limits.hello_cap, &mut raw)) => {
            Some(read)
        }
        () = stopping(&mut shutdown) => None,
    };
    let failed = |reason: Failure, detail: String, hello: Bytes| {
        shared.metrics.handshake_failure(reason.as_str());
        if is_handshake_strike(reason) {
            strike(&shared, peer, reason.as_str());
        }
        let conn = Arc::new(Connection::new(
            id.clone(),
            peers.clone(),
            accepted,
            hello,
            None,
            Arc::clone(&tap),
        ));
        shared.writer.submit(Job::Closed {
            conn,
            failure: Some((reason, detail)),
        });
    };
    let hello_len = match hello_read {
        None => {
            return failed(
                Failure::Shutdown,
                "shutdown: the server stopped before a complete ClientHello".to_owned(),
                raw.into(),
            );
        }
        Some(Ok(Ok(len))) => len,
        Some(Ok(Err(error))) => {
            tracing::debug!(conn = %id, %peer, reason = error.reason(), "ClientHello not read");
            return failed(
                error.failure(),
                format!("{}: {error}", error.reason()),
                raw.into(),
            );
        }
        Some(Err(_)) => {
            return failed(
                Failure::HelloTimeout,
                "hello_timeout: no complete ClientHello before the handshake deadline".to_owned(),
                raw.into(),
            );
        }
    };
    let raw = Bytes::from(raw);
    let hello = raw.slice(..hello_len.min(raw.len()));

    let accept = shared.acceptor.accept(Replay::new(raw, tcp));
    let tls = match timeout_at(deadline, accept).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            let (reason, detail) = handshake_failure(&error);
            tracing::debug!(conn = %id, %peer, reason = reason.as_str(), "TLS handshake failed");
            return failed(reason, detail, hello);
        }
        Err(_) => {
            return failed(
                Failure::HandshakeTimeout,
                "handshake_timeout: TLS handshake not done before the deadline".to_owned(),
                hello,
            );
        }
    };
    shared.metrics.handshake();
    let (_, server_conn) = tls.get_ref();
    let session = Session {
        alpn: server_conn
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned()),
        // rustls spells versions `TLSv1_3`; the captures format (OpenSSL's) says `TLSv1.3`.
        tls_version: server_conn
            .protocol_version()
            .map(|v| format!("{v:?}").replace('_', ".")),
        cipher: server_conn.negotiated_cipher_suite().map(|suite| {
            let code = u16::from(suite.suite());
            crate::tls::CipherSuite(code)
                .name()
                .map_or_else(|| format!("0x{code:04x}"), str::to_owned)
        }),
    };
    let conn = Arc::new(Connection::new(
        id,
        peers,
        accepted,
        hello,
        Some(session),
        Arc::clone(&tap),
    ));
    let failure = serve_http(&shared, Arc::clone(&conn), Tap::new(tls, tap)).await;
    shared.writer.submit(Job::Closed { conn, failure });
}

/// How a served connection ended.
enum Ended {
    /// hyper finished it (client closed, or graceful shutdown completed).
    Done,
    /// No bytes either way for the idle timeout.
    Idle,
    /// No complete request head before the request deadline.
    RequestTimeout,
    /// hyper reported a protocol or I/O error.
    Error(hyper::Error),
}

/// Runs a hyper connection against the idle timeout and the shutdown signal. A macro because
/// hyper's HTTP/1 and HTTP/2 connections share `graceful_shutdown` by name, not by trait.
macro_rules! drive {
    ($connection:expr, $conn:expr, $first:expr, $idle:expr, $shutdown:expr, $metrics:expr) => {{
        let mut connection = pin!($connection);
        let mut first_due = true;
        let mut shutting_down = *$shutdown.borrow();
        if shutting_down {
            connection.as_mut().graceful_shutdown();
        }
        loop {
            tokio::select! {
                result = connection.as_mut() => break match result {
                    Ok(()) => Ended::Done,
                    Err(error) => Ended::Error(error),
                },
                () = idle_expired(&$conn.tap, $idle) => {
                    $metrics.idle_closed();
                    break Ended::Idle;
                }
                () = tokio::time::sleep_until($first), if first_due => {
                    first_due = false;
                    if $conn.requests() == 0 {
                        $metrics.request_timeout();
                        break Ended::RequestTimeout;
                    }
                }
                _ = $shutdown.changed(), if !shutting_down => {
                    shutting_down = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }};
}

/// Sniffs the protocol and runs hyper until the connection ends; returns why it ended badly.
async fn serve_http<S>(shared: &Shared, conn: Arc<Connection>, mut tap: Tap<S>) -> Option<Failed>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let idle = shared.limits.idle_timeout;
    let request_timeout = shared.limits.request_timeout;
    // The first request head must be complete by then, however slowly its bytes trickle in.
    let first_deadline = Instant::now() + request_timeout;
    let mut shutdown = shared.shutdown.clone();
    let peeked = tokio::select! {
        peeked = timeout(idle.min(request_timeout), tap.peek(sniff)) => peeked,
        () = stopping(&mut shutdown) => {
            return Some((
                Failure::Shutdown,
                "shutdown: the server stopped before a request".into(),
            ));
        }
    };
    let spoken = match peeked {
        Ok(Ok(Some(spoken))) => spoken,
        Ok(Ok(None)) => {
            return Some((
                Failure::NoRequest,
                "no_request: client closed before sending a request".into(),
            ))
        }
        Ok(Err(error)) => return Some((Failure::ReadError, format!("read_error: {error}"))),
        Err(_) if idle <= request_timeout => {
            shared.metrics.idle_closed();
            return Some(idle_timed_out());
        }
        Err(_) => {
            shared.metrics.request_timeout();
            strike(shared, conn.peer, "request_timeout");
            return Some(request_timed_out());
        }
    };
    let _ = conn.spoken.set(spoken);
    let router = shared.router.clone();
    let service_conn = Arc::clone(&conn);
    let service = hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
        // hyper calls the service synchronously as each request arrives (on HTTP/2 in the order
        // of the HEADERS frames), so numbering here, not in the handler, keeps arrival order.
        let token = crate::api::probe_token(request.uri());
        let arrival = Arrival {
            index: service_conn.next_request(),
            earlier_other_probe: service_conn.note_token(token.as_deref()),
            token,
        };
        request.extensions_mut().insert(arrival);
        request.extensions_mut().insert(Arc::clone(&service_conn));
        let router = router.clone();
        async move { router.oneshot(request).await }
    });
    let io = TokioIo::new(tap);
    // Served by what the client speaks, not by ALPN: this is how a client that negotiated h2
    // and then sent HTTP/1.1 (bucket D) still gets its answer.
    let outcome = if spoken == Spoken::H2 {
        let connection = builders::http2().serve_connection(io, service);
        drive!(
            connection,
            conn,
            first_deadline,
            idle,
            shutdown,
            shared.metrics
        )
    } else {
        let connection = builders::http1(request_timeout).serve_connection(io, service);
        drive!(
            connection,
            conn,
            first_deadline,
            idle,
            shutdown,
            shared.metrics
        )
    };
    match &outcome {
        Ended::RequestTimeout => strike(shared, conn.peer, "request_timeout"),
        Ended::Error(error) if is_protocol_violation(error) => {
            strike(shared, conn.peer, "http_protocol_error");
        }
        Ended::Done | Ended::Idle | Ended::Error(_) => {}
    }
    match outcome {
        Ended::Done => None,
        Ended::Idle if conn.requests() == 0 => Some(idle_timed_out()),
        Ended::Idle => None,
        Ended::RequestTimeout => Some(request_timed_out()),
        Ended::Error(error) if conn.requests() == 0 => {
            Some((Failure::HttpError, format!("http_error: {error}")))
        }
        Ended::Error(_) => None,
    }
}

/// Resolves once shutdown has started (or the server is gone).
async fn stopping(shutdown: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stopping| *stopping).await;
}

/// Resolves once the tapped stream has seen no bytes either way for `idle`.
async fn idle_expired(buffer: &TapBuffer, idle: Duration) {
    loop {
        let quiet = buffer.idle_for();
        if quiet >= idle {
            return;
        }
        tokio::time::sleep(idle - quiet).await;
    }
}

/// Whether a failed handshake's reason is the peer's fault: bytes that are no ClientHello, one
/// over the cap, a hello or handshake not done by the deadline, or a TLS protocol error. A peer
/// that closes (port scans, load-balancer health checks), refuses our certificate, or whose
/// socket fails is not.
fn is_handshake_strike(reason: Failure) -> bool {
    matches!(
        reason,
        Failure::HelloInvalid
            | Failure::HelloTooLarge
            | Failure::HelloTimeout
            | Failure::HandshakeTimeout
            | Failure::TlsError
    )
}

/// The failure of a connection that sent no request before the idle timeout.
fn idle_timed_out() -> Failed {
    (
        Failure::IdleTimeout,
        "idle_timeout: no request before the idle timeout".into(),
    )
}

/// Whether hyper's error is the peer breaking HTTP rather than the transport failing or the
/// peer giving up: an HTTP/1 head that is malformed or too slow, or an HTTP/2 connection or
/// stream error our side detected (GOAWAY for too many resets, a header block over the
/// limits, a COMPRESSION_ERROR; RFC 9113 section 5.4). An error the peer sent itself, or an I/O
/// error, is not.
fn is_protocol_violation(error: &hyper::Error) -> bool {
    if error.is_parse() || error.is_timeout() {
        return true;
    }
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        if let Some(h2) = inner.downcast_ref::<h2::Error>() {
            return !h2.is_io() && !h2.is_remote();
        }
        source = inner.source();
    }
    false
}

/// Counts a strike against the peer's source, and says so in the log when it puts the source
/// in the penalty box.
fn strike(shared: &Shared, peer: SocketAddr, reason: &'static str) {
    shared.metrics.strike();
    if shared.admission.strike(peer.ip(), Instant::now()) == Struck::Penalised {
        shared.metrics.penalty();
        let limits = shared.limits.admission;
        tracing::warn!(
            source = %Source::of(peer.ip()),
            last_strike = reason,
            strikes = limits.strikes,
            window_s = limits.window.as_secs(),
            penalty_s = limits.penalty.as_secs(),
            "source put in the penalty box: its new connections are reset"
        );
    }
}

/// Typed reason and stored detail for a failed rustls handshake.
fn handshake_failure(error: &std::io::Error) -> Failed {
    let tls = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match tls {
        // The client refused us: most often our certificate (unknown CA, bad certificate).
        Some(rustls::Error::AlertReceived(alert)) => (
            Failure::TlsAlertReceived,
            format!("tls_alert_received: {alert:?}"),
        ),
        Some(other) => (Failure::TlsError, format!("tls_error: {other}")),
        None if error.kind() == std::io::ErrorKind::UnexpectedEof => (
            Failure::TlsClosed,
            "tls_closed: peer closed during the handshake".to_owned(),
        ),
        None => (Failure::TlsIo, format!("tls_io: {error}")),
    }
}
