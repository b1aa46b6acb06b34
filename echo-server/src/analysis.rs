//! From captured bytes to what the server says about them: the echo of one request and the
//! summary of one connection. This is where parsing happens — lazily, in the handler or the
//! writer, never on the accept path — and where parse errors are counted.

use exitvoice_schema::{
    Alpn, ConnectionRecord, ConnectionSummary, Echo, FirstRequest, Http2Echo, Observation, Peer,
    RequestPosition, Spoken, TlsEcho, ECHO_SCHEMA_VERSION, OBSERVATION_SCHEMA_VERSION,
};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::capture::Connection;
use crate::classify::{self, BucketInput};
use crate::metrics::Metrics;
use crate::{h1, h2, tls};

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
    /// An earlier request on the connection carried another probe token.
    pub(crate) earlier_other_probe: bool,
}

/// The parsed hello of `conn`, parsing it on first use (and counting a parse error once).
pub(crate) fn hello_facts<'a>(conn: &'a Connection, metrics: &Metrics) -> &'a HelloFacts {
    conn.facts.get_or_init(|| parse_hello(&conn.hello, metrics))
}

fn parse_hello(hello: &[u8], metrics: &Metrics) -> HelloFacts {
    if hello.is_empty() {
        return HelloFacts::default();
    }
    match tls::parse_client_hello(hello) {
        Ok(parsed) => HelloFacts {
            tls: Some(tls::echo(&parsed)),
            sni: parsed.server_name().map(str::to_owned),
            alpn_offered: parsed.alpn_protocols(),
            error: None,
        },
        Err(error) => {
            metrics.parse_error("tls");
            HelloFacts {
                error: Some(error.to_string()),
                ..HelloFacts::default()
            }
        }
    }
}

/// The HTTP/2 layer of one request: the connection's prefix parsed as far as it goes, this
/// request's stream id, and the facts the bucket needs.
struct H2Facts {
    echo: Http2Echo,
    stream_id: Option<u32>,
    own_settings: bool,
    profile: Option<String>,
}

/// Parses the tapped HTTP/2 prefix and finds request `index` (1-based) in it: the `index`-th
/// stream opened by a HEADERS frame, in arrival order (hyper hands requests to the service in
/// that order; later header blocks on an already open stream are trailers and skipped).
fn h2_facts(prefix: &[u8], index: u32, metrics: &Metrics) -> H2Facts {
    let parsed = h2::parse_prefix(prefix).unwrap_or_else(|error| {
        // Every request re-parses its connection's prefix: count the error once, on the first.
        if index == 1 {
            metrics.parse_error("h2");
        }
        *error.partial
    });
    let wanted = usize::try_from(index).unwrap_or(usize::MAX);
    let mut opened: Vec<u32> = Vec::new();
    let mut found = None;
    for (at, request) in parsed.requests.iter().enumerate() {
        if opened.contains(&request.stream_id) {
            continue;
        }
        opened.push(request.stream_id);
        if opened.len() == wanted {
            found = Some((at, request.stream_id));
            break;
        }
    }
    // Past the decoded header blocks (capture cap): the fingerprints are still the
    // connection's, the header orders empty.
    let at = found.map_or(parsed.requests.len(), |(at, _)| at);
    H2Facts {
        echo: h2::echo(&parsed, at),
        stream_id: found.map(|(_, stream_id)| stream_id),
        own_settings: parsed.settings().is_some(),
        profile: classify::browser_profile(&parsed).map(|p| p.name.to_owned()),
    }
}

/// The bytes from the `index`-th (1-based) HTTP/1.x request head of a keep-alive connection on:
/// skips each earlier head and its `Content-Length` body (RFC 9112 section 6.3). `None` when the
/// tapped bytes end first or an earlier request had a chunked (or otherwise unsized) body.
fn nth_http1_head(prefix: &[u8], index: u32) -> Option<&[u8]> {
    let mut rest = prefix;
    for _ in 1..index {
        let head_len = rest.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        let head = h1::parse_head(rest.get(..head_len)?).ok()?;
        let mut body_len = 0_usize;
        for (name, value) in &head.headers {
            if name.eq_ignore_ascii_case("transfer-encoding") {
                return None;
            }
            if name.eq_ignore_ascii_case("content-length") {
                body_len = value.trim().parse().ok()?;
            }
        }
        rest = rest.get(head_len.checked_add(body_len)?..)?;
    }
    (!rest.is_empty()).then_some(rest)
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
    let alpn = alpn(conn, facts);
    let prefix = conn.tap.snapshot();
    let (mut http1, mut http2, mut stream_id, mut own_settings, mut profile) =
        (None, None, None, false, None);
    match alpn.spoken {
        Spoken::H2 => {
            let h2 = h2_facts(&prefix, request.index, metrics);
            http2 = Some(h2.echo);
            stream_id = h2.stream_id;
            own_settings = h2.own_settings;
            profile = h2.profile;
        }
        Spoken::Http1 => match nth_http1_head(&prefix, request.index).map(h1::parse_head) {
            Some(Ok(head)) => http1 = Some(h1::echo(&head)),
            Some(Err(_)) => metrics.parse_error("h1"),
            // Past the capture, or after a chunked body: not in the tapped bytes.
            None => {}
        },
        _ => {}
    }
    let bucket = classify::bucket(&BucketInput {
        alpn_offered_h2: alpn.offered.iter().any(|p| p == "h2"),
        alpn_negotiated_h2: alpn.negotiated.as_deref() == Some("h2"),
        spoken: alpn.spoken,
        own_preface_and_settings: own_settings,
        request_index: request.index,
        earlier_other_probe: request.earlier_other_probe,
        browser_profile: profile.is_some(),
    });
    if request.index == 1 {
        let _ = conn.first_request.set(FirstRequest {
            method: request.method.clone(),
            path: request.path.clone(),
            stream_id,
        });
    }
    Echo {
        schema_version: ECHO_SCHEMA_VERSION,
        time: rfc3339(OffsetDateTime::now_utc()),
        peer: peer(conn),
        token: request.token.clone(),
        method: request.method.clone(),
        path: request.path.clone(),
        alpn,
        tls: facts.tls.clone(),
        http2,
        http1,
        request: RequestPosition {
            stream_id,
            index: request.index,
        },
        bucket,
        profile,
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
        cipher: conn.session.as_ref().and_then(|s| s.cipher.clone()),
        failure: failure.map(str::to_owned),
        requests: conn.requests(),
        first_request: conn.first_request.get().cloned(),
        hello_len: conn.hello.len(),
        prefix_len: conn.tap.snapshot().len(),
        prefix_truncated: conn.tap.truncated(),
        tls: facts.tls.clone(),
        tls_error: facts.error.clone(),
    };
    serde_json::to_value(summary).unwrap_or_default()
}

/// `<conn-id>.json` under `--record-dir`, in the captures/ recorder's format.
pub(crate) fn connection_record(
    conn: &Connection,
    metrics: &Metrics,
    failure: Option<&str>,
) -> ConnectionRecord {
    let facts = hello_facts(conn, metrics);
    let session = conn.session.as_ref();
    ConnectionRecord {
        conn_id: conn.id.clone(),
        time: rfc3339(conn.accepted),
        peer: conn.peer.to_string(),
        sni: facts.sni.clone(),
        alpn_offered: facts.alpn_offered.clone(),
        alpn_negotiated: session.and_then(|s| s.alpn.clone()),
        spoken: conn.spoken(),
        tls_version: session.and_then(|s| s.tls_version.clone()),
        cipher: session.and_then(|s| s.cipher.clone()),
        first_request: conn.first_request.get().cloned(),
        requests: conn.requests(),
        hello_len: conn.hello.len(),
        prefix_len: conn.tap.snapshot().len(),
        prefix_truncated: conn.tap.truncated(),
        failure: failure.map(str::to_owned),
        recorder: format!("{SERVER} serve --record-dir"),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_later_heads_past_sized_bodies_only() {
        let wire = b"POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\n\r\nGET /c";
        assert_eq!(nth_http1_head(wire, 1), Some(&wire[..]));
        assert!(nth_http1_head(wire, 2).is_some_and(|rest| rest.starts_with(b"GET /b ")));
        assert!(nth_http1_head(wire, 3).is_some_and(|rest| rest.starts_with(b"GET /c")));
        assert_eq!(nth_http1_head(wire, 4), None);
        let chunked = b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /b";
        assert_eq!(nth_http1_head(chunked, 2), None);
    }
}
