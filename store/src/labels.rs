//! The `label_snapshots` and `exit_labels` tables: what the auditor exported, a row per exit.
//!
//! A snapshot is written one exit at a time ([`LabelsWriter`]) and read a page at a time
//! ([`LabelsReader`]): a pool of 100,000 exits is never one document in memory. The snapshot's
//! own row holds the document without its exits (`"exits": []`) and how many rows it has.
//! Snapshots stored before the rows existed hold their exits in that document (the count is
//! NULL) and read the same way.

use exitvoice_schema::label::{ExitLabel, LabelsDoc};

use crate::handle::{Store, StoreError};
use crate::values::{arguments, placeholders};

/// Columns of an `exit_labels` row.
const LABEL_COLUMNS: usize = 4;
/// Label rows per INSERT statement.
const LABELS_PER_STATEMENT: usize = 64;
/// Label rows written per transaction.
const LABELS_PER_COMMIT: usize = 512;
/// Why a reader stops: a snapshot pruned (`audit --retain`) while it was being read.
const ROWS_WENT: &str = "labels snapshot rows went while read";
/// Label rows read per page.
const LABELS_PER_PAGE: usize = 512;

/// A labels snapshot being written. It is nobody's latest until [`LabelsWriter::finish`]
/// publishes it; one left unpublished is read by its id, then [`Store::discard_labels`].
#[derive(Debug)]
pub struct LabelsWriter<'s> {
    store: &'s Store,
    id: i64,
    /// `(name, label JSON)` not yet written.
    pending: Vec<(String, String)>,
    /// Rows written, the next row's position.
    written: i64,
}

impl Store {
    /// Starts a labels snapshot generated at `generated_at` (RFC 3339) for `persona`.
    ///
    /// # Errors
    /// Database failures.
    pub async fn begin_labels(
        &self,
        generated_at: &str,
        persona: Option<&str>,
    ) -> Result<LabelsWriter<'_>, StoreError> {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO label_snapshots (generated_at, persona, doc, exits, published) \
             VALUES ($1, $2, '{}', 0, FALSE) RETURNING id",
        )
        .bind(generated_at)
        .bind(persona)
        .fetch_one(self.pool())
        .await?;
        Ok(LabelsWriter {
            store: self,
            id,
            pending: Vec::with_capacity(LABELS_PER_COMMIT),
            written: 0,
        })
    }

    /// Stores a whole labels snapshot, published; returns its id.
    ///
    /// # Errors
    /// Database or JSON encoding failures.
    pub async fn insert_labels(&self, doc: &LabelsDoc) -> Result<i64, StoreError> {
        let mut writer = self
            .begin_labels(&doc.generated_at, doc.persona.as_deref())
            .await?;
        for label in &doc.exits {
            writer.push(label).await?;
        }
        let header = LabelsDoc {
            schema_version: doc.schema_version,
            generated_at: doc.generated_at.clone(),
            persona: doc.persona.clone(),
            baseline: doc.baseline.clone(),
            pool: doc.pool.clone(),
            exits: Vec::new(),
        };
        writer.finish(header, true).await
    }

    /// Removes snapshot `id` if it was never published (a published one stays).
    ///
    /// # Errors
    /// Database failures.
    pub async fn discard_labels(&self, id: i64) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        let gone = sqlx::query("DELETE FROM label_snapshots WHERE id = $1 AND NOT published")
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if gone > 0 {
            sqlx::query("DELETE FROM exit_labels WHERE snapshot_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The id of the most recent published labels snapshot of `persona` (version 2 snapshots
    /// name theirs), if any: a cheap check whether the snapshot changed since it was last read.
    ///
    /// # Errors
    /// Database failures.
    pub async fn latest_labels_id_of(&self, persona: &str) -> Result<Option<i64>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM label_snapshots WHERE persona = $1 AND published \
             ORDER BY id DESC LIMIT 1",
        )
        .bind(persona)
        .fetch_optional(self.pool())
        .await?)
    }

    /// The id of the most recent published labels snapshot of any persona, if any.
    ///
    /// # Errors
    /// Database failures.
    pub async fn latest_labels_id(&self) -> Result<Option<i64>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM label_snapshots WHERE published ORDER BY id DESC LIMIT 1",
        )
        .fetch_optional(self.pool())
        .await?)
    }

    /// A reader of snapshot `id` (published or not), if it is stored.
    ///
    /// # Errors
    /// Database or JSON decoding failures.
    pub async fn read_labels(&self, id: i64) -> Result<Option<LabelsReader<'_>>, StoreError> {
        let row: Option<(String, Option<i64>)> =
            sqlx::query_as("SELECT doc, exits FROM label_snapshots WHERE id = $1")
                .bind(id)
                .fetch_optional(self.pool())
                .await?;
        let Some((doc, rows)) = row else {
            return Ok(None);
        };
        let mut header: LabelsDoc = serde_json::from_str(&doc)?;
        let stored_whole = rows
            .is_none()
            .then(|| std::mem::take(&mut header.exits).into_iter());
        Ok(Some(LabelsReader {
            store: self,
            id,
            header,
            stored_whole,
            rows: rows.unwrap_or(0),
            next: 0,
        }))
    }

    /// Exit `name`'s label in snapshot `id`, if it has one there. Only for snapshots stored a
    /// row per exit ([`LabelsReader::by_rows`]).
    ///
    /// # Errors
    /// Database or JSON decoding failures.
    pub async fn exit_label(&self, id: i64, name: &str) -> Result<Option<ExitLabel>, StoreError> {
        let label: Option<String> = sqlx::query_scalar(
            "SELECT label FROM exit_labels WHERE snapshot_id = $1 AND name = $2",
        )
        .bind(id)
        .bind(name)
        .fetch_optional(self.pool())
        .await?;
        Ok(label.map(|json| serde_json::from_str(&json)).transpose()?)
    }

    /// The labels snapshot `id`, whole, if it is stored.
    ///
    /// # Errors
    /// Database or JSON decoding failures.
    pub async fn labels_by_id(&self, id: i64) -> Result<Option<LabelsDoc>, StoreError> {
        match self.read_labels(id).await? {
            Some(reader) => Ok(Some(reader.into_doc().await?)),
            None => Ok(None),
        }
    }

    /// The most recent published labels snapshot of `persona`, whole, if any.
    ///
    /// # Errors
    /// Database or JSON decoding failures.
    pub async fn latest_labels_of(&self, persona: &str) -> Result<Option<LabelsDoc>, StoreError> {
        match self.latest_labels_id_of(persona).await? {
            Some(id) => self.labels_by_id(id).await,
            None => Ok(None),
        }
    }

    /// The most recent published labels snapshot, whole, if any.
    ///
    /// # Errors
    /// Database or JSON decoding failures.
    pub async fn latest_labels(&self) -> Result<Option<LabelsDoc>, StoreError> {
        match self.latest_labels_id().await? {
            Some(id) => self.labels_by_id(id).await,
            None => Ok(None),
        }
    }
}

impl LabelsWriter<'_> {
    /// The snapshot's id.
    #[must_use]
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Adds the next exit's label (exits-file order).
    ///
    /// # Errors
    /// Database or JSON encoding failures.
    pub async fn push(&mut self, label: &ExitLabel) -> Result<(), StoreError> {
        self.pending
            .push((label.name.clone(), serde_json::to_string(label)?));
        if self.pending.len() >= LABELS_PER_COMMIT {
            self.flush().await?;
        }
        Ok(())
    }

    /// Writes the rest of the rows and the snapshot's document (`header`, whose `exits` are
    /// the rows, not its own), published or not; returns the snapshot's id.
    ///
    /// # Errors
    /// Database or JSON encoding failures.
    pub async fn finish(mut self, mut header: LabelsDoc, publish: bool) -> Result<i64, StoreError> {
        self.flush().await?;
        header.exits.clear();
        sqlx::query(
            "UPDATE label_snapshots SET doc = $1, exits = $2, published = $3 WHERE id = $4",
        )
        .bind(serde_json::to_string(&header)?)
        .bind(self.written)
        .bind(publish)
        .bind(self.id)
        .execute(self.store.pool())
        .await?;
        Ok(self.id)
    }

    async fn flush(&mut self) -> Result<(), StoreError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut tx = self.store.pool().begin().await?;
        let mut position = self.written;
        for chunk in self.pending.chunks(LABELS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO exit_labels (snapshot_id, position, name, label) VALUES {}",
                placeholders(self.store.engine(), chunk.len(), LABEL_COLUMNS)
            );
            let mut insert = sqlx::query_with(&sql, arguments(chunk.len(), LABEL_COLUMNS));
            for (name, label) in chunk {
                insert = insert.bind(self.id).bind(position).bind(name).bind(label);
                position += 1;
            }
            insert.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        self.written = position;
        self.pending.clear();
        Ok(())
    }
}

/// A stored labels snapshot, read a page of exits at a time in exits-file order.
#[derive(Debug)]
pub struct LabelsReader<'s> {
    store: &'s Store,
    id: i64,
    /// The snapshot without its exits.
    header: LabelsDoc,
    /// The exits of a snapshot stored as one document, not yet read.
    stored_whole: Option<std::vec::IntoIter<ExitLabel>>,
    /// The rows the snapshot was stored with.
    rows: i64,
    /// The next row's position.
    next: i64,
}

impl LabelsReader<'_> {
    /// The snapshot's id.
    #[must_use]
    pub fn id(&self) -> i64 {
        self.id
    }

    /// The snapshot without its exits.
    #[must_use]
    pub fn header(&self) -> &LabelsDoc {
        &self.header
    }

    /// Whether the snapshot is stored a row per exit (else as one document).
    #[must_use]
    pub fn by_rows(&self) -> bool {
        self.stored_whole.is_none()
    }

    /// The next exits, up to a page; `None` once all were read.
    ///
    /// # Errors
    /// Database or JSON decoding failures; [`StoreError::Malformed`] when rows are missing (the
    /// snapshot was pruned while it was read, `audit --retain`): a reader never takes part of a
    /// snapshot for the whole.
    pub async fn next_page(&mut self) -> Result<Option<Vec<ExitLabel>>, StoreError> {
        if let Some(rest) = &mut self.stored_whole {
            let page: Vec<ExitLabel> = rest.by_ref().take(LABELS_PER_PAGE).collect();
            return Ok((!page.is_empty()).then_some(page));
        }
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT position, label FROM exit_labels WHERE snapshot_id = $1 AND position >= $2 \
             ORDER BY position LIMIT $3",
        )
        .bind(self.id)
        .bind(self.next)
        .bind(i64::try_from(LABELS_PER_PAGE).unwrap_or(i64::MAX))
        .fetch_all(self.store.pool())
        .await?;
        let (Some(&(first, _)), Some(&(last, _))) = (rows.first(), rows.last()) else {
            if self.next < self.rows {
                return Err(StoreError::Malformed(ROWS_WENT));
            }
            return Ok(None);
        };
        // Positions run from 0 without a gap: a page that does not start where the last one
        // ended, or has a hole, lost rows.
        let count = i64::try_from(rows.len()).unwrap_or(i64::MAX);
        if first != self.next || last != self.next + count - 1 {
            return Err(StoreError::Malformed(ROWS_WENT));
        }
        self.next = last + 1;
        let page = rows
            .iter()
            .map(|(_, json)| serde_json::from_str(json))
            .collect::<Result<Vec<ExitLabel>, _>>()?;
        Ok(Some(page))
    }

    /// The whole snapshot.
    ///
    /// # Errors
    /// Database or JSON decoding failures.
    pub async fn into_doc(mut self) -> Result<LabelsDoc, StoreError> {
        let mut exits = Vec::new();
        while let Some(page) = self.next_page().await? {
            exits.extend(page);
        }
        Ok(LabelsDoc {
            exits,
            ..self.header
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use exitvoice_schema::label::LABELS_SCHEMA_VERSION;

    /// A labels snapshot generated `at` for `persona`, one stable identity exit per name.
    pub(crate) fn doc(at: &str, persona: Option<&str>, exits: &[&str]) -> LabelsDoc {
        serde_json::from_value(serde_json::json!({
            "schema_version": LABELS_SCHEMA_VERSION,
            "generated_at": at,
            "persona": persona,
            "baseline": null,
            "exits": exits.iter().map(|name| serde_json::json!({
                "name": name, "url": "u", "tags": {}, "egress_ips": [], "state": "stable",
                "changed_at": null, "bucket": null,
                "flags": {"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false},
                "voices": [], "route": "identity", "route_reason": "r", "samples": 1,
                "errors": {}, "latency": {"p50_ms": null, "p95_ms": null},
                "last_probe_at": null, "history": [],
            })).collect::<Vec<_>>(),
        }))
        .expect("a labels document")
    }

    fn names(doc: &LabelsDoc) -> Vec<&str> {
        doc.exits.iter().map(|l| l.name.as_str()).collect()
    }

    on_both_engines! {
        async fn latest_labels_snapshot(store: Store) {
            assert!(store.latest_labels().await.unwrap().is_none());
            for at in ["1", "2"] {
                store.insert_labels(&doc(at, None, &[])).await.unwrap();
            }
            let latest = store.latest_labels().await.unwrap().unwrap();
            assert_eq!(latest.generated_at, "2");
            // Per persona: version 1 snapshots (no persona) are nobody's.
            assert!(store.latest_labels_of("p").await.unwrap().is_none());
            for (at, persona) in [("3", "p"), ("4", "q")] {
                store.insert_labels(&doc(at, Some(persona), &["x"])).await.unwrap();
            }
            let of_p = store.latest_labels_of("p").await.unwrap().unwrap();
            assert_eq!(of_p.generated_at, "3");
            assert_eq!(names(&of_p), ["x"]);
        }

        async fn a_snapshot_is_written_and_read_an_exit_at_a_time(store: Store) {
            let many: Vec<String> = (0..1_300).map(|i| format!("exit-{i:04}")).collect();
            let many: Vec<&str> = many.iter().map(String::as_str).collect();
            let whole = doc("t", Some("p"), &many);
            let id = store.insert_labels(&whole).await.unwrap();
            let mut reader = store.read_labels(id).await.unwrap().unwrap();
            assert!(reader.by_rows());
            assert!(reader.header().exits.is_empty(), "the header holds no exit");
            let mut pages = Vec::new();
            while let Some(page) = reader.next_page().await.unwrap() {
                pages.push(page.len());
            }
            assert_eq!(pages, [512, 512, 276], "pages in order, none lost");
            assert_eq!(store.labels_by_id(id).await.unwrap().unwrap(), whole);
            let one = store.exit_label(id, "exit-0777").await.unwrap().unwrap();
            assert_eq!(one.name, "exit-0777");
            assert!(store.exit_label(id, "nope").await.unwrap().is_none());
        }

        async fn an_unpublished_snapshot_is_nobodys_latest_until_discarded(store: Store) {
            let published = store.insert_labels(&doc("1", Some("p"), &["a"])).await.unwrap();
            let mut writer = store.begin_labels("2", Some("p")).await.unwrap();
            writer.push(&doc("2", Some("p"), &["b"]).exits[0]).await.unwrap();
            let draft = writer.id();
            assert_eq!(
                store.latest_labels_id_of("p").await.unwrap(),
                Some(published),
                "a snapshot being written is not read as the latest"
            );
            writer.finish(doc("2", Some("p"), &[]), false).await.unwrap();
            assert_eq!(store.latest_labels_id().await.unwrap(), Some(published));
            let kept = store.labels_by_id(draft).await.unwrap().unwrap();
            assert_eq!(names(&kept), ["b"], "its own run reads it by id");
            store.discard_labels(draft).await.unwrap();
            assert!(store.labels_by_id(draft).await.unwrap().is_none());
            assert!(store.exit_label(draft, "b").await.unwrap().is_none());
            store.discard_labels(published).await.unwrap();
            assert!(
                store.labels_by_id(published).await.unwrap().is_some(),
                "a published snapshot is never discarded"
            );
        }

        async fn a_snapshot_stored_as_one_document_reads_the_same(store: Store) {
            let whole = doc("1", Some("p"), &["a", "b"]);
            sqlx::query(
                "INSERT INTO label_snapshots (generated_at, persona, doc) VALUES ($1, $2, $3)",
            )
            .bind("1")
            .bind("p")
            .bind(serde_json::to_string(&whole).unwrap())
            .execute(store.pool())
            .await
            .unwrap();
            let id = store.latest_labels_id_of("p").await.unwrap().unwrap();
            let reader = store.read_labels(id).await.unwrap().unwrap();
            assert!(!reader.by_rows());
            assert!(reader.header().exits.is_empty());
            assert_eq!(reader.into_doc().await.unwrap(), whole);
        }
    }
}
