//! From captured bytes to facts: the one analysis of a connection, and the small per-request part.
//!
//! [`analyse`] turns a connection's SYN, ClientHello records and decrypted client prefix into its
//! [`ConnectionFacts`] (the TCP voice and p0f signature, TLS fingerprints and voice, ALPN offered / negotiated / spoken, the HTTP/2
//! frame log, Akamai string, voice and browser profile). The live server calls it at most once
//! per connection, when the first request (or the connection's end) needs it, and every request
//! on the connection shares the result; `exitvoice inspect` calls the same function on files.
//! A request then only costs its own head ([`Follower`]) and its bucket ([`bucket`]).
//!
//! Pure functions over bytes: no sockets, no clock, no counters.

use std::sync::{Arc, OnceLock};

use exitvoice_schema::coherence::{self, HelloShape};
use exitvoice_schema::{
    Alpn, Bucket, ConnectionFacts, Families, Http1Echo, Layers, RawJson, Spoken, TcpAbsence,
    TcpAbsent, TcpEcho, TlsEcho,
};

use crate::classify::{self, BucketInput, BucketRule};
use crate::tcp::P0fDb;
use crate::{h1, h2, tcp, tls};

/// A connection's SYN: its IP and TCP headers, or why there are none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SynSource<'a> {
    /// The IP header on, as the kernel kept it (`TCP_SAVED_SYN`) or a capture holds it.
    Saved(&'a [u8]),
    /// Why there is no SYN to read.
    Absent(TcpAbsence),
}

impl Default for SynSource<'_> {
    fn default() -> Self {
        Self::Absent(TcpAbsence::NotCaptured)
    }
}

impl SynSource<'_> {
    /// The SYN's facts, with the OS `db` names for it, or why there are none (a SYN that did
    /// not parse: `malformed`, with the parser's error).
    pub fn facts(self, db: Option<&P0fDb>) -> Result<TcpEcho, TcpAbsent> {
        match self {
            Self::Saved(bytes) => tcp::parse_syn(bytes)
                .map(|syn| TcpEcho {
                    os: db.and_then(|db| db.os(&syn)).map(str::to_owned),
                    ..tcp::echo(&syn)
                })
                .map_err(|error| TcpAbsent {
                    reason: TcpAbsence::Malformed,
                    detail: error.to_string(),
                }),
            Self::Absent(reason) => Err(reason.into()),
        }
    }
}

/// What [`analyse`] reads: one connection's bytes and what the handshake negotiated.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnectionInput<'a> {
    /// The connection's SYN, or why there is none.
    pub syn: SynSource<'a>,
    /// The p0f signature database that names the SYN's OS (`--p0f-db`), if any.
    pub p0f_db: Option<&'a P0fDb>,
    /// The ClientHello records as received (empty when there were none).
    pub hello: &'a [u8],
    /// The client's decrypted bytes from the first one on (empty when it sent none).
    pub prefix: &'a [u8],
    /// The ALPN protocol the server selected, when known.
    pub alpn_negotiated: Option<&'a str>,
    /// The negotiated TLS version, when known.
    pub tls_version: Option<&'a str>,
    /// The negotiated cipher suite, when known.
    pub cipher: Option<&'a str>,
    /// What the client spoke, when the caller sniffed it already (the live server, from the
    /// bytes it peeked, which a capture cap of 0 does not keep); else sniffed from `prefix`.
    pub spoken: Option<Spoken>,
}

/// A layer that did not parse, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerError {
    /// `tcp`, `tls`, `h2` or `h1` (the `/healthz` parse-error keys).
    pub layer: &'static str,
    /// What the parser said.
    pub message: String,
}

/// The analysis of one connection.
#[derive(Clone, Debug, Default)]
pub struct Analysis {
    /// What the bytes say (shared by the connection's requests and its stored row). Without the
    /// parsers' detail: that is [`Analysis::json`]'s, written only for a full echo.
    pub facts: Arc<ConnectionFacts>,
    /// Layers that did not parse (the facts then hold what was parsed before the error).
    pub errors: Vec<LayerError>,
    /// Bytes of the prefix the analysis read (the rest arrived later): the stored row keeps the
    /// number, so the detail can be derived again from the same bytes ([`details`]).
    pub prefix_len: usize,
    /// The connection-level parts of the echo as JSON, written on first use and then copied
    /// into every full echo of the connection's requests.
    json: OnceLock<EchoJson>,
}

/// The connection-level parts of a full echo, serialized once.
#[derive(Clone, Debug)]
pub struct EchoJson {
    /// `tls` (the fingerprints and the ClientHello's detail).
    pub tls: Option<RawJson>,
    /// `http2.detail` (the frame log and what is read from it); `null` without HTTP/2.
    pub http2_detail: RawJson,
    /// The TLS and HTTP/2 families the connection looks like (no User-Agent: that is each
    /// request's), for the coherence of its `/api/all` answers.
    pub families: Families,
}

impl Analysis {
    /// The connection-level parts of the echo as JSON, from the same bytes [`analyse`] read:
    /// `hello` and the first [`Analysis::prefix_len`] bytes of `prefix`.
    pub fn json(&self, hello: &[u8], prefix: &[u8]) -> &EchoJson {
        self.json.get_or_init(|| {
            let prefix = prefix.get(..self.prefix_len).unwrap_or(prefix);
            let details = details(hello, prefix, self.facts.alpn.spoken);
            let families = Families {
                tls: details.tls_shape.and_then(|shape| {
                    coherence::tls_family(&HelloShape {
                        cipher_suites: &shape.cipher_suites,
                        extensions: &shape.extensions,
                        ja4: self.facts.tls.as_ref().map_or("", |tls| tls.ja4.as_str()),
                    })
                }),
                http: self
                    .facts
                    .http2
                    .as_ref()
                    .and_then(|h2| coherence::http_family(&h2.akamai_fingerprint)),
                ua: None,
            };
            EchoJson {
                tls: self.facts.tls.as_ref().map(|tls| {
                    RawJson::of(&TlsEcho {
                        detail: details.tls,
                        ..tls.clone()
                    })
                }),
                http2_detail: details.http2,
                families,
            }
        })
    }
}

/// The parsers' detail of a connection's bytes: the decoded ClientHello, and the HTTP/2 frame
/// log when it spoke h2 (`null` where absent); and the hello's code points for its TLS family.
struct Details {
    tls: RawJson,
    http2: RawJson,
    tls_shape: Option<TlsShape>,
}

/// A ClientHello's cipher suite and extension type code points, wire order, GREASE kept.
struct TlsShape {
    cipher_suites: Vec<u16>,
    extensions: Vec<u16>,
}

impl TlsShape {
    fn of(hello: &tls::ClientHello<'_>) -> Self {
        Self {
            cipher_suites: hello.cipher_suites().values().collect(),
            extensions: hello.extensions().map(|e| e.kind.0).collect(),
        }
    }
}

/// The detail of the same bytes [`analyse`] read, written only for a full echo or a reader.
fn details(hello: &[u8], prefix: &[u8], spoken: Spoken) -> Details {
    let parsed = match hello {
        [] => None,
        _ => tls::parse_client_hello(hello).ok(),
    };
    let tls = parsed.as_ref().map_or_else(RawJson::null, tls::detail);
    let http2 = match spoken {
        Spoken::H2 => {
            let parsed = h2::parse_prefix(prefix).unwrap_or_else(|error| *error.partial);
            h2::detail(&parsed, parsed.first_request())
        }
        _ => RawJson::null(),
    };
    Details {
        tls,
        http2,
        tls_shape: parsed.as_ref().map(TlsShape::of),
    }
}

/// A stored connection's parsed layers, derived again from its ClientHello, the part of its
/// prefix its facts were read from, what it spoke and its SYN's headers: the store keeps the
/// bytes, and its reader asks this function for the rest ([`exitvoice_schema::LayersFn`]).
/// Without stored SYN bytes the TCP layer is left out (the row's facts say why).
pub fn layers(hello: &[u8], prefix: &[u8], spoken: Spoken, syn: Option<&[u8]>) -> Layers {
    let input = ConnectionInput {
        hello,
        prefix,
        spoken: Some(spoken),
        syn: syn.map(SynSource::Saved).unwrap_or_default(),
        ..ConnectionInput::default()
    };
    let facts = Arc::unwrap_or_clone(analyse_with(&input, true).facts);
    let (tcp, tcp_absent) = match syn {
        Some(_) => (facts.tcp, facts.tcp_absent),
        None => (None, None),
    };
    Layers {
        tls: facts.tls,
        tls_error: facts.tls_error,
        http2: facts.http2,
        tcp,
        tcp_absent,
    }
}

/// Analyses one connection's bytes (the parsers' detail left for [`Analysis::json`]).
pub fn analyse(input: &ConnectionInput<'_>) -> Analysis {
    analyse_with(input, false)
}

/// [`analyse`], writing the parsers' detail into the layers from the same parse when `detail`.
fn analyse_with(input: &ConnectionInput<'_>, detail: bool) -> Analysis {
    let mut errors = Vec::new();
    let mut facts = ConnectionFacts {
        tls_version: input.tls_version.map(str::to_owned),
        cipher: input.cipher.map(str::to_owned),
        ..ConnectionFacts::default()
    };
    match input.syn.facts(input.p0f_db) {
        Ok(echo) => facts.tcp = Some(echo),
        Err(absent) => {
            if absent.reason == TcpAbsence::Malformed {
                errors.push(LayerError {
                    layer: "tcp",
                    message: absent.detail.clone(),
                });
            }
            facts.tcp_absent = Some(absent);
        }
    }
    if !input.hello.is_empty() {
        match tls::parse_client_hello(input.hello) {
            Ok(parsed) => {
                let mut echo = tls::echo(&parsed);
                if detail {
                    echo.detail = tls::detail(&parsed);
                }
                facts.tls = Some(echo);
                facts.sni = parsed.server_name().map(str::to_owned);
                facts.alpn.offered = parsed.alpn_protocols();
            }
            Err(error) => {
                facts.tls_error = Some(error.to_string());
                errors.push(LayerError {
                    layer: "tls",
                    message: error.to_string(),
                });
            }
        }
    }
    let spoken = input
        .spoken
        .or_else(|| classify::sniff(input.prefix))
        .unwrap_or(Spoken::Unknown);
    facts.alpn = Alpn {
        offered: std::mem::take(&mut facts.alpn.offered),
        negotiated: input.alpn_negotiated.map(str::to_owned),
        spoken,
    };
    match spoken {
        Spoken::H2 => {
            let parsed = h2::parse_prefix(input.prefix).unwrap_or_else(|error| {
                errors.push(LayerError {
                    layer: "h2",
                    message: error.to_string(),
                });
                *error.partial
            });
            let mut connection = h2::connection(&parsed);
            connection.profile = classify::browser_profile(&parsed).map(|p| p.name.to_owned());
            if detail {
                connection.detail = h2::detail(&parsed, parsed.first_request());
            }
            facts.http2 = Some(connection);
        }
        Spoken::Http1 => {
            if let Err(error) = h1::parse_head(input.prefix) {
                errors.push(LayerError {
                    layer: "h1",
                    message: error.to_string(),
                });
            }
        }
        _ => {}
    }
    Analysis {
        facts: Arc::new(facts),
        errors,
        prefix_len: input.prefix.len(),
        json: OnceLock::new(),
    }
}

/// The bucket of request `index` (1 for the first) on a connection with these facts.
pub fn bucket(facts: &ConnectionFacts, index: u32, earlier_other_probe: bool) -> Option<Bucket> {
    bucket_decision(facts, index, earlier_other_probe).0
}

/// [`bucket`], with the rule that decided it.
pub fn bucket_decision(
    facts: &ConnectionFacts,
    index: u32,
    earlier_other_probe: bool,
) -> (Option<Bucket>, BucketRule) {
    let http2 = facts.http2.as_ref();
    classify::decide(&BucketInput {
        alpn_offered_h2: facts.alpn.offered.iter().any(|p| p == "h2"),
        alpn_negotiated_h2: facts.alpn.negotiated.as_deref() == Some("h2"),
        spoken: facts.alpn.spoken,
        own_preface_and_settings: http2.is_some_and(|h2| h2.own_preface_and_settings),
        request_index: index,
        earlier_other_probe,
        browser_profile: http2.is_some_and(|h2| h2.profile.is_some()),
    })
}

/// What a request's own head said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHead {
    /// HTTP/2 stream id.
    pub stream_id: Option<u32>,
    /// HTTP/2 pseudo-header order.
    pub pseudo_header_order: Vec<String>,
    /// HTTP/2 regular header names, wire order.
    pub header_order: Vec<String>,
    /// The HTTP/1.x head.
    pub http1: Option<Http1Echo>,
}

/// Reads one connection's request heads in arrival order, each from where the last ended.
#[derive(Debug)]
pub enum Follower {
    /// HTTP/2: header blocks through the connection's HPACK decoder.
    H2(h2::HeaderFollower),
    /// HTTP/1.x: heads and their sized bodies.
    H1(h1::HeadFollower),
    /// Nothing to follow.
    None,
}

impl Follower {
    /// A follower for what the client spoke.
    pub fn new(spoken: Spoken) -> Self {
        match spoken {
            Spoken::H2 => Self::H2(h2::HeaderFollower::default()),
            Spoken::Http1 => Self::H1(h1::HeadFollower::default()),
            _ => Self::None,
        }
    }

    /// The stream offset the follower reads from next: the bytes before it are no longer needed.
    pub fn offset(&self) -> usize {
        match self {
            Self::H2(follower) => follower.offset(),
            Self::H1(follower) => follower.offset(),
            Self::None => 0,
        }
    }

    /// The head of request `index` (1 for the first) in `capture` (the connection's decrypted
    /// client bytes from stream offset `base` on). An empty head when it is not there; an error
    /// the first time the HTTP/2 framing or HPACK fails.
    pub fn head(
        &mut self,
        capture: &[u8],
        base: usize,
        index: u32,
    ) -> (RequestHead, Option<LayerError>) {
        match self {
            Self::H2(follower) => match follower.head(capture, base, index) {
                Ok(head) => (
                    head.map(|h| RequestHead {
                        stream_id: Some(h.stream_id),
                        pseudo_header_order: h.pseudo_header_order,
                        header_order: h.header_order,
                        http1: None,
                    })
                    .unwrap_or_default(),
                    None,
                ),
                Err(kind) => (
                    RequestHead::default(),
                    Some(LayerError {
                        layer: "h2",
                        message: kind.to_string(),
                    }),
                ),
            },
            Self::H1(follower) => (
                RequestHead {
                    http1: follower
                        .head(capture, base, index)
                        .map(|head| h1::echo(&head)),
                    ..RequestHead::default()
                },
                None,
            ),
            Self::None => (RequestHead::default(), None),
        }
    }
}
