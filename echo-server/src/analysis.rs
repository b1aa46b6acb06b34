//! From captured bytes to what the server says about them: the echo of one request and the
//! summary of one connection. This is where parsing happens — lazily, in the handler or the
//! writer, never on the accept path — and where parse errors are counted.

use exitvoice_schema::{
    Alpn, ConnectionSummary, Echo, Observation, Peer, RequestPosition, TlsEcho,
    ECHO_SCHEMA_VERSION, OBSERVATION_SCHEMA_VERSION,
};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::capture::Connection;
use crate::metrics::Metrics;

/// The server software as it names itself in records.
pub(crate) const SERVER: &str = concat!("exitvoice/", env!("CARGO_PKG_VERSION"));

/// What the ClientHello says, parsed once per connection.
#[derive(Clone, Debug, Default)]
pub(crate) struct HelloFacts {
    /// Fingerprints, when the hello parsed.
    pub(crate) tls: Option<TlsEcho>,
    /// Server name indication.
    pub(crate) sni: Option<String>,
    /// ALPN protocol names offered, wire order.
    pub(crate) alpn_offered: Vec<String>,
    /// Why the hello did not parse.
    pub(crate) error: Option<String>,
}

/// The request facts a handler passes in.
#[derive(Clone, Debug)]
pub(crate) struct RequestFacts {
    /// Request method.
    pub(crate) method: String,
    /// Path and query as received.
    pub(crate) path: String,
    /// Probe token, if the request carried one.
    pub(crate) token: Option<String>,
    /// Index of the request on its connection (1 for the first).
    pub(crate) index: u32,
}

/// The parsed hello of `conn`, parsing it on first use (and counting a parse error once).
pub(crate) fn hello_facts<'a>(conn: &'a Connection, metrics: &Metrics) -> &'a HelloFacts {
    conn.facts.get_or_init(|| parse_hello(&conn.hello, metrics))
}

fn parse_hello(hello: &[u8], metrics: &Metrics) -> HelloFacts {
    if hello.is_empty() {
        return HelloFacts::default();
    }
    let _ = metrics;
    HelloFacts::default()
}

/// RFC 3339 UTC, to the millisecond precision of the clock.
pub(crate) fn rfc3339(time: OffsetDateTime) -> String {
    time.format(&Rfc3339).unwrap_or_default()
}

fn unix_ms(time: OffsetDateTime) -> i64 {
    i64::try_from(time.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

fn peer(conn: &Connection) -> Peer {
    Peer {
        ip: conn.peer.ip().to_string(),
        port: conn.peer.port(),
    }
}

fn alpn(conn: &Connection, facts: &HelloFacts) -> Alpn {
    Alpn {
        offered: facts.alpn_offered.clone(),
        negotiated: conn.session.as_ref().and_then(|s| s.alpn.clone()),
        spoken: conn.spoken(),
    }
}

/// The echo of one request on `conn`.
pub(crate) fn request_echo(conn: &Connection, metrics: &Metrics, request: &RequestFacts) -> Echo {
    let facts = hello_facts(conn, metrics);
    Echo {
        schema_version: ECHO_SCHEMA_VERSION,
        time: rfc3339(OffsetDateTime::now_utc()),
        peer: peer(conn),
        token: request.token.clone(),
        method: request.method.clone(),
        path: request.path.clone(),
        alpn: alpn(conn, facts),
        tls: facts.tls.clone(),
        http2: None,
        http1: None,
        request: RequestPosition {
            stream_id: None,
            index: request.index,
        },
        bucket: None,
        profile: None,
    }
}

/// The observation row of one request, with the raw bytes as captured when it was answered.
pub(crate) fn request_observation(
    conn: &Connection,
    echo: &Echo,
    metrics: &Metrics,
) -> Observation {
    let now = OffsetDateTime::now_utc();
    Observation {
        conn_id: conn.id.clone(),
        request_index: echo.request.index,
        time: echo.time.clone(),
        time_unix_ms: unix_ms(now),
        peer: echo.peer.clone(),
        token: echo.token.clone(),
        sni: hello_facts(conn, metrics).sni.clone(),
        failure: None,
        summary: serde_json::to_value(echo).unwrap_or_default(),
        hello: conn.hello.to_vec(),
        prefix: conn.tap.snapshot().to_vec(),
    }
}

/// The summary of a whole connection, as stored for connections without a request and written
/// as `<conn-id>.json` under `--record-dir`.
pub(crate) fn connection_summary(
    conn: &Connection,
    metrics: &Metrics,
    failure: Option<&str>,
) -> serde_json::Value {
    let facts = hello_facts(conn, metrics);
    let summary = ConnectionSummary {
        schema_version: OBSERVATION_SCHEMA_VERSION,
        conn_id: conn.id.clone(),
        time: rfc3339(conn.accepted),
        peer: peer(conn),
        server: SERVER.to_owned(),
        sni: facts.sni.clone(),
        alpn: alpn(conn, facts),
        tls_version: conn.session.as_ref().and_then(|s| s.tls_version.clone()),
        failure: failure.map(str::to_owned),
        requests: conn.requests(),
        hello_len: conn.hello.len(),
        prefix_len: conn.tap.snapshot().len(),
        prefix_truncated: conn.tap.truncated(),
        tls: facts.tls.clone(),
        tls_error: facts.error.clone(),
    };
    serde_json::to_value(summary).unwrap_or_default()
}

/// The observation row of a connection that carried no request.
pub(crate) fn connection_observation(
    conn: &Connection,
    metrics: &Metrics,
    failure: Option<String>,
    summary: serde_json::Value,
) -> Observation {
    Observation {
        conn_id: conn.id.clone(),
        request_index: 0,
        time: rfc3339(conn.accepted),
        time_unix_ms: unix_ms(conn.accepted),
        peer: peer(conn),
        token: None,
        sni: hello_facts(conn, metrics).sni.clone(),
        failure,
        summary,
        hello: conn.hello.to_vec(),
        prefix: conn.tap.snapshot().to_vec(),
    }
}
