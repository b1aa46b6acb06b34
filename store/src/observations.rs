//! The `connections` and `requests` tables: batched writes from the echo server's writer, and the
//! joined listing of `GET /api/observations`.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::any::AnyRow;
use sqlx::AnyConnection;
use sqlx::{Connection as _, Row as _};

use crate::handle::{Engine, Store, StoreError};
use crate::ledger::LedgerRow;
use crate::quic::{QuicConnectionRow, QuicRequestRow};
use crate::values::{arguments, cached_chunks, insert_into, placeholders, Filters};
use exitvoice_schema::echo::{Http1Echo, Peer};
use exitvoice_schema::observation::{
    compose_echo, rfc3339_ms, ConnectionFacts, ConnectionRow, Failure, LayersFn, Observation,
    ObservationQuery, RequestRecord, StoredObservation, Summary,
};
use exitvoice_schema::voice::Bucket;

/// Request rows per INSERT statement, [`REQUEST_COLUMNS`] parameters each: well under SQLite's
/// limit of 32,766 variables per statement and PostgreSQL's of 65,535.
const REQUESTS_PER_STATEMENT: usize = 256;
/// Request columns: one parameter each per row.
const REQUEST_COLUMNS: usize = 11;
/// Connection rows per INSERT statement, [`CONNECTION_COLUMNS`] parameters each.
const CONNECTIONS_PER_STATEMENT: usize = 64;
/// Connection columns: one parameter each per row.
const CONNECTION_COLUMNS: usize = 15;

/// What the writer commits in one transaction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    /// Connections to insert, or to update when already stored (the first request stores its
    /// connection; the connection's end updates it).
    pub connections: Vec<ConnectionRow>,
    /// Requests to insert.
    pub requests: Vec<RequestRecord>,
    /// QUIC connections to insert (kept when already stored).
    pub quic_connections: Vec<QuicConnectionRow>,
    /// HTTP/3 requests to insert.
    pub quic_requests: Vec<QuicRequestRow>,
    /// h3 downgrade ledger identities that changed, each once: their rows are replaced.
    pub ledger: Vec<LedgerRow>,
}

impl Batch {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.connections.is_empty()
            && self.requests.is_empty()
            && self.quic_connections.is_empty()
            && self.quic_requests.is_empty()
            && self.ledger.is_empty()
    }

    /// Empties the batch, keeping its vectors' room for the next one.
    pub fn clear(&mut self) {
        self.connections.clear();
        self.requests.clear();
        self.quic_connections.clear();
        self.quic_requests.clear();
        self.ledger.clear();
    }
}

impl Store {
    /// Writes `batch` in one transaction: all rows or none.
    ///
    /// # Errors
    /// Fails if the transaction fails (disk full, read-only file, …) or facts cannot be encoded;
    /// nothing of the batch is stored then.
    pub async fn write_batch(&self, batch: &Batch) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        let written = write_batch(&mut conn, batch).await;
        if written.is_err() {
            // After a failed COMMIT (I/O error, full disk) SQLite may or may not have rolled the
            // transaction back (https://sqlite.org/lang_transaction.html, "Response To Errors
            // Within A Transaction"), and sqlx's own idea of the transaction depth can then be
            // wrong: a connection returned to the pool like that turns every later batch into a
            // savepoint of a transaction that is never committed, reported as written and lost
            // at close. Closing it rolls back whatever is open; the pool opens a fresh one.
            conn.close_on_drop();
        }
        written
    }

    /// Stored observations matching `query`, oldest first: each request joined with its
    /// connection, and each connection that carried no request. Each connection's parsed layers
    /// are derived again from its stored bytes by `layers`, once per connection.
    ///
    /// # Errors
    /// Fails if the query fails or a stored row is malformed.
    pub async fn observations(
        &self,
        query: &ObservationQuery,
        layers: LayersFn,
    ) -> Result<Vec<StoredObservation>, StoreError> {
        let raw = if query.raw {
            "c.hello, c.prefix"
        } else {
            "NULL AS hello, NULL AS prefix"
        };
        // The layers are derived from the ClientHello and the analysed part of the prefix.
        let connection_columns = format!(
            "c.conn_id AS c_conn_id, c.time_unix_ms AS c_time, c.peer_ip, c.peer_port, c.sni, \
             c.failure, c.failure_detail, c.requests, c.facts, \
             CASE WHEN c.prefix_truncated THEN 1 ELSE 0 END AS prefix_truncated, \
             c.analysed_len, length(c.hello) AS hello_len, length(c.prefix) AS prefix_len, \
             c.hello AS d_hello, substr(c.prefix, 1, CAST(c.analysed_len AS INTEGER)) AS d_prefix, \
             c.syn AS d_syn, c.latency, \
             {raw}"
        );
        let mut filters = Filters::after_limit();
        let mut filter = |column: &str, op: &str, set: bool| filters.clause(column, op, set);
        let token = filter("r.token", "=", query.token.is_some());
        let since_request = filter("r.time_unix_ms", ">=", query.since_unix_ms.is_some());
        let requests = format!(
            "SELECT r.id AS oid, r.time_unix_ms AS t, CAST(1 AS BIGINT) AS kind, r.conn_id, \
             r.request_index, r.token, r.method, r.path, r.stream_id, r.bucket, r.pseudo_order, \
             r.header_order, r.http1, {connection_columns} \
             FROM requests r LEFT JOIN connections c ON c.conn_id = r.conn_id \
             WHERE TRUE{token}{since_request}"
        );
        let sql = if query.token.is_some() {
            format!("{requests} ORDER BY t, kind, oid LIMIT $1")
        } else {
            let since_connection = if query.since_unix_ms.is_some() {
                filters.again("c.time_unix_ms", ">=")
            } else {
                String::new()
            };
            // The NULLs of the second part take their types from the first part's columns.
            format!(
                "SELECT * FROM ({requests} UNION ALL \
                 SELECT c.id AS oid, c.time_unix_ms AS t, CAST(0 AS BIGINT) AS kind, c.conn_id, \
                 CAST(0 AS BIGINT), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
                 {connection_columns} \
                 FROM connections c WHERE c.requests = 0{since_connection}) AS listed \
                 ORDER BY t, kind, oid LIMIT $1"
            )
        };
        let mut select = sqlx::query(&sql).bind(i64::from(query.limit));
        if let Some(token) = &query.token {
            select = select.bind(token);
        }
        if let Some(since) = query.since_unix_ms {
            select = select.bind(since);
        }
        let rows = select.fetch_all(self.pool()).await?;
        let mut facts = HashMap::new();
        rows.iter()
            .map(|row| stored_observation(row, layers, &mut facts))
            .collect()
    }

    /// Stored observations: requests, plus connections that carried none.
    ///
    /// # Errors
    /// Fails if the query fails.
    pub async fn observation_count(&self) -> Result<u64, StoreError> {
        let count: i64 = sqlx::query_scalar(
            "SELECT (SELECT COUNT(*) FROM requests) + \
             (SELECT COUNT(*) FROM connections WHERE requests = 0)",
        )
        .fetch_one(self.pool())
        .await?;
        Ok(u64::try_from(count).unwrap_or(0))
    }
}

/// An optional stored text column decoded from JSON.
fn json_column<T: serde::de::DeserializeOwned>(
    row: &AnyRow,
    column: &str,
) -> Result<Option<T>, StoreError> {
    let text: Option<String> = row.try_get(column)?;
    Ok(text.map(|t| serde_json::from_str(&t)).transpose()?)
}

/// A connection's facts: the stored part, and the layers derived again from its bytes (rows
/// without `analysed_len` keep their layers in `facts`).
fn connection_facts(row: &AnyRow, layers: LayersFn) -> Result<ConnectionFacts, StoreError> {
    let mut facts: ConnectionFacts = json_column(row, "facts")?.unwrap_or_default();
    if row.try_get::<Option<i64>, _>("analysed_len")?.is_some() {
        let hello: Option<Vec<u8>> = row.try_get("d_hello")?;
        let prefix: Option<Vec<u8>> = row.try_get("d_prefix")?;
        let syn: Option<Vec<u8>> = row.try_get("d_syn")?;
        facts.set_layers(layers(
            hello.as_deref().unwrap_or_default(),
            prefix.as_deref().unwrap_or_default(),
            facts.alpn.spoken,
            syn.as_deref(),
        ));
    }
    Ok(facts)
}

fn stored_observation(
    row: &AnyRow,
    layers: LayersFn,
    cache: &mut HashMap<String, Arc<ConnectionFacts>>,
) -> Result<StoredObservation, StoreError> {
    let kind: i64 = row.try_get("kind")?;
    let conn_id: String = row.try_get("conn_id")?;
    let stored_conn: Option<String> = row.try_get("c_conn_id")?;
    let peer = Peer {
        ip: row
            .try_get::<Option<String>, _>("peer_ip")?
            .unwrap_or_default(),
        port: u16::try_from(row.try_get::<Option<i64>, _>("peer_port")?.unwrap_or(0)).unwrap_or(0),
    };
    let facts = match cache.get(&conn_id) {
        Some(facts) => Arc::clone(facts),
        None => {
            let facts = Arc::new(connection_facts(row, layers)?);
            cache.insert(conn_id.clone(), Arc::clone(&facts));
            facts
        }
    };
    let failure: Option<Failure> = row
        .try_get::<Option<String>, _>("failure")?
        .map(|f| serde_json::from_value(serde_json::Value::String(f)))
        .transpose()?;
    let hello: Option<Vec<u8>> = row.try_get("hello")?;
    let prefix: Option<Vec<u8>> = row.try_get("prefix")?;
    let connection = stored_conn.map(|_| -> Result<ConnectionRow, StoreError> {
        Ok(ConnectionRow {
            conn_id: conn_id.clone(),
            time_unix_ms: row.try_get::<Option<i64>, _>("c_time")?.unwrap_or(0),
            peer: peer.clone(),
            facts: Arc::clone(&facts),
            failure,
            failure_detail: row.try_get("failure_detail")?,
            requests: u32::try_from(row.try_get::<Option<i64>, _>("requests")?.unwrap_or(0))
                .unwrap_or(u32::MAX),
            // An integer on SQLite, a boolean on PostgreSQL: the query reads both as 0 or 1.
            prefix_truncated: row
                .try_get::<Option<i64>, _>("prefix_truncated")?
                .is_some_and(|t| t != 0),
            analysed_prefix_len: row
                .try_get::<Option<i64>, _>("analysed_len")?
                .and_then(|n| usize::try_from(n).ok()),
            hello: hello.clone().unwrap_or_default(),
            prefix: prefix.clone().unwrap_or_default(),
            syn: row
                .try_get::<Option<Vec<u8>>, _>("d_syn")?
                .unwrap_or_default(),
            latency: json_column(row, "latency")?,
        })
    });
    let connection = connection.transpose()?;
    let (request_index, time_unix_ms, token, summary) = if kind == 0 {
        let connection = connection.as_ref().ok_or(StoreError::Malformed(
            "a connection row without its connection",
        ))?;
        let mut summary = connection.summary();
        // Without `raw`, the bytes were not read: their stored lengths were.
        let len = |column| -> Result<usize, StoreError> {
            let len: Option<i64> = row.try_get(column)?;
            Ok(len.and_then(|n| usize::try_from(n).ok()).unwrap_or(0))
        };
        summary.hello_len = len("hello_len")?;
        summary.prefix_len = len("prefix_len")?;
        (
            0,
            connection.time_unix_ms,
            None,
            Summary::Connection(Box::new(summary)),
        )
    } else {
        let request = request_record(row, &conn_id)?;
        let mut echo = compose_echo(&facts, peer.clone(), &request);
        echo.latency = connection.as_ref().and_then(|c| c.latency.clone());
        (
            request.index,
            request.time_unix_ms,
            request.token,
            Summary::Request(Box::new(echo)),
        )
    };
    Ok(StoredObservation {
        id: row.try_get("oid")?,
        observation: Observation {
            conn_id,
            request_index,
            time: rfc3339_ms(time_unix_ms),
            time_unix_ms,
            peer,
            token,
            sni: facts.sni.clone(),
            failure,
            failure_detail: connection.as_ref().and_then(|c| c.failure_detail.clone()),
            summary,
            hello: hello.unwrap_or_default(),
            prefix: prefix.unwrap_or_default(),
        },
    })
}

fn request_record(row: &AnyRow, conn_id: &str) -> Result<RequestRecord, StoreError> {
    let bucket: Option<Bucket> = row
        .try_get::<Option<String>, _>("bucket")?
        .map(|b| serde_json::from_value(serde_json::Value::String(b)))
        .transpose()?;
    Ok(RequestRecord {
        conn_id: conn_id.to_owned(),
        index: u32::try_from(row.try_get::<i64, _>("request_index")?).unwrap_or(u32::MAX),
        time_unix_ms: row.try_get("t")?,
        token: row.try_get("token")?,
        method: row
            .try_get::<Option<String>, _>("method")?
            .unwrap_or_default(),
        path: row
            .try_get::<Option<String>, _>("path")?
            .unwrap_or_default(),
        stream_id: row
            .try_get::<Option<i64>, _>("stream_id")?
            .and_then(|id| u32::try_from(id).ok()),
        bucket,
        pseudo_header_order: json_column(row, "pseudo_order")?.unwrap_or_default(),
        header_order: json_column(row, "header_order")?.unwrap_or_default(),
        http1: json_column::<Http1Echo>(row, "http1")?,
    })
}

/// A list as a JSON array, or NULL when empty (most HTTP/1 requests have no pseudo-headers).
fn json_list(list: &[String]) -> Result<Option<String>, StoreError> {
    if list.is_empty() {
        return Ok(None);
    }
    Ok(Some(serde_json::to_string(list)?))
}

/// Writes `batch` in one transaction on `conn`.
async fn write_batch(conn: &mut AnyConnection, batch: &Batch) -> Result<(), StoreError> {
    let mut tx = conn.begin().await?;
    insert_rows(&mut tx, batch).await?;
    tx.commit().await?;
    Ok(())
}

/// Each connection of `rows` once, at its first place, in its last state: a connection twice in
/// one batch (its first request, then its end) must be one row of a statement, as PostgreSQL
/// refuses to update a row twice in one `INSERT … ON CONFLICT DO UPDATE`. Only the columns that
/// statement updates can differ between the two.
fn latest_per_connection(rows: &[ConnectionRow]) -> Vec<&ConnectionRow> {
    let mut place: HashMap<&str, usize> = HashMap::with_capacity(rows.len());
    let mut latest: Vec<&ConnectionRow> = Vec::with_capacity(rows.len());
    for row in rows {
        match place.get(row.conn_id.as_str()) {
            Some(&at) => latest[at] = row,
            None => {
                place.insert(&row.conn_id, latest.len());
                latest.push(row);
            }
        }
    }
    latest
}

/// Inserts `batch`'s rows on `conn`, inside the caller's transaction. A connection already
/// stored takes the newer row's failure, request count, facts and prefix (the prefix only grows).
pub(crate) async fn insert_rows(conn: &mut AnyConnection, batch: &Batch) -> Result<(), StoreError> {
    // One multi-row statement per chunk, for connections as for requests: each statement is a
    // round trip to sqlx's SQLite thread, which cost more than the rows themselves
    // (docs/benchmarks.md). Text and bytes are bound as `&str` and `&[u8]`: sqlx's `Any`
    // driver copies a `String` or `Vec<u8>` bound by reference, and borrows a slice.
    let engine = Engine::of(conn);
    let connections = latest_per_connection(&batch.connections);
    for chunk in cached_chunks(&connections, CONNECTIONS_PER_STATEMENT) {
        let facts = chunk
            .iter()
            .map(|row| match row.analysed_prefix_len {
                Some(_) => serde_json::to_string(&row.facts.stored()),
                None => serde_json::to_string(&row.facts),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let latency = chunk
            .iter()
            .map(|row| row.latency.as_ref().map(serde_json::to_string).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        let sql = format!(
            "{} connections (conn_id, time_unix_ms, peer_ip, peer_port, sni, failure, \
             failure_detail, requests, prefix_truncated, facts, hello, prefix, analysed_len, syn, \
             latency) \
             VALUES {} ON CONFLICT (conn_id) DO UPDATE SET failure = excluded.failure, \
             failure_detail = excluded.failure_detail, requests = excluded.requests, \
             prefix_truncated = excluded.prefix_truncated, facts = excluded.facts, \
             prefix = excluded.prefix, analysed_len = excluded.analysed_len, \
             latency = excluded.latency",
            insert_into(engine),
            placeholders(engine, chunk.len(), CONNECTION_COLUMNS)
        );
        let mut insert = sqlx::query_with(&sql, arguments(chunk.len(), CONNECTION_COLUMNS));
        for ((row, facts), latency) in chunk.iter().zip(&facts).zip(&latency) {
            insert = insert
                .bind(row.conn_id.as_str())
                .bind(row.time_unix_ms)
                .bind(row.peer.ip.as_str())
                .bind(i64::from(row.peer.port))
                .bind(row.facts.sni.as_deref())
                .bind(row.failure.map(Failure::as_str))
                .bind(row.failure_detail.as_deref())
                .bind(i64::from(row.requests))
                .bind(row.prefix_truncated)
                .bind(facts.as_str())
                .bind(row.hello.as_slice())
                .bind(row.prefix.as_slice())
                .bind(
                    row.analysed_prefix_len
                        .map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
                )
                .bind((!row.syn.is_empty()).then_some(row.syn.as_slice()))
                .bind(latency.as_deref());
        }
        insert.execute(&mut *conn).await?;
    }
    // One multi-row statement per chunk: each statement is a round trip to sqlx's SQLite
    // thread, which cost more than the rows themselves (docs/benchmarks.md).
    for chunk in cached_chunks(&batch.requests, REQUESTS_PER_STATEMENT) {
        let sql = format!(
            "{} requests (conn_id, request_index, time_unix_ms, token, method, path, \
             stream_id, bucket, pseudo_order, header_order, http1) VALUES {}",
            insert_into(engine),
            placeholders(engine, chunk.len(), REQUEST_COLUMNS)
        );
        let json = chunk
            .iter()
            .map(|request| {
                Ok([
                    json_list(&request.pseudo_header_order)?,
                    json_list(&request.header_order)?,
                    request
                        .http1
                        .as_ref()
                        .map(serde_json::to_string)
                        .transpose()?,
                ])
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let mut insert = sqlx::query_with(&sql, arguments(chunk.len(), REQUEST_COLUMNS));
        for (request, [pseudo_order, header_order, http1]) in chunk.iter().zip(&json) {
            insert = insert
                .bind(request.conn_id.as_str())
                .bind(i64::from(request.index))
                .bind(request.time_unix_ms)
                .bind(request.token.as_deref())
                .bind(request.method.as_str())
                .bind(request.path.as_str())
                .bind(request.stream_id.map(i64::from))
                .bind(request.bucket.map(Bucket::as_str))
                .bind(pseudo_order.as_deref())
                .bind(header_order.as_deref())
                .bind(http1.as_deref());
        }
        insert.execute(&mut *conn).await?;
    }
    crate::quic::insert_rows(conn, &batch.quic_connections, &batch.quic_requests).await?;
    crate::ledger::upsert_rows(conn, &batch.ledger).await?;
    Ok(())
}

/// A batch of one TCP connection and its request, for other modules' tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::Batch;

    pub(crate) fn one_tcp_observation() -> Batch {
        Batch {
            connections: vec![super::tests::connection("t", 1_000, 1)],
            requests: vec![super::tests::request("t", 1, Some("tcp"), 1_000)],
            ..Batch::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitvoice_schema::echo::{Alpn, Http2Connection, Spoken};
    use exitvoice_schema::observation::Layers;
    use exitvoice_schema::raw_json::RawJson;
    use exitvoice_schema::voice::VoiceId;
    use exitvoice_schema::{TcpAbsence, TcpAbsent};

    /// Stands in for the echo server's parsers: layers that say which bytes they were read from.
    fn layers_of_bytes(hello: &[u8], prefix: &[u8], spoken: Spoken, syn: Option<&[u8]>) -> Layers {
        Layers {
            tcp: None,
            tcp_absent: syn.map(|syn| TcpAbsent {
                reason: TcpAbsence::Malformed,
                detail: format!("{} bytes of syn", syn.len()),
            }),
            tls: None,
            tls_error: Some(format!("{} bytes of hello", hello.len())),
            http2: (spoken == Spoken::H2).then(|| Http2Connection {
                akamai_fingerprint: String::from_utf8_lossy(prefix).into_owned(),
                akamai_fingerprint_hash: "hash".to_owned(),
                voice_id: VoiceId("h2v1_x".to_owned()),
                profile: None,
                own_preface_and_settings: true,
                detail: RawJson::of(&serde_json::json!({"frames": []})),
            }),
        }
    }

    /// A connection row whose live facts are what [`layers_of_bytes`] says of its bytes.
    pub(super) fn connection(conn_id: &str, time_unix_ms: i64, requests: u32) -> ConnectionRow {
        let hello = vec![0x16, 0x03, 0x01];
        let prefix = b"PRI * HTTP/2.0\r\n".to_vec();
        let syn = vec![0x45, 0x00, 0x00];
        let mut facts = ConnectionFacts {
            sni: Some("localhost".to_owned()),
            alpn: Alpn {
                offered: vec!["h2".to_owned()],
                negotiated: Some("h2".to_owned()),
                spoken: Spoken::H2,
            },
            ..ConnectionFacts::default()
        };
        facts.set_layers(layers_of_bytes(&hello, &prefix, Spoken::H2, Some(&syn)));
        ConnectionRow {
            conn_id: conn_id.to_owned(),
            time_unix_ms,
            peer: Peer {
                ip: "127.0.0.1".to_owned(),
                port: 5000,
            },
            facts: std::sync::Arc::new(facts),
            failure: None,
            failure_detail: None,
            requests,
            prefix_truncated: false,
            analysed_prefix_len: Some(prefix.len()),
            hello,
            prefix,
            syn,
            latency: Some(exitvoice_schema::RoundTrips::judge(
                &exitvoice_schema::Measures {
                    tcp: Some(exitvoice_schema::TcpRoundTrip {
                        rtt_us: 60,
                        min_rtt_us: Some(40),
                        rttvar_us: Some(20),
                    }),
                    tls_us: Some(80_400),
                    pings_us: vec![80_100, 80_300],
                    ..exitvoice_schema::Measures::default()
                },
            )),
        }
    }

    pub(super) fn request(
        conn_id: &str,
        index: u32,
        token: Option<&str>,
        time_unix_ms: i64,
    ) -> RequestRecord {
        RequestRecord {
            conn_id: conn_id.to_owned(),
            index,
            time_unix_ms,
            token: token.map(str::to_owned),
            method: "GET".to_owned(),
            path: "/api/all".to_owned(),
            stream_id: Some(2 * index - 1),
            bucket: Some(Bucket::B),
            pseudo_header_order: vec![":method".to_owned(), ":path".to_owned()],
            header_order: vec!["user-agent".to_owned()],
            http1: None,
        }
    }

    fn query(token: Option<&str>, since: Option<i64>, raw: bool) -> ObservationQuery {
        ObservationQuery {
            token: token.map(str::to_owned),
            since_unix_ms: since,
            limit: 100,
            raw,
        }
    }

    on_both_engines! {
        async fn layers_are_stored_as_bytes_and_derived_again_from_the_analysed_part(store: Store) {
            let mut row = connection("a", 1_000, 1);
            // The prefix grew past what the facts were read from.
            row.prefix = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nmore frames".to_vec();
            row.analysed_prefix_len = Some(8);
            let batch = Batch {
                connections: vec![row],
                requests: vec![request("a", 1, None, 1_100)],
                ..Batch::default()
            };
            store.write_batch(&batch).await.expect("write");
            let stored: String = sqlx::query_scalar("SELECT facts FROM connections")
                .fetch_one(store.pool())
                .await
                .expect("facts");
            assert!(
                !stored.contains("http2") && !stored.contains("tls_error"),
                "only what the bytes cannot say is stored: {stored}"
            );
            assert!(stored.contains(r#""negotiated":"h2""#), "{stored}");

            let listed = store
                .observations(&query(None, None, false), layers_of_bytes)
                .await
                .expect("list");
            let Summary::Request(echo) = &listed[0].observation.summary else {
                panic!("a request's echo: {:?}", listed[0].observation.summary);
            };
            let http2 = echo.http2.as_ref().expect("h2 derived");
            assert_eq!(
                http2.akamai_fingerprint, "PRI * HT",
                "the analysed bytes only"
            );
            assert_eq!(echo.alpn.negotiated.as_deref(), Some("h2"));
            assert!(
                listed[0].observation.prefix.is_empty(),
                "raw only on request"
            );
        }

        async fn requests_list_joined_with_their_connection_stored_once(store: Store) {
            let mut failed = connection("b", 1_500, 0);
            failed.failure = Some(Failure::TlsAlertReceived);
            failed.failure_detail = Some("tls_alert_received: UnknownCA".to_owned());
            std::sync::Arc::make_mut(&mut failed.facts).http2 = None;
            let batch = Batch {
                connections: vec![connection("a", 1_000, 1), failed],
                requests: vec![request("a", 1, Some("t1"), 1_100)],
                ..Batch::default()
            };
            store.write_batch(&batch).await.expect("write");
            // The connection's end: one more request, the row updated, not duplicated.
            let later = Batch {
                connections: vec![connection("a", 1_000, 2)],
                requests: vec![request("a", 2, Some("t2"), 2_000)],
                ..Batch::default()
            };
            store.write_batch(&later).await.expect("write");
            let connections: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM connections")
                .fetch_one(store.pool())
                .await
                .expect("count");
            assert_eq!(connections, 2);
            assert_eq!(store.observation_count().await.expect("count"), 3);

            let all = store
                .observations(&query(None, None, false), layers_of_bytes)
                .await
                .expect("list");
            let shape: Vec<(&str, u32)> = all
                .iter()
                .map(|s| (s.observation.conn_id.as_str(), s.observation.request_index))
                .collect();
            assert_eq!(shape, [("a", 1), ("b", 0), ("a", 2)], "oldest first");
            let first = &all[0].observation;
            assert!(
                first.hello.is_empty() && first.prefix.is_empty(),
                "raw only on request"
            );
            let Summary::Request(echo) = &first.summary else {
                panic!("a request's summary is its echo: {:?}", first.summary);
            };
            let facts = &batch.connections[0].facts;
            let mut want =
                compose_echo(facts, batch.connections[0].peer.clone(), &batch.requests[0]);
            // The connection's round trips come back with each of its requests' echoes.
            want.latency = batch.connections[0].latency.clone();
            assert!(want.latency.as_ref().is_some_and(|l| l.gap_us.is_some()));
            assert_eq!(**echo, want);
            assert_eq!(
                echo.http2.as_ref().map(|h| h.header_order.clone()),
                Some(vec!["user-agent".to_owned()])
            );
            let Summary::Connection(summary) = &all[1].observation.summary else {
                panic!("a connection without requests lists its summary");
            };
            assert_eq!(summary.failure, Some(Failure::TlsAlertReceived));
            assert_eq!(summary.hello_len, 3, "lengths without the raw bytes");
            assert_eq!(
                all[1].observation.failure_detail.as_deref(),
                Some("tls_alert_received: UnknownCA")
            );

            let raw = store
                .observations(&query(Some("t2"), None, true), layers_of_bytes)
                .await
                .expect("list");
            assert_eq!(raw.len(), 1);
            assert_eq!(raw[0].observation.hello, [0x16, 0x03, 0x01]);
            assert_eq!(raw[0].observation.request_index, 2);
            let since = store
                .observations(&query(None, Some(1_200), false), layers_of_bytes)
                .await
                .expect("list");
            assert_eq!(since.len(), 2);
        }

        async fn a_batch_that_fails_midway_stores_none_of_its_rows(store: Store) {
            // A trigger fails the third request row. On SQLite the INSERT runs `OR FAIL`, which
            // keeps the statement's earlier rows: only the batch's transaction takes them away.
            let setup: &[&str] = match store.engine() {
                Engine::Sqlite => &["CREATE TRIGGER fail_third BEFORE INSERT ON requests \
                     WHEN NEW.request_index = 3 BEGIN SELECT RAISE(FAIL, 'third'); END"],
                Engine::Postgres => &[
                    "CREATE FUNCTION fail_third() RETURNS trigger LANGUAGE plpgsql AS $$ \
                     BEGIN IF NEW.request_index = 3 THEN RAISE EXCEPTION 'third'; END IF; \
                     RETURN NEW; END $$",
                    "CREATE TRIGGER fail_third BEFORE INSERT ON requests FOR EACH ROW \
                     EXECUTE FUNCTION fail_third()",
                ],
            };
            for sql in setup {
                sqlx::Executor::execute(store.pool(), *sql)
                    .await
                    .expect("trigger");
            }
            let counts = || async {
                sqlx::query_as::<_, (i64, i64)>(
                    "SELECT (SELECT COUNT(*) FROM connections), (SELECT COUNT(*) FROM requests)",
                )
                .fetch_one(store.pool())
                .await
                .expect("counts")
            };
            let failing = Batch {
                connections: vec![connection("a", 1_000, 4)],
                requests: (1..=4).map(|i| request("a", i, None, 1_000)).collect(),
                ..Batch::default()
            };
            assert!(store.write_batch(&failing).await.is_err());
            assert_eq!(counts().await, (0, 0), "none of the failed batch's rows");
            let next = Batch {
                connections: vec![connection("b", 2_000, 2)],
                requests: (1..=2).map(|i| request("b", i, None, 2_000)).collect(),
                ..Batch::default()
            };
            store.write_batch(&next).await.expect("the next batch");
            assert_eq!(counts().await, (1, 2));
        }

        async fn a_connection_twice_in_one_batch_is_one_row_with_the_later_state(store: Store) {
            let mut ended = connection("a", 1_000, 3);
            ended.failure = Some(Failure::IdleTimeout);
            let batch = Batch {
                connections: vec![connection("a", 1_000, 1), connection("b", 1_200, 0), ended],
                requests: vec![request("a", 1, None, 1_100)],
                ..Batch::default()
            };
            store.write_batch(&batch).await.expect("write");
            let rows: Vec<(String, i64, Option<String>)> =
                sqlx::query_as("SELECT conn_id, requests, failure FROM connections ORDER BY id")
                    .fetch_all(store.pool())
                    .await
                    .expect("rows");
            assert_eq!(
                rows,
                [
                    ("a".to_owned(), 3, Some("idle_timeout".to_owned())),
                    ("b".to_owned(), 0, None)
                ]
            );
        }

        async fn pruning_removes_old_rows_and_keeps_connections_still_referred_to(store: Store) {
            let batch = Batch {
                connections: vec![connection("old", 1_000, 1), connection("long", 1_000, 2)],
                requests: vec![
                    request("old", 1, None, 1_000),
                    request("long", 1, None, 1_000),
                    request("long", 2, None, 9_000),
                ],
                ..Batch::default()
            };
            store.write_batch(&batch).await.expect("write");
            let pruned = store.prune(Some(5_000), 1000).await.expect("prune");
            assert_eq!(pruned.requests, 2);
            assert_eq!(pruned.connections, 1, "`long` still has a request of 9 000");
            let left = store
                .observations(&query(None, None, false), layers_of_bytes)
                .await
                .expect("list");
            assert_eq!(left.len(), 1);
            assert_eq!(left[0].observation.conn_id, "long");

            let size = store.size().await.expect("size");
            assert!(
                size.used_bytes > 0 && size.file_bytes >= size.used_bytes / 2,
                "{size:?}"
            );
            let oldest = store.prune(None, 1000).await.expect("prune");
            assert_eq!((oldest.requests, oldest.connections), (1, 1));
            assert_eq!(store.observation_count().await.expect("count"), 0);
        }
    }
}
