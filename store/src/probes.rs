//! The `probes` and `label_snapshots` tables: what the auditor found, and what it exported.

use sqlx::Row;

use crate::handle::{Store, StoreError};
use crate::values::placeholders;

/// Probe columns.
const PROBE_COLUMNS: usize = 10;
/// Probe rows per INSERT statement (probes are few per commit; this bounds the statement).
const PROBES_PER_STATEMENT: usize = 64;
use exitvoice_schema::label::LabelsDoc;
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
            let mut insert = sqlx::query(&sql);
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

    /// Stores a labels snapshot.
    ///
    /// # Errors
    /// Database or JSON encoding failures.
    pub async fn insert_labels(&self, doc: &LabelsDoc) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO label_snapshots (generated_at, persona, doc) VALUES ($1, $2, $3)")
            .bind(&doc.generated_at)
            .bind(&doc.persona)
            .bind(serde_json::to_string(doc)?)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// The most recent labels snapshot of `persona` (version 2 snapshots name theirs), if any.
    ///
    /// # Errors
    /// Database or JSON decoding failures.
    pub async fn latest_labels_of(&self, persona: &str) -> Result<Option<LabelsDoc>, StoreError> {
        let doc: Option<String> = sqlx::query_scalar(
            "SELECT doc FROM label_snapshots WHERE persona = $1 \
             ORDER BY id DESC LIMIT 1",
        )
        .bind(persona)
        .fetch_optional(self.pool())
        .await?;
        Ok(doc.map(|json| serde_json::from_str(&json)).transpose()?)
    }

    /// The id of the most recent labels snapshot of `persona`, if any: a cheap check whether
    /// the snapshot changed since it was last read.
    ///
    /// # Errors
    /// Database failures.
    pub async fn latest_labels_id_of(&self, persona: &str) -> Result<Option<i64>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM label_snapshots WHERE persona = $1 ORDER BY id DESC LIMIT 1",
        )
        .bind(persona)
        .fetch_optional(self.pool())
        .await?)
    }

    /// The labels snapshot `id`, if it is stored.
    ///
    /// # Errors
    /// Database or JSON decoding failures.
    pub async fn labels_by_id(&self, id: i64) -> Result<Option<LabelsDoc>, StoreError> {
        let doc: Option<String> =
            sqlx::query_scalar("SELECT doc FROM label_snapshots WHERE id = $1")
                .bind(id)
                .fetch_optional(self.pool())
                .await?;
        Ok(doc.map(|json| serde_json::from_str(&json)).transpose()?)
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

    /// The most recent labels snapshot, if any.
    ///
    /// # Errors
    /// Database or JSON decoding failures.
    pub async fn latest_labels(&self) -> Result<Option<LabelsDoc>, StoreError> {
        let doc: Option<String> =
            sqlx::query_scalar("SELECT doc FROM label_snapshots ORDER BY id DESC LIMIT 1")
                .fetch_optional(self.pool())
                .await?;
        Ok(doc.map(|json| serde_json::from_str(&json)).transpose()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitvoice_schema::label::LABELS_SCHEMA_VERSION;
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

        async fn latest_labels_snapshot(store: Store) {
            assert!(store.latest_labels().await.unwrap().is_none());
            for at in ["1", "2"] {
                let doc = LabelsDoc {
                    schema_version: LABELS_SCHEMA_VERSION,
                    generated_at: at.into(),
                    persona: None,
                    baseline: None,
                    pool: None,
                    exits: vec![],
                };
                store.insert_labels(&doc).await.unwrap();
            }
            let latest = store.latest_labels().await.unwrap().unwrap();
            assert_eq!(latest.generated_at, "2");
            // Per persona: version 1 snapshots (no persona) are nobody's.
            assert!(store.latest_labels_of("p").await.unwrap().is_none());
            for (at, persona) in [("3", "p"), ("4", "q")] {
                let doc = LabelsDoc {
                    schema_version: LABELS_SCHEMA_VERSION,
                    generated_at: at.into(),
                    persona: Some(persona.into()),
                    baseline: None,
                    pool: None,
                    exits: vec![],
                };
                store.insert_labels(&doc).await.unwrap();
            }
            let of_p = store.latest_labels_of("p").await.unwrap().unwrap();
            assert_eq!(of_p.generated_at, "3");
        }
    }
}
