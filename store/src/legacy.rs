//! Moves a database written before the connection/request split forward: every row of the old
//! `observations` table (one per request, each carrying its connection's echo, ClientHello and
//! prefix again; `request_index` 0 for a connection without a request) becomes one connection
//! row per connection and one request row per request, in one transaction, and the old table is
//! dropped. A database without that table is left alone.

use sqlx::AnyPool;
use sqlx::Row as _;

use crate::handle::StoreError;
use crate::observations::{insert_rows, Batch};
use exitvoice_schema::echo::{Echo, Http2Connection, Peer, TlsEcho};
use exitvoice_schema::observation::{ConnectionFacts, ConnectionRow, RequestRecord};

/// Rows read from the old table at a time.
const CHUNK: i64 = 512;

/// Runs the move if the old table exists.
pub(crate) async fn move_observations(pool: &AnyPool) -> Result<(), StoreError> {
    let exists: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'observations'",
    )
    .fetch_one(pool)
    .await?;
    if exists == 0 {
        return Ok(());
    }
    let mut tx = pool.begin().await?;
    let mut after = 0_i64;
    let mut moved = 0_u64;
    loop {
        let rows = sqlx::query(
            "SELECT id, conn_id, request_index, time_unix_ms, peer_ip, peer_port, token, sni, \
             failure, summary, hello, prefix FROM observations WHERE id > $1 ORDER BY id LIMIT $2",
        )
        .bind(after)
        .bind(CHUNK)
        .fetch_all(&mut *tx)
        .await?;
        let Some(last) = rows.last() else { break };
        after = last.try_get("id")?;
        let mut batch = Batch::default();
        for row in &rows {
            let old = OldRow {
                conn_id: row.try_get("conn_id")?,
                request_index: row.try_get("request_index")?,
                time_unix_ms: row.try_get("time_unix_ms")?,
                peer: Peer {
                    ip: row.try_get("peer_ip")?,
                    port: u16::try_from(row.try_get::<i64, _>("peer_port")?).unwrap_or(0),
                },
                token: row.try_get("token")?,
                sni: row.try_get("sni")?,
                failure: row.try_get("failure")?,
                summary: serde_json::from_str(row.try_get::<&str, _>("summary")?)?,
                hello: row.try_get("hello")?,
                prefix: row.try_get("prefix")?,
            };
            old.convert(&mut batch)?;
            moved += 1;
        }
        // Several old rows of one connection each carry its bytes: the later (longer) prefix
        // and request count win, as when the server updates a connection at its end.
        insert_rows(&mut tx, &batch).await?;
    }
    sqlx::query("DROP TABLE observations")
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    // A fresh database has the old table too (its first migration made it, empty): dropping
    // it moved nothing worth a word.
    if moved > 0 {
        tracing::info!(
            moved,
            "observations moved to the connection and request tables"
        );
    }
    Ok(())
}

/// One row of the old table.
struct OldRow {
    conn_id: String,
    request_index: i64,
    time_unix_ms: i64,
    peer: Peer,
    token: Option<String>,
    sni: Option<String>,
    failure: Option<String>,
    summary: serde_json::Value,
    hello: Vec<u8>,
    prefix: Vec<u8>,
}

impl OldRow {
    /// The connection row (and request row, for a request) this old row stands for.
    fn convert(self, batch: &mut Batch) -> Result<(), StoreError> {
        // The old failure was `reason: description`; the reason is the typed part.
        let failure = self
            .failure
            .as_deref()
            .and_then(|f| f.split(':').next())
            .and_then(|reason| serde_json::from_value(reason.trim().into()).ok());
        let mut facts = ConnectionFacts {
            sni: self.sni.clone(),
            ..ConnectionFacts::default()
        };
        let request = if self.request_index == 0 {
            let summary = &self.summary;
            facts.alpn = serde_json::from_value(summary["alpn"].clone()).unwrap_or_default();
            facts.tls_version = serde_json::from_value(summary["tls_version"].clone())?;
            facts.cipher = serde_json::from_value(summary["cipher"].clone())?;
            facts.tls = serde_json::from_value::<Option<TlsEcho>>(summary["tls"].clone())?;
            facts.tls_error = serde_json::from_value(summary["tls_error"].clone())?;
            None
        } else {
            let echo: Echo = serde_json::from_value(self.summary)?;
            facts.alpn = echo.alpn.clone();
            facts.tls = echo.tls.clone();
            facts.http2 = echo.http2.as_ref().map(|h2| Http2Connection {
                akamai_fingerprint: h2.akamai_fingerprint.clone(),
                akamai_fingerprint_hash: h2.akamai_fingerprint_hash.clone(),
                voice_id: h2.voice_id.clone(),
                profile: echo.profile.clone(),
                own_preface_and_settings: echo.bucket != Some(exitvoice_schema::voice::Bucket::C),
                detail: h2.detail.clone(),
            });
            Some(RequestRecord {
                conn_id: self.conn_id.clone(),
                index: u32::try_from(self.request_index).unwrap_or(u32::MAX),
                time_unix_ms: self.time_unix_ms,
                token: self.token,
                method: echo.method,
                path: echo.path,
                stream_id: echo.request.stream_id,
                bucket: echo.bucket,
                pseudo_header_order: echo
                    .http2
                    .as_ref()
                    .map(|h2| h2.pseudo_header_order.clone())
                    .unwrap_or_default(),
                header_order: echo.http2.map(|h2| h2.header_order).unwrap_or_default(),
                http1: echo.http1,
            })
        };
        batch.connections.push(ConnectionRow {
            conn_id: self.conn_id,
            time_unix_ms: self.time_unix_ms,
            peer: self.peer,
            facts: std::sync::Arc::new(facts),
            failure,
            failure_detail: self.failure,
            requests: request.as_ref().map_or(0, |r| r.index),
            prefix_truncated: false,
            // The old rows' facts keep the layers they were stored with: nothing is derived.
            analysed_prefix_len: None,
            hello: self.hello,
            prefix: self.prefix,
            syn: Vec::new(),
            latency: None,
        });
        batch.requests.extend(request);
        Ok(())
    }
}
