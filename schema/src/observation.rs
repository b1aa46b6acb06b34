//! Observations: what the echo server saw on one connection or one request, as stored and as
//! served by `GET /api/observations`.

use serde::{Deserialize, Serialize};

use crate::echo::{
    Alpn, Echo, Http1Echo, Http2Connection, Http2Echo, Peer, RequestPosition, Spoken, TlsEcho,
    ECHO_SCHEMA_VERSION,
};
use crate::round_trip::RoundTrips;
use crate::tcp::{TcpAbsence, TcpAbsent, TcpEcho};
use crate::voice::{Bucket, VoiceId};

/// Version of the observation JSON shape. Bump when a field changes meaning or is removed.
pub const OBSERVATION_SCHEMA_VERSION: u32 = 2;

/// One observation as `GET /api/observations` lists it: a request joined with its connection,
/// or a connection that carried no request (`request_index` 0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Connection id, unique per server start (also the file stem under `--record-dir`).
    pub conn_id: String,
    /// 1 for the first request on the connection, 2 for the second, …; 0 for a connection that
    /// carried no request (a failed handshake, a silent client).
    pub request_index: u32,
    /// When it happened, RFC 3339 UTC.
    pub time: String,
    /// The same instant in milliseconds since the Unix epoch (for `since` queries).
    pub time_unix_ms: i64,
    /// The TCP peer, as stored (`--store-peer-ip`).
    pub peer: Peer,
    /// The probe token, when the request carried one.
    pub token: Option<String>,
    /// The server name the ClientHello asked for.
    pub sni: Option<String>,
    /// Why the connection failed (`handshake_timeout`, `tls_alert_received`, …).
    pub failure: Option<Failure>,
    /// The failure as the server described it (`tls_alert_received: UnknownCA`).
    pub failure_detail: Option<String>,
    /// The echo of the request, or the summary of a connection without one.
    pub summary: Summary,
    /// The connection's ClientHello records exactly as received (hex in JSON; only with
    /// `raw=true`).
    #[serde(with = "hex_bytes", default, skip_serializing_if = "Vec::is_empty")]
    pub hello: Vec<u8>,
    /// The connection's decrypted client bytes kept by the tap, up to the capture cap (hex in
    /// JSON; only with `raw=true`).
    #[serde(with = "hex_bytes", default, skip_serializing_if = "Vec::is_empty")]
    pub prefix: Vec<u8>,
}

/// What an observation says: the echo of a request, or a connection's summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Summary {
    /// A request's echo, as it was answered.
    Request(Box<Echo>),
    /// A connection that carried no request.
    Connection(Box<ConnectionSummary>),
}

/// What one connection's captured bytes say, analysed once per connection and shared by every
/// request on it: the connection-level half of every echo, stored once in the connection row.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnectionFacts {
    /// The server name the ClientHello asked for.
    pub sni: Option<String>,
    /// ALPN offered, negotiated and spoken.
    pub alpn: Alpn,
    /// The negotiated TLS version (`TLSv1.3`, …), when the handshake completed.
    pub tls_version: Option<String>,
    /// The negotiated cipher suite (IANA name, or hex when unnamed).
    pub cipher: Option<String>,
    /// TLS fingerprints, when the ClientHello parsed.
    pub tls: Option<TlsEcho>,
    /// Why the ClientHello did not parse, when it did not.
    pub tls_error: Option<String>,
    /// The HTTP/2 connection's fingerprints, when it spoke h2.
    pub http2: Option<Http2Connection>,
    /// What the SYN of the connection said, when there was one to read.
    #[serde(default)]
    pub tcp: Option<TcpEcho>,
    /// Why there is no `tcp`, when there is none.
    #[serde(default)]
    pub tcp_absent: Option<TcpAbsent>,
}

/// What the echo server saw on one connection as a whole: the summary of a connection that
/// carried no request, and `<conn-id>.json`'s facts under `--record-dir`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionSummary {
    /// [`OBSERVATION_SCHEMA_VERSION`] of the server that wrote it.
    pub schema_version: u32,
    /// Connection id (the file stem under `--record-dir`).
    pub conn_id: String,
    /// When the connection was accepted, RFC 3339 UTC.
    pub time: String,
    /// The TCP peer, as stored (`--store-peer-ip`).
    pub peer: Peer,
    /// The server name the ClientHello asked for.
    pub sni: Option<String>,
    /// ALPN offered, negotiated and spoken.
    pub alpn: Alpn,
    /// The negotiated TLS version (`TLSv1.3`, …), when the handshake completed.
    pub tls_version: Option<String>,
    /// The negotiated cipher suite (IANA name, or hex when unnamed).
    pub cipher: Option<String>,
    /// Why the connection failed, if it did.
    pub failure: Option<Failure>,
    /// The failure as the server described it.
    pub failure_detail: Option<String>,
    /// Requests the connection carried.
    pub requests: u32,
    /// Bytes of ClientHello records captured.
    pub hello_len: usize,
    /// Bytes of decrypted client data captured.
    pub prefix_len: usize,
    /// The client sent more decrypted bytes than the capture cap kept.
    pub prefix_truncated: bool,
    /// TLS fingerprints, when the ClientHello parsed.
    pub tls: Option<TlsEcho>,
    /// Why the ClientHello did not parse, when it did not.
    pub tls_error: Option<String>,
    /// Its round trips and their gap, when its handshake completed (absent in rows written
    /// before they were measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<RoundTrips>,
}

/// One connection as the echo server stores it, once: what it was, its facts, and its raw bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectionRow {
    /// Connection id, unique per server start.
    pub conn_id: String,
    /// When it was accepted, ms since the Unix epoch.
    pub time_unix_ms: i64,
    /// The TCP peer, as stored (`--store-peer-ip`).
    pub peer: Peer,
    /// The analysis of its bytes (shared with the live connection, never copied).
    pub facts: std::sync::Arc<ConnectionFacts>,
    /// Why it failed, if it did.
    pub failure: Option<Failure>,
    /// The failure as the server described it.
    pub failure_detail: Option<String>,
    /// Requests it carried so far.
    pub requests: u32,
    /// The client sent more decrypted bytes than the capture cap kept.
    pub prefix_truncated: bool,
    /// Bytes of `prefix` the facts were read from (the rest arrived later): the parsed layers,
    /// which the row then leaves out, are derived again from these bytes on read. `None` for
    /// rows moved from the old `observations` table: their facts keep the layers they had.
    pub analysed_prefix_len: Option<usize>,
    /// The ClientHello records as received.
    pub hello: Vec<u8>,
    /// The decrypted client bytes kept by the tap, up to the capture cap.
    pub prefix: Vec<u8>,
    /// The IP and TCP headers of the connection's SYN, as the kernel kept them (empty: none).
    pub syn: Vec<u8>,
    /// Its round trips and their gap as measured when the row was built; `None` without a
    /// completed handshake.
    pub latency: Option<RoundTrips>,
}

impl ConnectionRow {
    /// The connection's summary, as listed for a connection that carried no request.
    pub fn summary(&self) -> ConnectionSummary {
        let facts = &self.facts;
        ConnectionSummary {
            schema_version: OBSERVATION_SCHEMA_VERSION,
            conn_id: self.conn_id.clone(),
            time: rfc3339_ms(self.time_unix_ms),
            peer: self.peer.clone(),
            sni: facts.sni.clone(),
            alpn: facts.alpn.clone(),
            tls_version: facts.tls_version.clone(),
            cipher: facts.cipher.clone(),
            failure: self.failure,
            failure_detail: self.failure_detail.clone(),
            requests: self.requests,
            hello_len: self.hello.len(),
            prefix_len: self.prefix.len(),
            prefix_truncated: self.prefix_truncated,
            tls: facts.tls.clone(),
            tls_error: facts.tls_error.clone(),
            latency: self.latency.clone(),
        }
    }
}

/// One request as the echo server stores it: only what is its own (a few hundred bytes); the
/// rest is its connection's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// The connection it arrived on.
    pub conn_id: String,
    /// 1 for the first request on the connection, 2 for the second, …
    pub index: u32,
    /// When it arrived, ms since the Unix epoch.
    pub time_unix_ms: i64,
    /// The probe token, when it carried one.
    pub token: Option<String>,
    /// Request method.
    pub method: String,
    /// Path and query as received.
    pub path: String,
    /// HTTP/2 stream id, when the connection spoke h2 and the HEADERS were captured.
    pub stream_id: Option<u32>,
    /// The request's bucket.
    pub bucket: Option<Bucket>,
    /// HTTP/2: this request's pseudo-header order.
    pub pseudo_header_order: Vec<String>,
    /// HTTP/2: this request's regular header names, wire order.
    pub header_order: Vec<String>,
    /// HTTP/1.x: this request's head.
    pub http1: Option<Http1Echo>,
}

/// The clean echo of a request (`/api/clean`, and the summary in every 404 of the echo server):
/// hashes and ids only, borrowed from its connection's facts and its own record.
#[derive(Debug, Serialize)]
pub struct CleanEcho<'a> {
    schema_version: u32,
    ja3_hash: Option<&'a str>,
    ja3n_hash: Option<&'a str>,
    ja4: Option<&'a str>,
    tls_voice_id: Option<&'a VoiceId>,
    order_id: Option<&'a str>,
    akamai_fingerprint_hash: Option<&'a str>,
    http2_voice_id: Option<&'a VoiceId>,
    http1_voice_id: Option<&'a VoiceId>,
    spoken: Spoken,
    stream_id: Option<u32>,
    index: u32,
    bucket: Option<Bucket>,
    profile: Option<&'a str>,
}

impl<'a> CleanEcho<'a> {
    /// The clean echo of `record`, a request on a connection with these `facts`.
    pub fn new(facts: &'a ConnectionFacts, record: &'a RequestRecord) -> Self {
        let tls = facts.tls.as_ref();
        let http2 = facts.http2.as_ref();
        Self {
            schema_version: ECHO_SCHEMA_VERSION,
            ja3_hash: tls.map(|t| t.ja3_hash.as_str()),
            ja3n_hash: tls.map(|t| t.ja3n_hash.as_str()),
            ja4: tls.map(|t| t.ja4.as_str()),
            tls_voice_id: tls.map(|t| &t.voice_id),
            order_id: tls.map(|t| t.order_id.as_str()),
            akamai_fingerprint_hash: http2.map(|h| h.akamai_fingerprint_hash.as_str()),
            http2_voice_id: http2.map(|h| &h.voice_id),
            http1_voice_id: record.http1.as_ref().map(|h| &h.voice_id),
            spoken: facts.alpn.spoken,
            stream_id: record.stream_id,
            index: record.index,
            bucket: record.bucket,
            profile: http2.and_then(|h| h.profile.as_deref()),
        }
    }
}

/// Composes the echo of `request` from its connection's facts: the one place both the live
/// answer and `/api/observations` build it.
pub fn compose_echo(facts: &ConnectionFacts, peer: Peer, request: &RequestRecord) -> Echo {
    let http2 = facts.http2.as_ref().map(|h2| Http2Echo {
        akamai_fingerprint: h2.akamai_fingerprint.clone(),
        akamai_fingerprint_hash: h2.akamai_fingerprint_hash.clone(),
        voice_id: h2.voice_id.clone(),
        pseudo_header_order: request.pseudo_header_order.clone(),
        header_order: request.header_order.clone(),
        detail: h2.detail.clone(),
    });
    Echo {
        schema_version: ECHO_SCHEMA_VERSION,
        time: rfc3339_ms(request.time_unix_ms),
        peer,
        token: request.token.clone(),
        method: request.method.clone(),
        path: request.path.clone(),
        alpn: facts.alpn.clone(),
        tcp: facts.tcp.clone(),
        tcp_absent: facts.tcp_absence(),
        latency: None,
        tls: facts.tls.clone(),
        http2,
        http1: request.http1.clone(),
        request: RequestPosition {
            stream_id: request.stream_id,
            index: request.index,
        },
        bucket: request.bucket,
        profile: facts.http2.as_ref().and_then(|h2| h2.profile.clone()),
        coherence: None,
        geo: None,
    }
}

/// RFC 3339 UTC with milliseconds, from ms since the Unix epoch.
pub fn rfc3339_ms(unix_ms: i64) -> String {
    use time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(unix_ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

/// Why a connection ended without serving a request, or failed: the typed reason (snake_case
/// on the wire, the same words as the `/healthz` counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Failure {
    /// From a `--proxy-protocol-from` source: the first bytes were no valid PROXY protocol
    /// header (no signature, bad syntax or addresses, an unknown version, command or family,
    /// a datagram flow).
    ProxyMalformed,
    /// From a `--proxy-protocol-from` source: the peer closed, the socket failed or the
    /// handshake deadline passed before the PROXY header was complete.
    ProxyTruncated,
    /// From a `--proxy-protocol-from` source: the PROXY header was over the cap (v1: 107 bytes;
    /// v2: 1 KiB).
    ProxyTooLarge,
    /// From a `--proxy-protocol-from` source: a PROXY header without a client address (v2
    /// `LOCAL` or `UNSPEC`/`UNIX` family, v1 `UNKNOWN`), such as a load balancer's health check.
    ProxyLocal,
    /// A PROXY protocol header from a source not in `--proxy-protocol-from`: refused, never
    /// trusted.
    ProxyUntrusted,
    /// The first bytes were not a TLS ClientHello.
    HelloInvalid,
    /// The ClientHello was over the cap.
    HelloTooLarge,
    /// The peer closed before a whole ClientHello.
    HelloClosed,
    /// Reading the ClientHello failed on the socket.
    HelloIo,
    /// No whole ClientHello before the handshake deadline.
    HelloTimeout,
    /// The TLS handshake did not finish before the deadline.
    HandshakeTimeout,
    /// The client sent an alert during the handshake (most often: our certificate refused).
    TlsAlertReceived,
    /// rustls rejected the handshake.
    TlsError,
    /// The peer closed during the handshake.
    TlsClosed,
    /// The socket failed during the handshake.
    TlsIo,
    /// The server stopped before the connection got anywhere.
    Shutdown,
    /// The client closed before sending a request.
    NoRequest,
    /// Reading the decrypted stream failed.
    ReadError,
    /// No request before the idle timeout.
    IdleTimeout,
    /// No complete request head before the request deadline.
    RequestTimeout,
    /// hyper reported a protocol or I/O error before any request.
    HttpError,
}

impl Failure {
    /// The snake_case name, as on the wire and in the counters.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ProxyMalformed => "proxy_malformed",
            Self::ProxyTruncated => "proxy_truncated",
            Self::ProxyTooLarge => "proxy_too_large",
            Self::ProxyLocal => "proxy_local",
            Self::ProxyUntrusted => "proxy_untrusted",
            Self::HelloInvalid => "hello_invalid",
            Self::HelloTooLarge => "hello_too_large",
            Self::HelloClosed => "hello_closed",
            Self::HelloIo => "hello_io",
            Self::HelloTimeout => "hello_timeout",
            Self::HandshakeTimeout => "handshake_timeout",
            Self::TlsAlertReceived => "tls_alert_received",
            Self::TlsError => "tls_error",
            Self::TlsClosed => "tls_closed",
            Self::TlsIo => "tls_io",
            Self::Shutdown => "shutdown",
            Self::NoRequest => "no_request",
            Self::ReadError => "read_error",
            Self::IdleTimeout => "idle_timeout",
            Self::RequestTimeout => "request_timeout",
            Self::HttpError => "http_error",
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The first request of a connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirstRequest {
    /// Request method.
    pub method: String,
    /// Path and query as received.
    pub path: String,
    /// HTTP/2 stream id, when the connection spoke h2.
    pub stream_id: Option<u32>,
}

/// `<conn-id>.json` under `--record-dir`: the provenance of one recorded connection, in the flat
/// format of the captures/ recorder (`tests/tools/record.py`), so captures/ can be recorded by
/// the echo server itself. Beside it: `<conn-id>.hello.bin` (the ClientHello records as
/// received) and `<conn-id>.prefix.bin` (the decrypted client bytes, up to the capture cap).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionRecord {
    /// Connection id (the file stem).
    pub conn_id: String,
    /// When the connection was accepted, RFC 3339 UTC.
    pub time: String,
    /// The TCP peer as `ip:port` (`[ip]:port` for IPv6).
    pub peer: String,
    /// The server name the ClientHello asked for.
    pub sni: Option<String>,
    /// ALPN protocol names offered, wire order.
    pub alpn_offered: Vec<String>,
    /// The ALPN protocol the server selected.
    pub alpn_negotiated: Option<String>,
    /// What the client's first decrypted bytes were.
    pub spoken: Spoken,
    /// The negotiated TLS version (`TLSv1.3`, …).
    pub tls_version: Option<String>,
    /// The negotiated cipher suite (IANA name).
    pub cipher: Option<String>,
    /// The first request, when there was one.
    pub first_request: Option<FirstRequest>,
    /// Requests the connection carried.
    pub requests: u32,
    /// Bytes in `<conn-id>.hello.bin`.
    pub hello_len: usize,
    /// Bytes in `<conn-id>.prefix.bin`.
    pub prefix_len: usize,
    /// The client sent more than the capture cap kept.
    pub prefix_truncated: bool,
    /// Why the connection failed, if it did.
    pub failure: Option<String>,
    /// What recorded it: `exitvoice/<version> serve --record-dir`.
    pub recorder: String,
}

/// An observation read back from the store, with its row id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredObservation {
    /// Row id, increasing in insertion order.
    pub id: i64,
    /// The observation.
    #[serde(flatten)]
    pub observation: Observation,
}

/// A connection's parsed layers, derived from its bytes: what a connection row does not store
/// (its ClientHello and prefix say it again) and the store's reader asks the parsers for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layers {
    /// TLS fingerprints and the decoded ClientHello, when it parsed.
    pub tls: Option<TlsEcho>,
    /// Why the ClientHello did not parse, when it did not.
    pub tls_error: Option<String>,
    /// The HTTP/2 fingerprints and frame log, when the connection spoke h2.
    pub http2: Option<Http2Connection>,
    /// What the SYN said, when its bytes were stored and parsed.
    pub tcp: Option<TcpEcho>,
    /// Why there is no `tcp`: the SYN did not parse (when its bytes were stored).
    pub tcp_absent: Option<TcpAbsent>,
}

/// Derives [`Layers`] from a connection's ClientHello records, the prefix bytes its facts were
/// read from, what it spoke and its SYN's headers (when stored): the protocol crate's analysis
/// (`exitvoice_protocol::analysis::layers`), which this crate does not have.
pub type LayersFn = fn(hello: &[u8], prefix: &[u8], spoken: Spoken, syn: Option<&[u8]>) -> Layers;

impl ConnectionFacts {
    /// The facts as a connection row stores them: only what the bytes cannot say again (the
    /// handshake's outcome, what was spoken). The layers are derived again on read.
    pub fn stored(&self) -> StoredFacts<'_> {
        StoredFacts {
            sni: self.sni.as_deref(),
            alpn: &self.alpn,
            tls_version: self.tls_version.as_deref(),
            cipher: self.cipher.as_deref(),
            tcp_absent: self.tcp_absent.as_ref().filter(|_| self.tcp.is_none()),
        }
    }

    /// Why there is no `tcp`: as recorded, or, on a row of a server that read no SYN, that
    /// none was captured. `None` when there is a `tcp`.
    pub fn tcp_absence(&self) -> Option<TcpAbsent> {
        match (&self.tcp, &self.tcp_absent) {
            (Some(_), _) => None,
            (None, Some(absent)) => Some(absent.clone()),
            (None, None) => Some(TcpAbsence::NotCaptured.into()),
        }
    }

    /// Puts `layers` in. A SYN's layer replaces the stored absence only when the row kept the
    /// SYN's bytes (`layers` then says `tcp` or why it did not parse).
    pub fn set_layers(&mut self, layers: Layers) {
        self.tls = layers.tls;
        self.tls_error = layers.tls_error;
        self.http2 = layers.http2;
        if layers.tcp.is_some() || layers.tcp_absent.is_some() {
            self.tcp = layers.tcp;
            self.tcp_absent = layers.tcp_absent;
        }
    }
}

/// [`ConnectionFacts`] as a connection row stores them (JSON in the `facts` column; read back
/// as `ConnectionFacts`, the layers then empty until derived).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct StoredFacts<'a> {
    sni: Option<&'a str>,
    alpn: &'a Alpn,
    tls_version: Option<&'a str>,
    cipher: Option<&'a str>,
    /// Why the connection has no SYN stored (its bytes are, when it has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    tcp_absent: Option<&'a TcpAbsent>,
}

/// A query over stored observations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservationQuery {
    /// Only observations stored under this probe token.
    pub token: Option<String>,
    /// Only observations at or after this instant (ms since the Unix epoch).
    pub since_unix_ms: Option<i64>,
    /// At most this many, oldest first.
    pub limit: u32,
    /// Read the raw ClientHello and prefix bytes too.
    pub raw: bool,
}

/// Lowercase hex for byte fields, so the JSON stays readable and `exitvoice inspect` can take it
/// (`#[serde(with = "exitvoice_schema::observation::hex_bytes")]`).
pub mod hex_bytes {
    use serde::{de, Deserialize, Deserializer, Serializer};

    const DIGITS: &[u8; 16] = b"0123456789abcdef";

    /// Writes `bytes` as lowercase hex.
    ///
    /// # Errors
    /// The serializer's.
    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = String::with_capacity(bytes.len() * 2);
        for byte in bytes {
            out.push(char::from(DIGITS[usize::from(byte >> 4)]));
            out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
        }
        serializer.serialize_str(&out)
    }

    /// Reads hex (either case) into bytes.
    ///
    /// # Errors
    /// Not a string, an odd number of digits, or a character that is not a hex digit.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(de::Error::custom("invalid hex digit")),
        };
        let digits = text.as_bytes();
        if digits.len() % 2 != 0 {
            return Err(de::Error::custom("odd number of hex digits"));
        }
        digits
            .chunks_exact(2)
            .map(|pair| match pair {
                [high, low] => Ok(nibble(*high)? << 4 | nibble(*low)?),
                _ => Err(de::Error::custom("odd number of hex digits")),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The store writes `as_str` and reads with serde: both must spell every reason alike.
    #[test]
    fn failure_names_are_the_same_both_ways() {
        let all = [
            Failure::ProxyMalformed,
            Failure::ProxyTruncated,
            Failure::ProxyTooLarge,
            Failure::ProxyLocal,
            Failure::ProxyUntrusted,
            Failure::HelloInvalid,
            Failure::HelloTooLarge,
            Failure::HelloClosed,
            Failure::HelloIo,
            Failure::HelloTimeout,
            Failure::HandshakeTimeout,
            Failure::TlsAlertReceived,
            Failure::TlsError,
            Failure::TlsClosed,
            Failure::TlsIo,
            Failure::Shutdown,
            Failure::NoRequest,
            Failure::ReadError,
            Failure::IdleTimeout,
            Failure::RequestTimeout,
            Failure::HttpError,
        ];
        for failure in all {
            let wire = serde_json::to_value(failure).expect("serialize");
            assert_eq!(wire, failure.as_str(), "{failure:?}");
            let back: Failure = serde_json::from_value(wire).expect("deserialize");
            assert_eq!(back, failure);
        }
    }

    #[test]
    fn raw_bytes_round_trip_as_hex() {
        let observation = Observation {
            conn_id: "c1".to_owned(),
            request_index: 0,
            time: "2026-01-01T00:00:00Z".to_owned(),
            time_unix_ms: 1_767_225_600_000,
            peer: Peer {
                ip: "::1".to_owned(),
                port: 4242,
            },
            token: None,
            sni: None,
            failure: Some(Failure::HandshakeTimeout),
            failure_detail: Some("handshake_timeout: too slow".to_owned()),
            summary: Summary::Connection(Box::new(ConnectionSummary {
                schema_version: OBSERVATION_SCHEMA_VERSION,
                conn_id: "c1".to_owned(),
                time: "2026-01-01T00:00:00Z".to_owned(),
                peer: Peer {
                    ip: "::1".to_owned(),
                    port: 4242,
                },
                sni: None,
                alpn: Alpn::default(),
                tls_version: None,
                cipher: None,
                failure: Some(Failure::HandshakeTimeout),
                failure_detail: None,
                requests: 0,
                hello_len: 4,
                prefix_len: 0,
                prefix_truncated: false,
                tls: None,
                tls_error: None,
                latency: None,
            })),
            hello: vec![0x16, 0x03, 0x01, 0xab],
            prefix: Vec::new(),
        };
        let json = serde_json::to_value(&observation).expect("serialize");
        assert_eq!(json["hello"], "160301ab");
        assert!(json.get("prefix").is_none(), "empty bytes are left out");
        let back: Observation = serde_json::from_value(json.clone()).expect("deserialize");
        assert_eq!(back, observation);
        for bad in ["abc", "zz"] {
            let mut json = json.clone();
            json["hello"] = serde_json::json!(bad);
            assert!(serde_json::from_value::<Observation>(json).is_err());
        }
    }
}
