//! The HTTP API: routes, the per-connection capture extractor, JSON echo, errors as responses.
//!
//! Every route answers JSON, except for browsers at `/` (or any path without a route): a client
//! whose `Accept` prefers `text/html` gets the fingerprint page of its echo there. `/api/…` and
//! `/probe/…` are always JSON (the auditor's personas send a browser's `Accept`). The echo routes describe the request's own connection, which the
//! connection task hands in with the request ([`crate::capture::Arrival`], which carries the
//! [`crate::capture::Connection`]; through the router, as the request's extension), and queue
//! the request's observation. `/healthz` and
//! `/api/observations` only read.
//!
//! | route | answer |
//! |---|---|
//! | `GET /api/all` (also `POST`) | the full [`exitvoice_schema::Echo`] (`schema_version` 1): `time`, `peer {ip, port}` (plus `proxy {ip, port}`, the load balancer, when a `--proxy-protocol-from` source relayed the connection: `ip`/`port` are then the client's from its PROXY header), `token`, `method`, `path`, `alpn {offered, negotiated, spoken}`, `tls {ja3, ja3_hash, ja3n, ja3n_hash, ja4, ja4_r, ja4_o, ja4_ro, voice_id, order_id, resumed, detail}`, `http2 {akamai_fingerprint, akamai_fingerprint_hash, voice_id, pseudo_header_order, header_order, detail}` or `http1 {request_line, header_order, voice_id}`, `request {stream_id, index}`, `bucket` (`A`–`D` or null), `profile`, `latency {tcp_rtt_us, tcp_min_rtt_us, tcp_rttvar_us, tls_rtt_us, h2_ping_rtt_us, h2_ping_samples_us, app_rtt_us, gap_us, gap_ratio, verdict, reason}` (each measure absent when not measured; the answer to a connection's first request waits for its first PINGs' answers; docs/latency.md), `coherence {score, reasons, tls_family, http_family, ua_family}` (`exitvoice_schema::coherence`; each family `{name, exact}`, `ua_family` omitted when the User-Agent names none) |
//! | `GET /probe/<token>`, any echo route with `?token=` | the same, stored under the token (1–128 of `A-Za-z0-9-_.`) |
//! | `GET /api/tls` | `schema_version, time, peer, alpn, tls, request` |
//! | `GET /api/http2` | `schema_version, time, alpn, http2, request, bucket, profile` |
//! | `GET /api/http1` | `schema_version, time, alpn, http1, request, bucket` |
//! | `GET /api/clean` | hashes and ids only: `ja3_hash, ja3n_hash, ja4, tls_voice_id, order_id, akamai_fingerprint_hash, http2_voice_id, http1_voice_id, spoken, stream_id, index, bucket, profile` |
//! | any other path | 404 `{api_version, error: "not_found", path, fingerprint: <clean>}` |
//! | `GET /` and any other path without a route (not under `/api/` or `/probe/`), when `Accept` prefers `text/html` | the fingerprint page of the request's echo (`page.rs`; 404 on paths other than `/`) |
//! | `GET /assets/exitvoice.css`, `/assets/copy.js` | the page's stylesheet and copy-button script (not observed) |
//! | `GET /api/observations?token=&since=&limit=&raw=` | `{schema_version, observations: [StoredObservation]}`, oldest first; `since` is RFC 3339 or Unix ms; `limit` ≤ 1000 (default 100); `hello`/`prefix` hex only with `raw=true`; the bearer `--api-token` (every row) or a capability `token` of ≥ 16 characters of `A-Za-z0-9-_` (its own rows only); else 403 (401 with `--api-token`) |
//! | `GET /api/ledger?token=` | the h3 downgrade ledger's identities whose TCP requests carried the token: `{api_version, token, identities: [{client_ip, tls_voice_id, tokens, first_tcp_ms, last_tcp_ms, tcp_requests, tcp_connections, alt_svc_first_ms, tcp_connections_after_alt_svc, first_h3_ms, h3_requests, quic_src_ip, quic_voice_id, verdict, why}]}` (`ledger.rs`) |
//! | `GET /healthz` | `{api_version, status ("ok" / "degraded" while the store refuses writes), server, uptime_s, queue {depth, capacity, bytes}, connections {open, accepted, rejected_max_connections, rejected_per_ip, rejected_rate, rejected_penalty, strikes, penalties, idle_closed, request_timeouts, captures_truncated, heads_unfollowed}, handshakes {completed, failures {reason: n}}, parse_errors {tls/h2/h1: n}, quic {event: n}, requests, observations {queued, queue_drops, written, write_failures, store_failing, record_failures}}` |
//!
//! Errors are `{api_version, error, message}` with 400 (`bad_token`, `bad_query`), 401
//! (`unauthorized`), 403 (`forbidden`), 429 (`rate_limited`), 413 (`body_too_large`) or 503 (`store_unavailable`).
//!
//! Each file imports only files below it in this list: this one (the router and the shortcut),
//! `fallback.rs` (paths without a route), `page.rs` (the fingerprint page), `ledger.rs`,
//! `observations.rs`, `quic_echo.rs`, `health.rs`, `echo.rs` (the echo routes), `error.rs`,
//! `state.rs` (what the handlers share).

mod echo;
mod error;
mod fallback;
mod health;
mod ledger;
mod observations;
mod page;
mod quic_echo;
mod state;

use std::sync::Arc;

use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use futures_util::future::Either;
use hyper::body::{Body as _, Incoming};
use tower::ServiceExt as _;

use crate::capture::{Answer, Arrival, Responder};

use echo::Route;
pub use error::ApiError;
pub use state::API_VERSION;
pub(crate) use state::{ApiShared, ApiState};

/// The HTTP/3 echo, for the UDP listener (`quic_echo.rs`): answers, and queues each request's
/// observation on `writer` with the peer address `store_peer_ip` allows.
pub(crate) fn h3_answer(
    state: ApiState,
    store_peer_ip: exitvoice_schema::PeerPolicy,
) -> crate::capture::quic::Answer {
    Arc::new(move |conn, request| quic_echo::answer(&state, store_peer_ip, conn, request))
}

/// The API as the connections call it ([`Responder`]): a plain `GET` (or `POST`) of an echo
/// route goes straight to its handler, every other request through the router, which holds
/// every route (the echo routes too: `HEAD`, other methods and their `405`s are its).
/// The echo routes are the server's hot path: the router's matching, its boxed services and
/// body, and the extension the handler takes back out cost 4,200 instructions an HTTP/1.1
/// keep-alive `/api/clean` request when every request went through it (callgrind,
/// docs/benchmarks.md); a request with no body is also answered before the call returns, with
/// no future to box.
pub(crate) struct Api {
    router: Router,
    state: ApiState,
}

impl Api {
    pub(crate) fn new(state: ApiState) -> Self {
        Self {
            router: router(Arc::clone(&state)),
            state,
        }
    }
}

impl Responder for Api {
    fn answer(&self, mut request: http::Request<Incoming>, arrival: Arrival) -> Answer {
        if let Some(route) = Route::of(request.method(), request.uri().path()) {
            // A request with no body (a `GET`) is answered here and now: no future to box.
            if request.body().is_end_stream() && !route.waits(&arrival.conn) {
                let response = route
                    .answer_bodiless(&self.state, arrival, &request)
                    .unwrap_or_else(IntoResponse::into_response);
                return Either::Left(std::future::ready(response));
            }
            let state = Arc::clone(&self.state);
            return Either::Right(Box::pin(async move {
                route
                    .answer(&state, arrival, request)
                    .await
                    .unwrap_or_else(IntoResponse::into_response)
            }));
        }
        request.extensions_mut().insert(arrival);
        let router = self.router.clone();
        Either::Right(Box::pin(async move {
            match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }))
    }
}

/// All routes.
fn router(state: ApiState) -> Router {
    let mut router = Router::new();
    for (pattern, route) in Route::MOUNTED {
        router = router.route(pattern, route.methods());
    }
    router
        .route("/api/observations", get(observations::list))
        .route("/api/ledger", get(ledger::by_token))
        .route("/healthz", get(health::healthz))
        .merge(exitvoice_pages::assets::router())
        .fallback(fallback::not_found)
        .with_state(state)
}
