//! The `probes` table: what the auditor found.

use sqlx::Row;

use crate::handle::{Store, StoreError};
use crate::values::{arguments, placeholders};

/// Probe columns.
const PROBE_COLUMNS: usize = 10;
/// Probe rows per INSERT statement (probes are few per commit; this bounds the statement).
const PROBES_PER_STATEMENT: usize = 64;
use exitvoice_schema::probe::ProbeRecord;
use exitvoice_schema::Bucket;

impl Store {
    /// Stores one probe record.
    ///
    /// # Errors
    /// Database or JSON encoding failures.
    pub async fn insert_probe(&self, record: &ProbeRecord) -> Result<(), StoreError> {
        self.insert_probes(std::slice::from_ref(record)).await
    }

    /// Stores probe records in one statement: what an auditor's writer has queued at once (a
    /// commit per record would cost more than the record).
    ///
    /// # Errors
    /// Database or JSON encoding failures; then none of `records` is stored.
    pub async fn insert_probes(&self, records: &[ProbeRecord]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool().begin().await?;
        for chunk in records.chunks(PROBES_PER_STATEMENT) {
            let json = chunk
                .iter()
                .map(serde_json::to_string)
                .collect::<Result<Vec<_>, _>>()?;
            let sql = format!(
                "INSERT INTO probes (run_id, exit_name, token, persona, started_at, error_class, \
                 tls_voice, http_voice, bucket, record) VALUES {}",
                placeholders(self.engine(), chunk.len(), PROBE_COLUMNS)
            );
            let mut insert = sqlx::query_with(&sql, arguments(chunk.len(), PROBE_COLUMNS));
            for (record, json) in chunk.iter().zip(json) {
                let sample = record.sample.as_ref();
                insert = insert
                    .bind(&record.run_id)
                    .bind(&record.exit)
                    .bind(&record.token)
                    .bind(&record.persona)
                    .bind(&record.started_at)
                    .bind(record.error.as_ref().map(|e| e.class.as_str()))
                    .bind(
                        sample
                            .and_then(|s| s.tls_voice.as_ref())
                            .map(|v| v.0.as_str()),
                    )
                    .bind(
                        sample
                            .and_then(|s| s.h2_voice.as_ref().or(s.h1_voice.as_ref()))
                            .map(|v| v.0.as_str()),
                    )
                    .bind(sample.and_then(|s| s.bucket).map(Bucket::as_str))
                    .bind(json);
            }
            insert.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The most recent `limit` probes of `exit` (`None`: the baseline) for `persona`, oldest first.
    ///
    /// # Errors
    /// Database or JSON decoding failures.
    pub async fn recent_probes(
        &self,
        exit: Option<&str>,
        persona: &str,
        limit: u32,
    ) -> Result<Vec<ProbeRecord>, StoreError> {
        // Two statements rather than `IS NOT DISTINCT FROM`, which PostgreSQL cannot answer from
        // the (exit_name, id) index.
        let select = match exit {
            Some(exit) => sqlx::query(
                "SELECT record FROM probes WHERE exit_name = $1 AND persona = $2 \
                 ORDER BY id DESC LIMIT $3",
            )
            .bind(exit),
            None => sqlx::query(
                "SELECT record FROM probes WHERE exit_name IS NULL AND persona = $1 \
                 ORDER BY id DESC LIMIT $2",
            ),
        };
        let rows = select
            .bind(persona)
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        let mut records = rows
            .iter()
            .map(|row| {
                let json: String = row.try_get("record")?;
                Ok(serde_json::from_str(&json)?)
            })
            .collect::<Result<Vec<ProbeRecord>, StoreError>>()?;
        records.reverse();
        Ok(records)
    }

    /// The probe that sent `token`, if it is stored.
    ///
    /// # Errors
    /// Database or JSON decoding failures.
    pub async fn probe_by_token(&self, token: &str) -> Result<Option<ProbeRecord>, StoreError> {
        let record: Option<String> = sqlx::query_scalar(
            "SELECT record FROM probes WHERE token = $1 ORDER BY id DESC LIMIT 1",
        )
        .bind(token)
        .fetch_optional(self.pool())
        .await?;
        Ok(record.map(|json| serde_json::from_str(&json)).transpose()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitvoice_schema::probe::{ProbeFailure, PROBE_SCHEMA_VERSION};

    fn record(exit: Option<&str>, persona: &str, token: &str) -> ProbeRecord {
        ProbeRecord {
            schema_version: PROBE_SCHEMA_VERSION,
            run_id: "r".into(),
            exit: exit.map(str::to_owned),
            exit_url: exit.map(|_| "http://u:***@h:1".to_owned()),
            session: None,
            token: token.into(),
            persona: persona.into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            latency_ms: None,
            error: Some(ProbeFailure {
                class: "timeout".into(),
                phase: Some("tunnel".into()),
                message: "tunnel timed out".into(),
            }),
            sample: None,
            retried: Vec::new(),
            h3: None,
            ledger: None,
        }
    }

    on_both_engines! {
        async fn probes_round_trip_per_exit_and_persona_oldest_first(store: Store) {
            for token in ["a", "b", "c"] {
                store
                    .insert_probe(&record(Some("x"), "p", token))
                    .await
                    .unwrap();
            }
            store
                .insert_probes(&[record(Some("y"), "p", "d"), record(Some("y"), "p", "d2")])
                .await
                .unwrap();
            store
                .insert_probe(&record(Some("x"), "q", "e"))
                .await
                .unwrap();
            store
                .insert_probe(&record(None, "p", "base"))
                .await
                .unwrap();

            let tokens = |records: Vec<ProbeRecord>| -> Vec<String> {
                records.into_iter().map(|r| r.token).collect()
            };
            assert_eq!(
                tokens(store.recent_probes(Some("x"), "p", 2).await.unwrap()),
                ["b", "c"]
            );
            assert_eq!(
                tokens(store.recent_probes(Some("x"), "q", 9).await.unwrap()),
                ["e"]
            );
            assert_eq!(
                tokens(store.recent_probes(None, "p", 9).await.unwrap()),
                ["base"]
            );
            let back = store.recent_probes(Some("y"), "p", 1).await.unwrap();
            assert_eq!(back, vec![record(Some("y"), "p", "d2")], "a batch keeps its order");
            let found = store.probe_by_token("d").await.unwrap();
            assert_eq!(found, Some(record(Some("y"), "p", "d")));
            assert!(store.probe_by_token("nope").await.unwrap().is_none());
        }
    }

    /// PostgreSQL compresses a large record with lz4 (migration 0011), and it reads back whole.
    #[tokio::test]
    async fn postgres_compresses_large_records_with_lz4() {
        let url = exitvoice_pgtest::fresh_database("probes_lz4");
        let store = Store::connect(&url.parse().expect("a postgres URL"))
            .await
            .expect("connect");
        let mut big = record(Some("x"), "p", "big");
        if let Some(error) = big.error.as_mut() {
            error.message = (0..2_000).map(|i| format!("{} ", i % 97)).collect();
        }
        store.insert_probe(&big).await.unwrap();
        // The server's own account of how the stored value is compressed.
        let method: Option<String> = sqlx::query_scalar(
            "SELECT pg_column_compression(record)::TEXT FROM probes WHERE token = 'big'",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!(method.as_deref(), Some("lz4"));
        assert_eq!(store.probe_by_token("big").await.unwrap(), Some(big));
    }
}
