//! The connection record: what the server knows about one connection, from accept to close —
//! its peer, raw ClientHello records, negotiated session, tapped bytes, requests — and, made once
//! on first use, the analysis of its bytes and each request's head.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use bytes::Bytes;
use exitvoice_protocol::analysis::{
    self, Analysis, ConnectionInput, EchoJson, Follower, LayerError, RequestHead,
};
use exitvoice_protocol::tcp::P0fDb;
use exitvoice_schema::{Failure, FirstRequest, Peer, Spoken};
use time::OffsetDateTime;

use super::round_trip::RoundTripCell;
use super::saved_syn::SavedSyn;
use super::tap::TapBuffer;
use crate::ledger::IdentityHash;
use crate::metrics::Metrics;

/// Why a connection failed, typed, with the server's description.
pub(crate) type Failed = (Failure, String);

/// Distinct probe tokens remembered per connection (see [`Connection::note_token`]).
const DISTINCT_TOKENS_KEPT: usize = 2;

/// Who is at the other end of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Peers {
    /// The client: the TCP peer, or the address a trusted PROXY header names.
    pub(crate) client: SocketAddr,
    /// The load balancer that relayed the connection with a PROXY header (the TCP peer).
    pub(crate) proxy: Option<SocketAddr>,
}

/// What the server knows about one connection; handlers get it through the request's
/// [`super::Arrival`].
#[derive(Debug)]
pub struct Connection {
    /// Connection id, unique per server start.
    pub id: String,
    /// The client: the TCP peer, or the address a trusted PROXY header named.
    pub peer: SocketAddr,
    /// The load balancer that relayed the connection with a PROXY header (the TCP peer then).
    pub proxy: Option<SocketAddr>,
    /// The peer as `--store-peer-ip` lets it be stored.
    pub stored_peer: Peer,
    /// When the connection was accepted.
    pub accepted: OffsetDateTime,
    /// The SYN the kernel kept, or why there is none.
    pub(crate) syn: SavedSyn,
    /// The p0f database that names the SYN's OS (`--p0f-db`).
    p0f_db: Option<Arc<P0fDb>>,
    /// The ClientHello records as received (a partial hello when reading it failed).
    pub hello: Bytes,
    /// The negotiated session, when the handshake completed.
    pub session: Option<Session>,
    /// The decrypted client bytes kept so far.
    pub tap: Arc<TapBuffer>,
    /// What the client's first decrypted bytes were.
    pub(crate) spoken: OnceLock<Spoken>,
    /// Requests started on this connection.
    requests: AtomicU32,
    /// The first distinct probe tokens of the requests so far (at most two).
    tokens: Mutex<Vec<String>>,
    /// The analysis of the hello and the prefix, computed on first use.
    analysis: OnceLock<Analysis>,
    /// Reads each request's head from where the last one ended.
    follower: Mutex<Option<Follower>>,
    /// The connection row was queued for the store (by its first request).
    queued: AtomicBool,
    /// Requests in the row last written for the store (`u32::MAX`: none).
    written_requests: AtomicU32,
    /// The first request, once it was answered.
    pub(crate) first_request: OnceLock<FirstRequest>,
    /// Its round trips, as they are measured.
    pub(crate) round_trips: Arc<RoundTripCell>,
    /// The h3 ledger's hash of its identity (the client's IP and TLS voice), made at its first
    /// request that the ledger noted.
    pub(crate) ledger_identity: OnceLock<IdentityHash>,
}

/// The parameters rustls negotiated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The ALPN protocol the server selected.
    pub alpn: Option<String>,
    /// The TLS version, e.g. `TLSv1.3` (the registry's name: borrowed, not allocated, when known).
    pub tls_version: Option<Cow<'static, str>>,
    /// The cipher suite (IANA name, or hex when unnamed).
    pub cipher: Option<Cow<'static, str>>,
}

impl Connection {
    pub(crate) fn new(
        id: String,
        peers: (Peers, Peer),
        accepted: OffsetDateTime,
        (syn, hello): (SavedSyn, Bytes),
        session: Option<Session>,
        tap: Arc<TapBuffer>,
        p0f_db: Option<Arc<P0fDb>>,
    ) -> Self {
        let (peers, stored_peer) = peers;
        Self {
            id,
            peer: peers.client,
            proxy: peers.proxy,
            stored_peer,
            accepted,
            syn,
            p0f_db,
            hello,
            session,
            tap,
            spoken: OnceLock::new(),
            requests: AtomicU32::new(0),
            tokens: Mutex::new(Vec::new()),
            analysis: OnceLock::new(),
            follower: Mutex::new(None),
            queued: AtomicBool::new(false),
            written_requests: AtomicU32::new(u32::MAX),
            first_request: OnceLock::new(),
            round_trips: Arc::default(),
            ledger_identity: OnceLock::new(),
        }
    }

    /// The connection with the round trips measured into `cell`.
    pub(crate) fn timed(self, cell: Arc<RoundTripCell>) -> Self {
        Self {
            round_trips: cell,
            ..self
        }
    }

    /// What the client spoke after the handshake (`Unknown` until it said something).
    pub fn spoken(&self) -> Spoken {
        self.spoken.get().copied().unwrap_or(Spoken::Unknown)
    }

    /// The SYN's headers as the kernel kept them (empty when there are none).
    pub(crate) fn syn_bytes(&self) -> &[u8] {
        match &self.syn {
            SavedSyn::Saved(bytes) => bytes,
            SavedSyn::Absent(_) => &[],
        }
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

    /// Marks the connection row as queued; `true` only for the first caller.
    pub(crate) fn queue_once(&self) -> bool {
        !self.queued.swap(true, Ordering::Relaxed)
    }

    /// Notes how many requests the row built for the store counts.
    pub(crate) fn note_queued(&self, requests: u32) {
        self.written_requests.store(requests, Ordering::Relaxed);
    }

    /// Whether a row was built and the connection carried no request since. Bytes that arrived
    /// after its last request (SETTINGS acknowledgements, WINDOW_UPDATE, GOAWAY) do not make it
    /// change: the analysis never reads them, and rewriting every connection's row for them
    /// doubled the store's work per connection (docs/benchmarks.md).
    pub(crate) fn unchanged_since_queued(&self) -> bool {
        self.written_requests.load(Ordering::Relaxed) == self.requests()
    }

    /// The connection's analysis: made on the first call, from the bytes captured by then (the
    /// first request's, for a connection that carried one; the ClientHello alone for one that
    /// carried none), and counted once per failing layer.
    pub(crate) fn analysis(&self, metrics: &Metrics) -> &Analysis {
        self.analysis.get_or_init(|| {
            let prefix = self.tap.snapshot();
            let session = self.session.as_ref();
            let analysis = analysis::analyse(&ConnectionInput {
                syn: self.syn.source(),
                p0f_db: self.p0f_db.as_deref(),
                hello: &self.hello,
                // A connection that got no request through (a flood, a scanner, a broken client)
                // is stored with its raw prefix for `exitvoice inspect`, but its HTTP layer is
                // not analysed here: a frame flood's log would cost an attacker nothing and the
                // server a megabyte per connection.
                prefix: if self.requests() == 0 { &[] } else { &prefix },
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

    /// The connection-level parts of a full echo, written once from the bytes the analysis read.
    pub(crate) fn echo_json(&self, metrics: &Metrics) -> &EchoJson {
        let analysis = self.analysis(metrics);
        self.tap
            .with_bytes(|prefix| analysis.json(&self.hello, prefix))
    }

    /// The head of request `index`, read from the client's bytes past the heads read before it
    /// (past the capture's cap too, through the tap's window).
    pub(crate) fn request_head(&self, index: u32, metrics: &Metrics) -> RequestHead {
        let mut follower = self.follower.lock().unwrap_or_else(PoisonError::into_inner);
        let follower = follower.get_or_insert_with(|| Follower::new(self.spoken()));
        let from = follower.offset();
        let (head, error) = self
            .tap
            .follow(from, |bytes| follower.head(bytes, from, index))
            .unwrap_or_default();
        self.tap.release(follower.offset());
        if let Some(LayerError { layer, .. }) = error {
            metrics.parse_error(layer);
        }
        head
    }
}
