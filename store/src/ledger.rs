//! The `ledger_identities` table: the echo's h3 downgrade ledger (docs/quic.md, "The ledger"),
//! one row per client identity, rewritten in the writer's transactions as the identity changes
//! ([`crate::Batch::ledger`]) and read back when the server starts. The entry is the echo's
//! JSON; the store keeps it as it is.

use sqlx::{AnyConnection, Row as _};

use crate::handle::{Engine, Store, StoreError};
use crate::values::{arguments, cached_chunks, insert_into, placeholders};

/// Identities per upsert statement.
const ROWS_PER_STATEMENT: usize = 128;
const COLUMNS: usize = 4;

/// One ledger identity as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerRow {
    /// The client's IP over TCP.
    pub client_ip: String,
    /// The TLS voice of its TCP connections.
    pub tls_voice_id: String,
    /// When the entry last changed, Unix ms.
    pub updated_unix_ms: i64,
    /// The entry, JSON.
    pub entry: String,
}

impl Store {
    /// The entries of the identities that changed at or after `since_unix_ms`, oldest change
    /// first, at most `limit`.
    ///
    /// # Errors
    /// Fails if the query fails.
    pub async fn ledger_since(
        &self,
        since_unix_ms: i64,
        limit: u32,
    ) -> Result<Vec<LedgerRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT client_ip, tls_voice_id, updated_unix_ms, entry FROM ledger_identities \
             WHERE updated_unix_ms >= $1 ORDER BY updated_unix_ms LIMIT $2",
        )
        .bind(since_unix_ms)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                Ok(LedgerRow {
                    client_ip: row.try_get("client_ip")?,
                    tls_voice_id: row.try_get("tls_voice_id")?,
                    updated_unix_ms: row.try_get("updated_unix_ms")?,
                    entry: row.try_get("entry")?,
                })
            })
            .collect()
    }
}

/// Writes `rows` inside the caller's transaction, each replacing its identity's row. One
/// identity at most once per statement (PostgreSQL refuses to update a row twice in one
/// `INSERT … ON CONFLICT DO UPDATE`): the writer hands each changed identity once.
pub(crate) async fn upsert_rows(
    conn: &mut AnyConnection,
    rows: &[LedgerRow],
) -> Result<(), StoreError> {
    let engine = Engine::of(conn);
    for chunk in cached_chunks(rows, ROWS_PER_STATEMENT) {
        let sql = format!(
            "{} ledger_identities (client_ip, tls_voice_id, updated_unix_ms, entry) \
             VALUES {} ON CONFLICT (client_ip, tls_voice_id) DO UPDATE SET \
             updated_unix_ms = excluded.updated_unix_ms, entry = excluded.entry",
            insert_into(engine),
            placeholders(engine, chunk.len(), COLUMNS)
        );
        let mut upsert = sqlx::query_with(&sql, arguments(chunk.len(), COLUMNS));
        for row in chunk {
            upsert = upsert
                .bind(&row.client_ip)
                .bind(&row.tls_voice_id)
                .bind(row.updated_unix_ms)
                .bind(&row.entry);
        }
        upsert.execute(&mut *conn).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Batch;

    fn row(ip: &str, voice: &str, at: i64, entry: &str) -> LedgerRow {
        LedgerRow {
            client_ip: ip.to_owned(),
            tls_voice_id: voice.to_owned(),
            updated_unix_ms: at,
            entry: entry.to_owned(),
        }
    }

    on_both_engines! {
        async fn ledger_rows_are_replaced_per_identity_and_read_back(store: Store) {
            let first = Batch {
                ledger: vec![row("192.0.2.1", "tlsv2_a", 1_000, "{\"n\":1}"), row("192.0.2.1", "tlsv2_b", 1_500, "{}")],
                ..Batch::default()
            };
            store.write_batch(&first).await.expect("write");
            let later = Batch {
                ledger: vec![row("192.0.2.1", "tlsv2_a", 3_000, "{\"n\":2}")],
                ..Batch::default()
            };
            store.write_batch(&later).await.expect("write");
            let all = store.ledger_since(0, 10).await.expect("read");
            assert_eq!(
                all,
                [row("192.0.2.1", "tlsv2_b", 1_500, "{}"), row("192.0.2.1", "tlsv2_a", 3_000, "{\"n\":2}")]
            );
            assert_eq!(store.ledger_since(2_000, 10).await.expect("read").len(), 1);
            assert_eq!(store.ledger_since(0, 1).await.expect("read").len(), 1);
            // Retention drops identities unchanged since the cut.
            store.prune(Some(2_000), 100).await.expect("prune");
            assert_eq!(store.ledger_since(0, 10).await.expect("read").len(), 1);
        }
    }
}
