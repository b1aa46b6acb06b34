//! What the writer stores of a closed connection, made from the connection and its analysis
//! (made now if no request made it before): its row, and its `--record-dir` record.

use std::sync::Arc;

use exitvoice_schema::{ConnectionRecord, ConnectionRow};
use time::OffsetDateTime;

use crate::capture::{Connection, Failed};
use crate::metrics::Metrics;

/// The row of `conn` as it stands now (its analysis made if it was not yet).
pub(super) fn connection_row(
    conn: &Connection,
    failure: Option<Failed>,
    metrics: &Metrics,
) -> ConnectionRow {
    let analysis = conn.analysis(metrics);
    let facts = Arc::clone(&analysis.facts);
    let prefix = conn.tap.with_bytes(<[u8]>::to_vec);
    let (failure, failure_detail) = failure.map_or((None, None), |(f, d)| (Some(f), Some(d)));
    ConnectionRow {
        conn_id: conn.id.clone(),
        time_unix_ms: unix_ms(conn.accepted),
        peer: conn.stored_peer.clone(),
        facts,
        failure,
        failure_detail,
        requests: conn.requests(),
        prefix_truncated: conn.tap.truncated(),
        analysed_prefix_len: Some(analysis.prefix_len),
        hello: conn.hello.to_vec(),
        prefix,
        syn: conn.syn_bytes().to_vec(),
        latency: conn.session.is_some().then(|| conn.round_trips.shown()),
    }
}

/// `time` in Unix milliseconds.
fn unix_ms(time: OffsetDateTime) -> i64 {
    i64::try_from(time.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// `<conn-id>.json` under `--record-dir`, in the captures/ recorder's format.
pub(super) fn connection_record(
    conn: &Connection,
    metrics: &Metrics,
    failure: Option<&Failed>,
) -> ConnectionRecord {
    let facts = &conn.analysis(metrics).facts;
    let session = conn.session.as_ref();
    ConnectionRecord {
        conn_id: conn.id.clone(),
        time: exitvoice_schema::rfc3339_ms(unix_ms(conn.accepted)),
        peer: match (conn.stored_peer.port, conn.peer.ip()) {
            (0, _) => conn.stored_peer.ip.clone(),
            _ => conn.peer.to_string(),
        },
        sni: facts.sni.clone(),
        alpn_offered: facts.alpn.offered.clone(),
        alpn_negotiated: session.and_then(|s| s.alpn.clone()),
        spoken: conn.spoken(),
        tls_version: session.and_then(|s| s.tls_version.as_deref().map(str::to_owned)),
        cipher: session.and_then(|s| s.cipher.as_deref().map(str::to_owned)),
        first_request: conn.first_request.get().cloned(),
        requests: conn.requests(),
        hello_len: conn.hello.len(),
        prefix_len: conn.tap.len(),
        prefix_truncated: conn.tap.truncated(),
        failure: failure.map(|(_, detail)| detail.clone()),
        recorder: format!("{} serve --record-dir", crate::SERVER),
    }
}
