//! The `quic_connections` and `quic_requests` tables (docs/quic.md): QUIC connections served
//! over HTTP/3, stored with their first request, and each HTTP/3 request. Written in the same
//! transaction as TCP's rows ([`crate::Batch`]).

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row as _};

use crate::handle::{Engine, Store, StoreError};
use crate::values::{arguments, cached_chunks, insert_into, placeholders, Filters};
use exitvoice_schema::echo::Peer;
use exitvoice_schema::ObservationQuery;

/// Connection rows per INSERT statement.
const CONNECTIONS_PER_STATEMENT: usize = 64;
const CONNECTION_COLUMNS: usize = 13;
/// Request rows per INSERT statement.
const REQUESTS_PER_STATEMENT: usize = 256;
const REQUEST_COLUMNS: usize = 9;

/// One QUIC connection, as the echo stores it at its first HTTP/3 request.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct QuicConnectionRow {
    /// The connection id (the server's boot id and a counter, shared with TCP's).
    pub conn_id: String,
    /// When its first request was answered.
    pub time_unix_ms: i64,
    /// The client's address, as `--store-peer-ip` allows.
    pub peer: Peer,
    /// The server name of its ClientHello.
    pub sni: Option<String>,
    /// JA4 of its ClientHello (`q…`).
    pub ja4: Option<String>,
    /// TLS voice of its ClientHello.
    pub tls_voice_id: Option<String>,
    /// QUIC voice (`quicv1_…`); `None` when the capture missed its Initials.
    pub quic_voice_id: Option<String>,
    /// HTTP/3 voice (`h3v1_…`); `None` without its SETTINGS.
    pub http3_voice_id: Option<String>,
    /// Peers' `h3_text`.
    pub h3_text: Option<String>,
    /// The echo's `quic` object, JSON (written as JSON, not as a string).
    #[serde(serialize_with = "as_json")]
    pub quic: Option<String>,
    /// The echo's `http3` object, JSON (written as JSON, not as a string).
    #[serde(serialize_with = "as_json")]
    pub http3: Option<String>,
    /// The reassembled ClientHello handshake message (empty when there was none, or when it
    /// was not read; hex in JSON, left out when empty).
    #[serde(
        serialize_with = "exitvoice_schema::observation::hex_bytes::serialize",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub hello: Vec<u8>,
}

/// One HTTP/3 request.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct QuicRequestRow {
    /// Its connection.
    pub conn_id: String,
    /// 1 for the connection's first request.
    pub index: u32,
    /// When it was answered.
    pub time_unix_ms: i64,
    /// Its probe token, if any.
    pub token: Option<String>,
    /// `:method`.
    pub method: String,
    /// `:path`.
    pub path: String,
    /// The QUIC stream id.
    pub stream_id: u64,
    /// Pseudo-header names, wire order.
    pub pseudo_header_order: Vec<String>,
    /// Regular header names, wire order.
    pub header_order: Vec<String>,
}

/// A stored HTTP/3 request with its connection (`None` if that row is gone or not written).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StoredQuicRequest {
    /// The request.
    pub request: QuicRequestRow,
    /// Its connection.
    pub connection: Option<QuicConnectionRow>,
}

/// A stored JSON text written as the JSON it holds (`null` when absent or not JSON).
fn as_json<S: serde::Serializer>(text: &Option<String>, serializer: S) -> Result<S::Ok, S::Error> {
    use serde::Serialize as _;
    text.as_deref()
        .and_then(|text| serde_json::from_str::<&serde_json::value::RawValue>(text).ok())
        .serialize(serializer)
}

impl Store {
    /// Stored HTTP/3 requests matching `query` (token, since, limit; the ClientHello only with
    /// `raw`), oldest first.
    ///
    /// # Errors
    /// Fails if the query fails or a stored row is malformed.
    pub async fn quic_requests(
        &self,
        query: &ObservationQuery,
    ) -> Result<Vec<StoredQuicRequest>, StoreError> {
        let mut filters = Filters::after_limit();
        let mut filter = |column: &str, op: &str, set: bool| filters.clause(column, op, set);
        let token = filter("r.token", "=", query.token.is_some());
        let since = filter("r.time_unix_ms", ">=", query.since_unix_ms.is_some());
        let hello = if query.raw {
            "c.hello"
        } else {
            "NULL AS hello"
        };
        let sql = format!(
            "SELECT r.conn_id, r.request_index, r.time_unix_ms, r.token, r.method, r.path, \
             r.stream_id, r.pseudo_order, r.header_order, c.conn_id AS c_conn_id, \
             c.time_unix_ms AS c_time, c.peer_ip, c.peer_port, c.sni, c.ja4, c.tls_voice_id, \
             c.quic_voice_id, c.http3_voice_id, c.h3_text, c.quic, c.http3, {hello} \
             FROM quic_requests r LEFT JOIN quic_connections c ON c.conn_id = r.conn_id \
             WHERE TRUE{token}{since} ORDER BY r.time_unix_ms, r.id LIMIT $1"
        );
        let mut rows = sqlx::query(&sql).bind(i64::from(query.limit));
        if let Some(token) = &query.token {
            rows = rows.bind(token);
        }
        if let Some(since) = query.since_unix_ms {
            rows = rows.bind(since);
        }
        let rows = rows.fetch_all(self.pool()).await?;
        rows.iter().map(stored).collect()
    }
}

fn list(row: &AnyRow, column: &str) -> Result<Vec<String>, StoreError> {
    let text: String = row.try_get(column)?;
    Ok(serde_json::from_str(&text)?)
}

fn stored(row: &AnyRow) -> Result<StoredQuicRequest, StoreError> {
    let request = QuicRequestRow {
        conn_id: row.try_get("conn_id")?,
        index: u32::try_from(row.try_get::<i64, _>("request_index")?)
            .map_err(|_| StoreError::Malformed("request_index"))?,
        time_unix_ms: row.try_get("time_unix_ms")?,
        token: row.try_get("token")?,
        method: row.try_get("method")?,
        path: row.try_get("path")?,
        stream_id: u64::try_from(row.try_get::<i64, _>("stream_id")?)
            .map_err(|_| StoreError::Malformed("stream_id"))?,
        pseudo_header_order: list(row, "pseudo_order")?,
        header_order: list(row, "header_order")?,
    };
    let connection = match row.try_get::<Option<String>, _>("c_conn_id")? {
        None => None,
        Some(conn_id) => Some(QuicConnectionRow {
            conn_id,
            time_unix_ms: row.try_get("c_time")?,
            peer: Peer {
                ip: row.try_get("peer_ip")?,
                port: u16::try_from(row.try_get::<i64, _>("peer_port")?)
                    .map_err(|_| StoreError::Malformed("peer_port"))?,
            },
            sni: row.try_get("sni")?,
            ja4: row.try_get("ja4")?,
            tls_voice_id: row.try_get("tls_voice_id")?,
            quic_voice_id: row.try_get("quic_voice_id")?,
            http3_voice_id: row.try_get("http3_voice_id")?,
            h3_text: row.try_get("h3_text")?,
            quic: row.try_get("quic")?,
            http3: row.try_get("http3")?,
            hello: row
                .try_get::<Option<Vec<u8>>, _>("hello")?
                .unwrap_or_default(),
        }),
    };
    Ok(StoredQuicRequest {
        request,
        connection,
    })
}

/// Inserts QUIC rows inside the caller's transaction; a connection already stored is kept.
/// Text and bytes are bound borrowed, as the TCP rows' (`observations::insert_rows`).
pub(crate) async fn insert_rows(
    conn: &mut AnyConnection,
    connections: &[QuicConnectionRow],
    requests: &[QuicRequestRow],
) -> Result<(), StoreError> {
    let engine = Engine::of(conn);
    for chunk in cached_chunks(connections, CONNECTIONS_PER_STATEMENT) {
        let sql = format!(
            "{} quic_connections (conn_id, time_unix_ms, peer_ip, peer_port, sni, ja4, \
             tls_voice_id, quic_voice_id, http3_voice_id, h3_text, quic, http3, hello) \
             VALUES {} ON CONFLICT (conn_id) DO NOTHING",
            insert_into(engine),
            placeholders(engine, chunk.len(), CONNECTION_COLUMNS)
        );
        let mut insert = sqlx::query_with(&sql, arguments(chunk.len(), CONNECTION_COLUMNS));
        for row in chunk {
            insert = insert
                .bind(row.conn_id.as_str())
                .bind(row.time_unix_ms)
                .bind(row.peer.ip.as_str())
                .bind(i64::from(row.peer.port))
                .bind(row.sni.as_deref())
                .bind(row.ja4.as_deref())
                .bind(row.tls_voice_id.as_deref())
                .bind(row.quic_voice_id.as_deref())
                .bind(row.http3_voice_id.as_deref())
                .bind(row.h3_text.as_deref())
                .bind(row.quic.as_deref())
                .bind(row.http3.as_deref())
                .bind(row.hello.as_slice());
        }
        insert.execute(&mut *conn).await?;
    }
    for chunk in cached_chunks(requests, REQUESTS_PER_STATEMENT) {
        let sql = format!(
            "{} quic_requests (conn_id, request_index, time_unix_ms, token, method, \
             path, stream_id, pseudo_order, header_order) VALUES {}",
            insert_into(engine),
            placeholders(engine, chunk.len(), REQUEST_COLUMNS)
        );
        let orders = chunk
            .iter()
            .map(|request| {
                Ok([
                    serde_json::to_string(&request.pseudo_header_order)?,
                    serde_json::to_string(&request.header_order)?,
                ])
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let mut insert = sqlx::query_with(&sql, arguments(chunk.len(), REQUEST_COLUMNS));
        for (request, [pseudo_order, header_order]) in chunk.iter().zip(&orders) {
            insert = insert
                .bind(request.conn_id.as_str())
                .bind(i64::from(request.index))
                .bind(request.time_unix_ms)
                .bind(request.token.as_deref())
                .bind(request.method.as_str())
                .bind(request.path.as_str())
                .bind(i64::try_from(request.stream_id).unwrap_or(i64::MAX))
                .bind(pseudo_order.as_str())
                .bind(header_order.as_str());
        }
        insert.execute(&mut *conn).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Batch;

    fn connection(conn_id: &str, time_unix_ms: i64) -> QuicConnectionRow {
        QuicConnectionRow {
            conn_id: conn_id.to_owned(),
            time_unix_ms,
            peer: Peer {
                ip: "127.0.0.1".to_owned(),
                port: 50_000,
            },
            sni: Some("localhost".to_owned()),
            ja4: Some("q13d0307h3_55b375c5d22e_1cecd519fee8".to_owned()),
            tls_voice_id: Some("tlsv2_x".to_owned()),
            quic_voice_id: Some("quicv1_x".to_owned()),
            http3_voice_id: None,
            h3_text: None,
            quic: Some(r#"{"version":"0x00000001"}"#.to_owned()),
            http3: None,
            hello: vec![0x01, 0x00, 0x00, 0x00],
        }
    }

    /// Every row, the ClientHello included, at most `limit`.
    fn all(limit: u32) -> ObservationQuery {
        ObservationQuery {
            limit,
            raw: true,
            ..ObservationQuery::default()
        }
    }

    fn request(
        conn_id: &str,
        index: u32,
        token: Option<&str>,
        time_unix_ms: i64,
    ) -> QuicRequestRow {
        QuicRequestRow {
            conn_id: conn_id.to_owned(),
            index,
            time_unix_ms,
            token: token.map(str::to_owned),
            method: "GET".to_owned(),
            path: "/api/all".to_owned(),
            stream_id: u64::from(4 * (index - 1)),
            pseudo_header_order: vec![":method".to_owned(), ":authority".to_owned()],
            header_order: vec!["user-agent".to_owned()],
        }
    }

    on_both_engines! {
        async fn quic_rows_are_stored_once_and_listed_by_token(store: Store) {
            let batch = Batch {
                quic_connections: vec![connection("q1", 1_000)],
                quic_requests: vec![request("q1", 1, Some("tok"), 1_000)],
                ..Batch::default()
            };
            store.write_batch(&batch).await.expect("write");
            // A second write of the same connection keeps the first row.
            let mut again = connection("q1", 2_000);
            again.ja4 = None;
            let later = Batch {
                quic_connections: vec![again],
                quic_requests: vec![request("q1", 2, None, 2_000)],
                ..Batch::default()
            };
            store.write_batch(&later).await.expect("write");
            let listed = store.quic_requests(&all(10)).await.expect("list");
            assert_eq!(listed.len(), 2);
            assert_eq!(listed[0].request, request("q1", 1, Some("tok"), 1_000));
            assert_eq!(listed[0].connection, Some(connection("q1", 1_000)));
            assert_eq!(listed[1].connection, Some(connection("q1", 1_000)));
            let mine = store.quic_requests(&ObservationQuery { token: Some("tok".to_owned()), ..all(10) }).await.expect("list");
            assert_eq!(mine.len(), 1);
            assert_eq!(mine[0].request.index, 1);
            assert_eq!(store.quic_requests(&all(1)).await.expect("list").len(), 1);
            let since = ObservationQuery { since_unix_ms: Some(1_500), raw: false, ..all(10) };
            let later = store.quic_requests(&since).await.expect("list");
            assert_eq!(later.len(), 1);
            assert_eq!(later[0].request.index, 2);
            // Without `raw` the ClientHello stays in the store.
            assert_eq!(later[0].connection.as_ref().map(|c| c.hello.len()), Some(0));
        }

        async fn retention_prunes_quic_rows_too(store: Store) {
            let batch = Batch {
                quic_connections: vec![connection("old", 1_000), connection("new", 9_000)],
                quic_requests: vec![request("old", 1, None, 1_000), request("new", 1, None, 9_000)],
                ..Batch::default()
            };
            store.write_batch(&batch).await.expect("write");
            let pruned = store.prune(Some(5_000), 100).await.expect("prune");
            assert_eq!((pruned.requests, pruned.connections), (1, 1));
            let left = store.quic_requests(&all(10)).await.expect("list");
            assert_eq!(left.len(), 1);
            assert_eq!(left[0].request.conn_id, "new");
        }
    }

    /// A SQLite database from before the QUIC tables (its migration history one short, no such
    /// tables) opens, gains them and keeps its TCP rows.
    #[tokio::test]
    async fn an_older_sqlite_database_moves_forward_without_loss() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("old.db");
        let store = Store::open(&path).await.expect("open");
        let rows = crate::observations::tests_support::one_tcp_observation();
        store.write_batch(&rows).await.expect("write");
        for sql in [
            "DROP TABLE quic_requests",
            "DROP TABLE quic_connections",
            "DELETE FROM _sqlx_migrations WHERE version = 8",
        ] {
            sqlx::query(sql).execute(store.pool()).await.expect(sql);
        }
        store.close().await;
        let store = Store::open(&path).await.expect("reopen");
        let tcp: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM requests")
            .fetch_one(store.pool())
            .await
            .expect("count");
        assert_eq!(tcp, i64::try_from(rows.requests.len()).expect("small"));
        let batch = Batch {
            quic_connections: vec![connection("q", 1_000)],
            quic_requests: vec![request("q", 1, None, 1_000)],
            ..Batch::default()
        };
        store.write_batch(&batch).await.expect("write QUIC rows");
        assert_eq!(store.quic_requests(&all(10)).await.expect("list").len(), 1);
    }
}
