//! The `observations` table: batched inserts from the echo server's writer, and queries for
//! `GET /api/observations`.

use sqlx::sqlite::SqliteConnection;
use sqlx::{Connection as _, Row as _};

use super::{Store, StoreError};
use crate::echo::Peer;
use crate::observation::{Observation, ObservationQuery, StoredObservation};

impl Store {
    /// Inserts `batch` in one transaction: all rows or none.
    ///
    /// # Errors
    /// Fails if the transaction fails (disk full, read-only file, …) or a summary cannot be
    /// encoded; nothing of the batch is stored then.
    pub async fn insert_observations(&self, batch: &[Observation]) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        let inserted = insert_batch(&mut conn, batch).await;
        if inserted.is_err() {
            // After a failed COMMIT (I/O error, full disk) SQLite may or may not have rolled the
            // transaction back (https://sqlite.org/lang_transaction.html, "Response To Errors
            // Within A Transaction"), and sqlx's own idea of the transaction depth can then be
            // wrong: a connection returned to the pool like that turns every later batch into a
            // savepoint of a transaction that is never committed, reported as written and lost
            // at close. Closing it rolls back whatever is open; the pool opens a fresh one.
            conn.close_on_drop();
        }
        inserted
    }

    /// Stored observations matching `query`, oldest first.
    ///
    /// # Errors
    /// Fails if the query fails or a stored row is malformed.
    pub async fn observations(
        &self,
        query: &ObservationQuery,
    ) -> Result<Vec<StoredObservation>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, conn_id, request_index, time, time_unix_ms, peer_ip, peer_port, token, \
             sni, failure, summary, hello, prefix FROM observations \
             WHERE (?1 IS NULL OR token = ?1) AND (?2 IS NULL OR time_unix_ms >= ?2) \
             ORDER BY id LIMIT ?3",
        )
        .bind(&query.token)
        .bind(query.since_unix_ms)
        .bind(i64::from(query.limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(stored_observation).collect()
    }

    /// Number of stored observations.
    ///
    /// # Errors
    /// Fails if the query fails.
    pub async fn observation_count(&self) -> Result<u64, StoreError> {
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM observations")
            .fetch_one(self.pool())
            .await?;
        Ok(u64::try_from(count).unwrap_or(0))
    }
}

fn stored_observation(row: &sqlx::sqlite::SqliteRow) -> Result<StoredObservation, StoreError> {
    let summary: String = row.try_get("summary")?;
    let request_index: i64 = row.try_get("request_index")?;
    let port: i64 = row.try_get("peer_port")?;
    Ok(StoredObservation {
        id: row.try_get("id")?,
        observation: Observation {
            conn_id: row.try_get("conn_id")?,
            request_index: u32::try_from(request_index).unwrap_or(u32::MAX),
            time: row.try_get("time")?,
            time_unix_ms: row.try_get("time_unix_ms")?,
            peer: Peer {
                ip: row.try_get("peer_ip")?,
                port: u16::try_from(port).unwrap_or(0),
            },
            token: row.try_get("token")?,
            sni: row.try_get("sni")?,
            failure: row.try_get("failure")?,
            summary: serde_json::from_str(&summary)?,
            hello: row.try_get("hello")?,
            prefix: row.try_get("prefix")?,
        },
    })
}

/// Inserts `batch` in one transaction on `conn`.
async fn insert_batch(
    conn: &mut SqliteConnection,
    batch: &[Observation],
) -> Result<(), StoreError> {
    let mut tx = conn.begin().await?;
    for observation in batch {
        let summary = serde_json::to_string(&observation.summary)?;
        sqlx::query(
            "INSERT INTO observations (conn_id, request_index, time, time_unix_ms, peer_ip, \
             peer_port, token, sni, failure, summary, hello, prefix) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&observation.conn_id)
        .bind(i64::from(observation.request_index))
        .bind(&observation.time)
        .bind(observation.time_unix_ms)
        .bind(&observation.peer.ip)
        .bind(i64::from(observation.peer.port))
        .bind(&observation.token)
        .bind(&observation.sni)
        .bind(&observation.failure)
        .bind(summary)
        .bind(&observation.hello)
        .bind(&observation.prefix)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observation(conn_id: &str, token: Option<&str>, time_unix_ms: i64) -> Observation {
        Observation {
            conn_id: conn_id.to_owned(),
            request_index: 1,
            time: "2026-01-01T00:00:00Z".to_owned(),
            time_unix_ms,
            peer: Peer {
                ip: "127.0.0.1".to_owned(),
                port: 5000,
            },
            token: token.map(str::to_owned),
            sni: Some("localhost".to_owned()),
            failure: None,
            summary: serde_json::json!({"path": "/api/all"}),
            hello: vec![0x16, 0x03, 0x01],
            prefix: b"PRI * HTTP/2.0\r\n".to_vec(),
        }
    }

    #[tokio::test]
    async fn batch_round_trips_and_filters_by_token_and_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("o.db")).await.expect("open");
        let batch = [
            observation("a", Some("t1"), 1_000),
            observation("b", Some("t2"), 2_000),
            observation("c", Some("t1"), 3_000),
        ];
        store.insert_observations(&batch).await.expect("insert");
        assert_eq!(store.observation_count().await.expect("count"), 3);

        let all = ObservationQuery {
            limit: 10,
            ..ObservationQuery::default()
        };
        let rows = store.observations(&all).await.expect("query");
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[1].observation, batch[1]);

        let t1_late = ObservationQuery {
            token: Some("t1".to_owned()),
            since_unix_ms: Some(2_000),
            limit: 10,
        };
        let rows = store.observations(&t1_late).await.expect("query");
        let ids: Vec<&str> = rows
            .iter()
            .map(|r| r.observation.conn_id.as_str())
            .collect();
        assert_eq!(ids, ["c"]);

        let limited = ObservationQuery {
            limit: 1,
            ..ObservationQuery::default()
        };
        assert_eq!(store.observations(&limited).await.expect("query").len(), 1);
    }
}
