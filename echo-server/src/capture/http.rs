//! Serving the decrypted stream: sniff what the client speaks, run hyper's HTTP/1 or HTTP/2
//! server on it under the idle timeout, the request deadlines and the shutdown signal, and say
//! why the connection ended badly.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use exitvoice_protocol::classify::sniff;
use exitvoice_schema::{Failure, Spoken};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::time::{timeout, Instant};

use super::arrival::{probe_token, Arrival};
use super::builders;
use super::pinger::Pinger;
use super::record::{Connection, Failed};
use super::shared::{stopping, Shared};
use super::strike::strike;
use super::tap::Tap;
use super::woken::Woken;

/// The failure of a connection whose first request head missed the request deadline.
fn request_timed_out() -> Failed {
    (
        Failure::RequestTimeout,
        "request_timeout: no complete request before the request deadline".into(),
    )
}

/// The failure of a connection that sent no request before the idle timeout.
fn idle_timed_out() -> Failed {
    (
        Failure::IdleTimeout,
        "idle_timeout: no request before the idle timeout".into(),
    )
}

/// How a served connection ended.
enum Ended {
    /// hyper finished it (client closed, or graceful shutdown completed).
    Done,
    /// No bytes either way for the idle timeout.
    Idle,
    /// No complete request head before the first-request deadline, or (HTTP/1) a request head
    /// or body still arriving the request timeout after its first byte.
    RequestTimeout,
    /// hyper reported a protocol or I/O error.
    Error(hyper::Error),
}

/// Runs a hyper connection against its deadlines ([`missed_deadline`]: the idle timeout, the
/// first-request deadline and, when `$each` is given, each later request's) and the shutdown
/// signal. A macro because hyper's HTTP/1 and HTTP/2 connections share `graceful_shutdown` by
/// name, not by trait.
///
/// The task wakes for every read and write of the connection; the deadline and the shutdown
/// signal are polled only when they woke it ([`Woken`]), and the branches in their order
/// (`biased`), without drawing a random start on every wake. None starves another: the
/// connection is ready only once, at its end.
macro_rules! drive {
    ($connection:expr, $conn:expr, $first:expr, $each:expr, $idle:expr, $shutdown:expr, $metrics:expr) => {{
        let mut connection = pin!($connection);
        let mut deadline = Woken::new(missed_deadline(&$conn, $first, $each, $idle));
        let mut shutting_down = *$shutdown.borrow();
        if shutting_down {
            connection.as_mut().graceful_shutdown();
        }
        let mut stop = Woken::new(stopping(&mut $shutdown));
        loop {
            tokio::select! {
                biased;
                result = connection.as_mut() => break match result {
                    Ok(()) => Ended::Done,
                    Err(error) => Ended::Error(error),
                },
                missed = &mut deadline => {
                    break match missed {
                        Missed::Idle => {
                            $metrics.idle_closed();
                            Ended::Idle
                        }
                        Missed::Request => {
                            $metrics.request_timeout();
                            Ended::RequestTimeout
                        }
                    };
                }
                () = &mut stop, if !shutting_down => {
                    shutting_down = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }};
}

/// Sniffs the protocol and runs hyper until the connection ends; returns why it ended badly.
pub(super) async fn serve_http<S>(
    shared: &Shared,
    conn: Arc<Connection>,
    mut tap: Tap<S>,
) -> Option<Failed>
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
    let responder = Arc::clone(&shared.responder);
    let alt_svc = shared.alt_svc.clone();
    let service_conn = Arc::clone(&conn);
    let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        // hyper calls the service synchronously as each request arrives (on HTTP/2 in the order
        // of the HEADERS frames), so numbering here, not in the handler, keeps arrival order.
        service_conn.tap.took_request();
        let token = probe_token(request.uri());
        let arrival = Arrival {
            conn: Arc::clone(&service_conn),
            index: service_conn.next_request(),
            earlier_other_probe: service_conn.note_token(token.as_deref()),
            token,
        };
        let answer = responder.answer(request, arrival);
        let alt_svc = alt_svc.clone();
        async move {
            let mut response = answer.await;
            if let Some(value) = alt_svc {
                response.headers_mut().insert(http::header::ALT_SVC, value);
            }
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    // Served by what the client speaks, not by ALPN: this is how a client that negotiated h2
    // and then sent HTTP/1.1 (bucket D) still gets its answer.
    let outcome = if spoken == Spoken::H2 {
        let io = TokioIo::new(Pinger::new(tap, Arc::clone(&conn.round_trips)));
        let connection = builders::http2().serve_connection(io, service);
        drive!(
            connection,
            conn,
            first_deadline,
            None,
            idle,
            shutdown,
            shared.metrics
        )
    } else {
        let connection = builders::http1().serve_connection(TokioIo::new(tap), service);
        drive!(
            connection,
            conn,
            first_deadline,
            Some(request_timeout),
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
        Ended::RequestTimeout if conn.requests() == 0 => Some(request_timed_out()),
        Ended::RequestTimeout => None,
        Ended::Error(error) if conn.requests() == 0 => {
            Some((Failure::HttpError, format!("http_error: {error}")))
        }
        Ended::Error(_) => None,
    }
}

/// The deadline a connection missed.
enum Missed {
    /// No bytes either way for the idle timeout.
    Idle,
    /// No request by the first-request deadline, or a later one overdue.
    Request,
}

/// Resolves once the connection misses a deadline:
/// - no bytes either way for `idle`;
/// - no request by `first` (its head complete by then, however slowly its bytes trickle in);
/// - with `each` (HTTP/1), bytes read that have waited `each` for the server (see
///   [`super::tap::TapBuffer::pending_for`]): a request head that has not arrived whole `each`
///   after its first byte, or a body `each` after its first byte and not yet answered. Timed from that
///   byte, not from the previous answer as hyper's `header_read_timeout` is, so a keep-alive
///   connection waiting quietly for its next request is left to the idle timeout.
///
/// One timer for all three, armed for the earliest and checked only when it fires: requests on
/// time re-arm nothing, and each wake of the connection polls one timer.
async fn missed_deadline(
    conn: &Connection,
    first: Instant,
    each: Option<Duration>,
    idle: Duration,
) -> Missed {
    let buffer = &conn.tap;
    let mut timer = pin!(tokio::time::sleep_until(first));
    let mut first = Some(first);
    loop {
        let now = Instant::now();
        let quiet = buffer.idle_for();
        if quiet >= idle {
            return Missed::Idle;
        }
        let mut due = now + (idle - quiet);
        if let Some(at) = first {
            if now < at {
                due = due.min(at);
            } else if conn.requests() == 0 {
                return Missed::Request;
            } else {
                first = None;
            }
        }
        if let Some(limit) = each {
            let waited = buffer.pending_for().unwrap_or_default();
            if waited >= limit {
                return Missed::Request;
            }
            due = due.min(now + (limit - waited));
        }
        timer.as_mut().reset(due);
        timer.as_mut().await;
    }
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
