//! The `probes` and `label_snapshots` tables: what the auditor found, and what it exported.

use sqlx::Row;

use super::{Store, StoreError};
use crate::label::LabelsDoc;
use crate::probe::ProbeRecord;

impl Store {
    /// Stores one probe record.
    ///
    /// # Errors
    /// Database or JSON encoding failures.
    pub async fn insert_probe(&self, record: &ProbeRecord) -> Result<(), StoreError> {
        let json = serde_json::to_string(record)?;
        let sample = record.sample.as_ref();
        sqlx::query(
            "INSERT INTO probes (run_id, exit_name, token, persona, started_at, error_class, \
             tls_voice, http_voice, bucket, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
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
        .bind(sample.and_then(|s| s.bucket).map(|b| b.to_string()))
        .bind(json)
        .execute(self.pool())
        .await?;
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
        let rows = sqlx::query(
            "SELECT record FROM probes WHERE exit_name IS ? AND persona = ? \
             ORDER BY id DESC LIMIT ?",
        )
        .bind(exit)
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
        sqlx::query("INSERT INTO label_snapshots (generated_at, doc) VALUES (?, ?)")
            .bind(&doc.generated_at)
            .bind(serde_json::to_string(doc)?)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// The most recent labels snapshot, if any.
    ///
    /// # Errors
    /// Database or JSON decoding failures.
    pub async fn latest_labels(&self) -> Result<Option<LabelsDoc>, StoreError> {
        let row = sqlx::query("SELECT doc FROM label_snapshots ORDER BY id DESC LIMIT 1")
            .fetch_optional(self.pool())
            .await?;
        match row {
            Some(row) => {
                let json: String = row.try_get("doc")?;
                Ok(Some(serde_json::from_str(&json)?))
            }
            None => Ok(None),
        }
    }
}
