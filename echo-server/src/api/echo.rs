//! The echo routes: each describes the request's own connection and queues its observation.
//!
//! `/api/all` and `/probe/<token>` answer the full [`Echo`]; `/api/tls`, `/api/http2` and
//! `/api/http1` answer one layer of it; `/api/clean` only hashes and ids; every unknown path a
//! JSON 404 carrying the clean summary, so a browser pointed at `/` sees its fingerprint.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::handler::Handler;
use axum::http::header::{CONTENT_TYPE, USER_AGENT};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use bytes::Buf as _;
use exitvoice_protocol::analysis::{self, Analysis};
use exitvoice_protocol::classify::BucketRule;
use exitvoice_schema::coherence;
use exitvoice_schema::{CleanEcho, Families, FirstRequest, PeerPolicy, RequestRecord};
use http_body_util::BodyExt as _;
use hyper::body::Body as HttpBody;
use serde::Serialize;

use super::{ApiError, ApiShared, ApiState, API_VERSION};

use crate::capture::{Arrival, Connection};
use crate::clock::now_ms;
use crate::ledger::TcpVisit;
use crate::view::{EchoView, PeerView};
use crate::writer::Job;

/// Longest probe token accepted.
const MAX_TOKEN_LEN: usize = 128;

/// Room for an answer beside the connection's raw JSON: the request's own fields, the clean
/// summary (~450 bytes) or a 404 (~520).
const ANSWER_BYTES: usize = 1024;

/// `value` as the JSON answer, written into a buffer of `size` bytes to start with. axum's
/// `Json` starts at 128 bytes and doubles as it writes: a `/api/clean` answer was copied twice
/// on its way, a full echo (~9 KB) seven times.
fn json_answer(value: &impl Serialize, size: usize) -> Result<Response, ApiError> {
    let mut body = Vec::with_capacity(size);
    serde_json::to_writer(&mut body, value).map_err(|_| ApiError::Encode)?;
    // Built here: axum's `(headers, Vec<u8>)` would insert `application/octet-stream` first.
    let mut response = Response::new(Body::from(body));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
}

/// The request's connection and how the request arrived on it; a request without it (one
/// that did not come through the capture) is refused with `no_capture`.
pub(super) struct Ctx(pub(super) Arrival);

impl<S: Send + Sync> FromRequestParts<S> for Ctx {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // Each handler extracts it once: moved out, not copied.
        let arrival = parts
            .extensions
            .remove::<Arrival>()
            .ok_or(ApiError::NoCapture)?;
        Ok(Self(arrival))
    }
}

/// A probe token: 1 to 128 characters of `A-Z a-z 0-9 - _ .` (URL-safe, no escaping needed).
pub(super) fn valid_token(token: String) -> Result<String, ApiError> {
    let ok = !token.is_empty()
        && token.len() <= MAX_TOKEN_LEN
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(token)
    } else {
        Err(ApiError::BadToken)
    }
}

/// Bytes past the body cap still read (and discarded) before answering 413, so a client that is
/// still uploading gets the answer instead of a reset connection ("lingering close").
const BODY_DRAIN_SLACK: usize = 1 << 20;

/// Reads and discards the request body (nothing is buffered); an error when it is over `cap`.
async fn drain_body<B: HttpBody + Unpin>(mut body: B, cap: usize) -> Result<(), ApiError> {
    let mut seen = 0_usize;
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            seen = seen.saturating_add(data.remaining());
            if seen > cap.saturating_add(BODY_DRAIN_SLACK) {
                break;
            }
        }
    }
    if seen > cap {
        Err(ApiError::BodyTooLarge { cap })
    } else {
        Ok(())
    }
}

/// One answered request: its connection's facts and its own record, borrowed by the views.
pub(super) struct Observed {
    conn: Arc<Connection>,
    record: Arc<RequestRecord>,
    /// The rule that decided `record.bucket`.
    bucket_rule: BucketRule,
    /// The request's User-Agent header (a shared buffer, not a copy), for the coherence of a
    /// full echo (`None` for other answers).
    user_agent: Option<HeaderValue>,
}

impl Observed {
    fn analysis(&self, metrics: &crate::metrics::Metrics) -> &Analysis {
        self.conn.analysis(metrics)
    }

    /// The rule that decided the request's bucket.
    pub(super) fn bucket_rule(&self) -> BucketRule {
        self.bucket_rule
    }

    /// What the analysis could not read: each layer that did not parse, and why.
    pub(super) fn layer_errors(&self, metrics: &crate::metrics::Metrics) -> Vec<String> {
        self.analysis(metrics)
            .errors
            .iter()
            .map(|e| format!("The {} layer did not parse: {}.", e.layer, e.message))
            .collect()
    }

    /// The full echo of the request as `/api/all` answers it, as JSON text.
    pub(super) fn echo_json(&self, state: &ApiShared) -> serde_json::Result<String> {
        serde_json::to_string_pretty(&self.full_echo(state))
    }

    /// The full echo with its coherence, and with `--geoip` the visitor's place: `/api/all`'s
    /// answer. The connection's TLS and HTTP/2 families are judged once, with its JSON
    /// ([`analysis::EchoJson`]); a request adds only its User-Agent's family and the reasons.
    fn full_echo(&self, state: &ApiShared) -> EchoView<'_> {
        let metrics = &state.metrics;
        let geo = state.geo.as_ref().map(|geo| geo.echo(self.conn.peer.ip()));
        let user_agent = self.user_agent.as_ref().and_then(|ua| ua.to_str().ok());
        let latency = self.conn.round_trips.shown();
        self.echo(metrics).timed(Some(latency)).located(geo).judged(
            Families {
                ua: user_agent.and_then(coherence::ua_family),
                ..self.conn.echo_json(metrics).families.clone()
            },
            user_agent.and_then(coherence::ua_os),
        )
    }

    /// Room for an answer that carries the connection's raw JSON (`tls`, `http2.detail`).
    fn raw_bytes(&self, metrics: &crate::metrics::Metrics) -> usize {
        let json = self.conn.echo_json(metrics);
        json.tls.as_ref().map_or(0, |tls| tls.get().len())
            + json.http2_detail.get().len()
            + ANSWER_BYTES
    }

    /// The full echo of the request, as the client itself sees it (its own full address).
    fn echo(&self, metrics: &crate::metrics::Metrics) -> EchoView<'_> {
        EchoView::new(
            self.analysis(metrics),
            self.conn.echo_json(metrics),
            Some(client_peer(&self.conn)),
            &self.record,
        )
    }
}

/// `arrival` with its probe token checked: a bad token is answered before the body is read.
fn checked(mut arrival: Arrival) -> Result<Arrival, ApiError> {
    arrival.token = arrival.token.take().map(valid_token).transpose()?;
    Ok(arrival)
}

/// Reads (and discards) the body up to the cap, then [`observe`]s the request (`full`: for a
/// full echo).
pub(super) async fn read_and_observe<B: HttpBody + Unpin>(
    state: &ApiState,
    arrival: Arrival,
    mut request: http::Request<B>,
    full: bool,
) -> Result<Observed, ApiError> {
    let arrival = checked(arrival)?;
    drain_body(request.body_mut(), state.body_cap).await?;
    Ok(observe(state, arrival, &request, full))
}

/// Records the request (its body read, its token checked), queues it (and, for the
/// connection's first stored request, the connection), and returns what the views need: with
/// `full`, what a full echo judges too (the User-Agent).
fn observe<B>(
    state: &ApiState,
    arrival: Arrival,
    request: &http::Request<B>,
    full: bool,
) -> Observed {
    let Arrival {
        conn,
        index,
        token,
        earlier_other_probe,
    } = arrival;
    let facts = &conn.analysis(&state.metrics).facts;
    let head = conn.request_head(index, &state.metrics);
    let uri = request.uri();
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |pq| pq.as_str().to_owned());
    let (bucket, bucket_rule) = analysis::bucket_decision(facts, index, earlier_other_probe);
    let record = RequestRecord {
        conn_id: conn.id.clone(),
        index,
        time_unix_ms: now_ms(),
        token,
        method: request.method().as_str().to_owned(),
        path,
        stream_id: head.stream_id,
        bucket,
        pseudo_header_order: head.pseudo_header_order,
        header_order: head.header_order,
        http1: head.http1,
    };
    if index == 1 {
        let _ = conn.first_request.set(FirstRequest {
            method: record.method.clone(),
            path: record.path.clone(),
            stream_id: record.stream_id,
        });
    }
    state.metrics.request(conn.spoken(), record.bucket);
    if let Some(tls) = facts.tls.as_ref() {
        let identity = *conn
            .ledger_identity
            .get_or_init(|| state.ledger.identity_hash(conn.peer.ip(), &tls.voice_id.0));
        state.ledger.tcp(
            identity,
            TcpVisit {
                ip: conn.peer.ip(),
                tls_voice_id: &tls.voice_id.0,
                conn_id: &conn.id,
                token: record.token.as_deref(),
                time_ms: record.time_unix_ms,
                alt_svc: state.alt_svc,
            },
        );
    }
    if conn.queue_once() {
        state.writer.submit_opened(&conn);
    }
    let record = Arc::new(record);
    state.writer.submit(Job::Request(Arc::clone(&record)));
    Observed {
        conn,
        record,
        bucket_rule,
        user_agent: full
            .then(|| request.headers().get(USER_AGENT).cloned())
            .flatten(),
    }
}

/// The peer as the client itself sees it.
fn client_peer(conn: &Connection) -> PeerView {
    PeerView {
        client: PeerPolicy::Full.apply(conn.peer),
        proxy: conn.proxy.map(|proxy| PeerPolicy::Full.apply(proxy)),
    }
}

/// The echo routes: `/api/all` and `/probe/<token>` (the full echo), `/api/tls`, `/api/http2`,
/// `/api/http1` (one layer each) and `/api/clean` (hashes and ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route {
    All,
    Tls,
    Http2,
    Http1,
    Clean,
}

impl Route {
    /// Where the router mounts each echo route (`api::router`); [`Route::of`] matches the same
    /// paths without it.
    pub(super) const MOUNTED: [(&'static str, Self); 6] = [
        ("/api/all", Self::All),
        ("/api/tls", Self::Tls),
        ("/api/http2", Self::Http2),
        ("/api/http1", Self::Http1),
        ("/api/clean", Self::Clean),
        ("/probe/{token}", Self::All),
    ];

    /// The echo route that answers `method` on `path` as the router matches them (`GET`;
    /// `/api/all` and `/probe/<token>` also `POST`); `None` for every request the router
    /// answers otherwise (`HEAD`, a `405`, the fallback).
    pub(super) fn of(method: &Method, path: &str) -> Option<Self> {
        let route = match path {
            "/api/all" => Self::All,
            "/api/tls" => Self::Tls,
            "/api/http2" => Self::Http2,
            "/api/http1" => Self::Http1,
            "/api/clean" => Self::Clean,
            // `/probe/{token}`: one path segment, not empty. The token itself was read when
            // the request arrived (`capture/arrival.rs`).
            _ => match path.strip_prefix("/probe/") {
                Some(token) if !token.is_empty() && !token.contains('/') => Self::All,
                _ => return None,
            },
        };
        let answers = method == Method::GET || (method == Method::POST && route == Self::All);
        answers.then_some(route)
    }

    /// Reads and observes the request and answers it. `/probe/<token>` answers as `/api/all`:
    /// it is the auditor's route, always JSON (its personas send a browser's `Accept`).
    pub(super) async fn answer<B: HttpBody + Unpin>(
        self,
        state: &ApiState,
        arrival: Arrival,
        request: http::Request<B>,
    ) -> Result<Response, ApiError> {
        if self == Self::All {
            // The full echo carries the first PING's answer: it comes one round trip after
            // the request (the PING left with the server's SETTINGS).
            arrival.conn.round_trips.first_ping().await;
        }
        let seen = read_and_observe(state, arrival, request, self == Self::All).await?;
        self.respond(state, &seen)
    }

    /// Whether the route must wait before it answers on `conn` (see [`Route::answer`]).
    pub(super) fn waits(self, conn: &Connection) -> bool {
        self == Self::All && conn.round_trips.awaits_first_ping()
    }

    /// [`Route::answer`] for a request with no body left to read (`is_end_stream`): the same
    /// answer, without a future.
    pub(super) fn answer_bodiless<B>(
        self,
        state: &ApiState,
        arrival: Arrival,
        request: &http::Request<B>,
    ) -> Result<Response, ApiError> {
        let arrival = checked(arrival)?;
        self.respond(state, &observe(state, arrival, request, self == Self::All))
    }

    /// The route's view of the observed request, as JSON.
    fn respond(self, state: &ApiState, seen: &Observed) -> Result<Response, ApiError> {
        let metrics = &state.metrics;
        match self {
            Self::All => json_answer(&seen.full_echo(state), seen.raw_bytes(metrics)),
            Self::Tls => json_answer(&seen.echo(metrics).tls_only(), seen.raw_bytes(metrics)),
            Self::Http2 => json_answer(&seen.echo(metrics).http2_only(), seen.raw_bytes(metrics)),
            Self::Http1 => json_answer(&seen.echo(metrics).http1_only(), ANSWER_BYTES),
            Self::Clean => json_answer(
                &CleanEcho::new(&seen.analysis(metrics).facts, &seen.record),
                ANSWER_BYTES,
            ),
        }
    }

    /// The route in the router, which answers what [`Route::of`] leaves to it: the same
    /// methods, the same answer.
    pub(super) fn methods(self) -> MethodRouter<ApiState> {
        self.on(
            move |State(state): State<ApiState>, Ctx(arrival): Ctx, request: Request| async move {
                self.answer(&state, arrival, request).await
            },
        )
    }

    /// `handler` on the route's methods: `GET`, and `POST` for the full echo.
    fn on<H, T, S>(self, handler: H) -> MethodRouter<S>
    where
        H: Handler<T, S>,
        T: 'static,
        S: Clone + Send + Sync + 'static,
    {
        let methods = get(handler.clone());
        if self == Self::All {
            methods.post(handler)
        } else {
            methods
        }
    }
}

/// The JSON 404 of every unknown path.
#[derive(Debug, Serialize)]
struct NotFound<'a> {
    api_version: u32,
    error: &'static str,
    path: &'a str,
    fingerprint: CleanEcho<'a>,
}

/// The JSON 404 of a path without a route, with the clean summary of `seen`.
pub(super) fn not_found_json(state: &ApiState, seen: &Observed) -> Result<Response, ApiError> {
    let body = NotFound {
        api_version: API_VERSION,
        error: "not_found",
        path: &seen.record.path,
        fingerprint: CleanEcho::new(&seen.analysis(&state.metrics).facts, &seen.record),
    };
    // The same URL answers HTML to browsers (RFC 9110 section 12.5.5).
    Ok((
        StatusCode::NOT_FOUND,
        [(axum::http::header::VARY, "Accept")],
        json_answer(&body, ANSWER_BYTES)?,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use tower::ServiceExt as _;

    use super::*;

    /// What axum's router matches for the echo routes as `api::router` mounts them (their
    /// patterns and methods, with stand-in handlers), against the shortcut's own table: the
    /// shortcut may only take a request the router would give the same route.
    #[tokio::test]
    async fn the_shortcut_takes_only_what_the_router_routes_alike() {
        let mut router = axum::Router::new().fallback(|| async { "fallback" });
        for (pattern, route) in Route::MOUNTED {
            router = router.route(
                pattern,
                route.on(move || async move { format!("{route:?}") }),
            );
        }
        let cases = [
            (Method::GET, "/api/all", Some(Route::All)),
            (Method::POST, "/api/all", Some(Route::All)),
            (Method::GET, "/api/tls", Some(Route::Tls)),
            (Method::GET, "/api/http2", Some(Route::Http2)),
            (Method::GET, "/api/http1", Some(Route::Http1)),
            (Method::GET, "/api/clean", Some(Route::Clean)),
            (Method::GET, "/probe/abc-1.2_3", Some(Route::All)),
            (Method::POST, "/probe/abc", Some(Route::All)),
            (Method::HEAD, "/api/clean", None),
            (Method::POST, "/api/clean", None),
            (Method::PUT, "/api/all", None),
            (Method::GET, "/api/clean/", None),
            (Method::GET, "/API/clean", None),
            (Method::GET, "/api/%63lean", None),
            (Method::GET, "/probe/", None),
            (Method::GET, "/probe/a/b", None),
            (Method::GET, "/", None),
        ];
        for (method, path, expected) in cases {
            assert_eq!(Route::of(&method, path), expected, "{method} {path}");
            if let Some(route) = expected {
                let request = http::Request::builder()
                    .method(method.clone())
                    .uri(path)
                    .body(axum::body::Body::empty())
                    .unwrap();
                let response = router.clone().oneshot(request).await.unwrap();
                let body = response.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(body, format!("{route:?}"), "{method} {path}");
            }
        }
    }

    #[test]
    fn tokens_are_short_and_url_safe() {
        assert!(valid_token("abc-DEF_1.2".to_owned()).is_ok());
        assert!(valid_token(String::new()).is_err());
        assert!(valid_token("a b".to_owned()).is_err());
        assert!(valid_token("x".repeat(129)).is_err());
    }
}
