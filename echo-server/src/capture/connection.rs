//! One connection from accept to close: read the ClientHello under the handshake deadline,
//! replay it into rustls, tap the decrypted stream, sniff what the client speaks, serve it with
//! hyper's HTTP/1 or HTTP/2 server (`http.rs`), and hand its record to the sink (`sink.rs`).
//!
//! Nothing here parses on the accept path: the hello records and the tapped bytes are kept raw
//! in the connection record (`record.rs`), analysed once when the first request (or the writer,
//! for a connection without one) needs the facts.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use exitvoice_schema::{Failure, TcpAbsence};
use time::OffsetDateTime;
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

use super::gate::{admit, reset, tarpit, Verdict};
use super::hello::{read_client_hello, HelloError};
use super::http::serve_http;
use super::proxy;
use super::record::{Connection, Failed, Peers, Session};
use super::replay::Replay;
use super::round_trip::RoundTripCell;
use super::saved_syn::SavedSyn;
use super::shared::{stopping, Shared};
use super::strike::{is_handshake_strike, strike};
use super::tap::{Tap, TapBuffer};
use super::timed::TimedTcp;
use crate::metrics::OpenConnection;

/// Serves one accepted TCP connection to its end. Never panics on peer input; every way out
/// queues one connection record.
pub(crate) async fn serve(shared: Arc<Shared>, tcp: TcpStream, peer: SocketAddr, syn: SavedSyn) {
    let deadline = Instant::now() + shared.limits.handshake_timeout;
    let peers = Peers {
        client: peer,
        proxy: None,
    };
    serve_tls(shared, tcp, (peers, syn), Vec::new(), deadline).await;
}

/// Serves a connection from a `--proxy-protocol-from` source: reads its PROXY header under the
/// handshake deadline, admits the connection by the client address the header names (rate
/// limit, penalty box, open-connection limits: the client's, not the load balancer's), then
/// serves it as [`serve`] does, the handshake keeping the same deadline.
///
/// A bad header from a trusted load balancer is recorded and counted, but is no strike: it is
/// a misconfiguration or a health check, and the penalty box would hold every client behind it.
pub(crate) async fn serve_relayed(
    shared: Arc<Shared>,
    mut tcp: TcpStream,
    relay: SocketAddr,
    open: OpenConnection,
) {
    let _open = open;
    let accepted = OffsetDateTime::now_utc();
    let deadline = Instant::now() + shared.limits.handshake_timeout;
    let mut raw = Vec::new();
    let mut shutdown = shared.shutdown.clone();
    let read = tokio::select! {
        read = timeout_at(deadline, proxy::read_header(&mut tcp, &mut raw)) => Some(read),
        () = stopping(&mut shutdown) => None,
    };
    let (reason, detail) = match read {
        Some(Ok(Ok(client))) => {
            let peers = Peers {
                client,
                proxy: Some(relay),
            };
            match admit(&shared, client.ip()) {
                Verdict::Refuse => reset(tcp),
                Verdict::Hold(permit) => tarpit(shared, tcp, permit).await,
                Verdict::Serve(_permit) => {
                    let syn = SavedSyn::Absent(TcpAbsence::ProxyProtocol);
                    serve_tls(shared, tcp, (peers, syn), raw, deadline).await;
                }
            }
            return;
        }
        None => (
            Failure::Shutdown,
            "shutdown: the server stopped before a complete PROXY header".to_owned(),
        ),
        Some(Err(_)) => (
            Failure::ProxyTruncated,
            "proxy_truncated: no complete PROXY header before the handshake deadline".to_owned(),
        ),
        Some(Ok(Err(error))) => (error.failure(), format!("{}: {error}", error.failure())),
    };
    tracing::debug!(%relay, reason = reason.as_str(), "PROXY header not read");
    shared.metrics.handshake_failure(reason.as_str());
    let peers = Peers {
        client: relay,
        proxy: None,
    };
    let tap = Arc::new(TapBuffer::new(0));
    let conn = Connection::new(
        shared.connection_id(),
        shared.peers(peers),
        accepted,
        (SavedSyn::Absent(TcpAbsence::ProxyProtocol), raw.into()),
        None,
        tap,
        shared.p0f_db.clone(),
    );
    shared.sink.closed(Arc::new(conn), Some((reason, detail)));
}

/// Reads the ClientHello (after whatever of it `raw` already holds) under `deadline`, replays it
/// into rustls, and serves the connection to its end.
async fn serve_tls(
    shared: Arc<Shared>,
    mut tcp: TcpStream,
    (peers, syn): (Peers, SavedSyn),
    mut raw: Vec<u8>,
    deadline: Instant,
) {
    let id = shared.connection_id();
    let peer = peers.client;
    let accepted = OffsetDateTime::now_utc();
    let limits = &shared.limits;
    let tap = Arc::new(TapBuffer::new(limits.capture_bytes));
    // Without TCP_NODELAY, an answer written while earlier bytes (the session tickets) are
    // unacknowledged waits for the client's delayed ACK (Nagle's algorithm, RFC 896), up to
    // 200 ms on some systems.
    let _ = tcp.set_nodelay(true);

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
            shared.peers(peers),
            accepted,
            (syn.clone(), hello),
            None,
            Arc::clone(&tap),
            shared.p0f_db.clone(),
        ));
        shared.sink.closed(conn, Some((reason, detail)));
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
            // A PROXY header where a ClientHello belongs: from a source not in
            // `--proxy-protocol-from` (or a second one behind a trusted load balancer's), so a
            // client claiming someone else's address. Refused and counted, never trusted.
            let invalid = matches!(error, HelloError::Invalid(_));
            if invalid
                && timeout_at(deadline, proxy::opens_header(&mut tcp, &mut raw))
                    .await
                    .unwrap_or(false)
            {
                tracing::debug!(conn = %id, %peer, "PROXY header from an untrusted source");
                return failed(
                    Failure::ProxyUntrusted,
                    "proxy_untrusted: a PROXY protocol header from a source not in \
                     --proxy-protocol-from"
                        .to_owned(),
                    raw.into(),
                );
            }
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

    let round_trips = Arc::new(RoundTripCell::default());
    if peers.proxy.is_some() {
        round_trips.no_transport(
            "relayed by a load balancer (PROXY protocol): the kernel's round trip is the \
             balancer's",
        );
    }
    let timed = TimedTcp::new(tcp, Arc::clone(&round_trips), peers.proxy.is_none());
    let accept = shared.acceptor.accept(Replay::new(raw, timed));
    let mut tls = match timeout_at(deadline, accept).await {
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
    tls.get_mut().0.inner_mut().handshake_done();
    let (_, server_conn) = tls.get_ref();
    if server_conn.alpn_protocol() == Some(crate::acme::ACME_TLS_ALPN) {
        // An ACME CA validating a TLS-ALPN-01 challenge: it has seen the challenge certificate
        // and sends nothing more (RFC 8737 section 3). Not a visitor: counted, not stored.
        shared.metrics.acme_challenge();
        return;
    }
    shared.metrics.handshake();
    let session = Session {
        alpn: server_conn
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned()),
        // Named as the captures format (OpenSSL's) names them, `TLSv1.3`, from our registry:
        // not from rustls's `Debug`, which spells `TLSv1_3` and is no contract.
        tls_version: server_conn.protocol_version().map(|version| {
            let code = u16::from(version);
            registry_name(exitvoice_protocol::tls::ProtocolVersion(code).name(), code)
        }),
        cipher: server_conn.negotiated_cipher_suite().map(|suite| {
            let code = u16::from(suite.suite());
            registry_name(exitvoice_protocol::tls::CipherSuite(code).name(), code)
        }),
    };
    let conn = Arc::new(
        Connection::new(
            id,
            shared.peers(peers),
            accepted,
            (syn, hello),
            Some(session),
            Arc::clone(&tap),
            shared.p0f_db.clone(),
        )
        .timed(round_trips),
    );
    let failure = serve_http(&shared, Arc::clone(&conn), Tap::new(tls, tap)).await;
    if conn.tap.truncated() {
        shared.metrics.capture_truncated();
    }
    if conn.tap.follow_lost() {
        shared.metrics.heads_unfollowed();
    }
    shared.sink.closed(conn, failure);
}

/// A code point's registry name, or its hex when the registry has none.
fn registry_name(name: Option<&'static str>, code: u16) -> Cow<'static, str> {
    name.map_or_else(|| Cow::Owned(format!("0x{code:04x}")), Cow::Borrowed)
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
