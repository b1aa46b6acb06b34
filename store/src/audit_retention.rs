//! The auditor's bounded disk: probes and labels snapshots older than the retention are pruned
//! after each run, a batch per statement, so that an auditor run every hour does not grow its
//! database without end (100,000 exits × 4 samples store ~5 GB of probes and ~200 MB of
//! labels a run). The latest published snapshot of each persona always stays: routers and the
//! broker read it whatever its age.

use crate::handle::{Store, StoreError};

/// What one pruning pass removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuditPruned {
    /// Probe records deleted.
    pub probes: u64,
    /// Labels snapshots deleted (their exit rows with them).
    pub snapshots: u64,
}

impl Store {
    /// Deletes the probes started before `before` and the labels snapshots generated before it,
    /// with their exit rows, `batch` rows a statement, until none is left; never the latest
    /// published snapshot of a persona. `before` is RFC 3339 UTC with milliseconds, the form
    /// the auditor stores (`2026-12-03T10:00:00.000Z`), so the text compares as the time.
    ///
    /// # Errors
    /// Fails if a statement fails; what was deleted before stays deleted.
    pub async fn prune_audit(&self, before: &str, batch: u32) -> Result<AuditPruned, StoreError> {
        let batch = batch.max(1);
        let mut pruned = AuditPruned::default();
        // Probes come in time order (ids grow with the runs), so the oldest are at the head:
        // each statement looks at the first `batch` rows only, never the whole table, and the
        // pass ends at the first head that is not all old.
        loop {
            let gone = sqlx::query(
                "DELETE FROM probes WHERE id IN (SELECT id FROM \
                 (SELECT id, started_at FROM probes ORDER BY id LIMIT $1) head \
                 WHERE started_at < $2)",
            )
            .bind(i64::from(batch))
            .bind(before)
            .execute(self.pool())
            .await?
            .rows_affected();
            pruned.probes += gone;
            if gone < u64::from(batch) {
                break;
            }
        }
        // Drafts of runs that died are old snapshots too: only the latest published ones stay.
        let old: Vec<i64> = sqlx::query_scalar(
            "SELECT id FROM label_snapshots WHERE generated_at < $1 AND id NOT IN \
             (SELECT MAX(id) FROM label_snapshots WHERE published GROUP BY persona) \
             ORDER BY id",
        )
        .bind(before)
        .fetch_all(self.pool())
        .await?;
        for id in old {
            // The rows first: a pass cut short leaves a whole snapshot, never rows without one.
            while sqlx::query(
                "DELETE FROM exit_labels WHERE snapshot_id = $1 AND position IN \
                 (SELECT position FROM exit_labels WHERE snapshot_id = $1 \
                 ORDER BY position LIMIT $2)",
            )
            .bind(id)
            .bind(i64::from(batch))
            .execute(self.pool())
            .await?
            .rows_affected()
                > 0
            {}
            pruned.snapshots += sqlx::query("DELETE FROM label_snapshots WHERE id = $1")
                .bind(id)
                .execute(self.pool())
                .await?
                .rows_affected();
        }
        Ok(pruned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::tests::doc;
    use exitvoice_schema::probe::PROBE_SCHEMA_VERSION;
    use exitvoice_schema::{LabelsDoc, ProbeRecord};

    fn probe(token: &str, started_at: &str) -> ProbeRecord {
        ProbeRecord {
            schema_version: PROBE_SCHEMA_VERSION,
            run_id: "r".into(),
            exit: Some("x".into()),
            exit_url: Some("http://h:1".into()),
            session: None,
            token: token.into(),
            persona: "p".into(),
            started_at: started_at.into(),
            latency_ms: Some(1),
            error: None,
            sample: None,
            retried: Vec::new(),
            h3: None,
            ledger: None,
        }
    }

    fn labels(at: &str, persona: &str, exits: usize) -> LabelsDoc {
        let names: Vec<String> = (0..exits).map(|i| format!("exit-{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        doc(at, Some(persona), &names)
    }

    async fn count(store: &Store, sql: &str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(store.pool())
            .await
            .unwrap()
    }

    on_both_engines! {
        async fn old_probes_and_snapshots_go_the_latest_published_stays(store: Store) {
            let day = |d: u32| format!("2026-11-{d:02}T12:00:00.000Z");
            let probes: Vec<ProbeRecord> = (1..=9)
                .map(|d| probe(&format!("t{d}"), &day(d)))
                .collect();
            store.insert_probes(&probes).await.unwrap();
            // Persona p: snapshots of days 1 and 2 (the latest); q: day 1 only; and the draft of
            // a run that died on day 1 with a commit of rows written.
            let p1 = store.insert_labels(&labels(&day(1), "p", 5)).await.unwrap();
            let p2 = store.insert_labels(&labels(&day(2), "p", 3)).await.unwrap();
            let q1 = store.insert_labels(&labels(&day(1), "q", 2)).await.unwrap();
            let mut draft = store.begin_labels(&day(1), Some("p")).await.unwrap();
            for label in &labels(&day(1), "p", 512).exits {
                draft.push(label).await.unwrap();
            }
            assert_eq!(count(&store, "SELECT COUNT(*) FROM exit_labels").await, 5 + 3 + 2 + 512);

            // A batch of 2 takes several statements: every old one goes all the same.
            let pruned = store.prune_audit(&day(5), 2).await.unwrap();
            assert_eq!(pruned, AuditPruned { probes: 4, snapshots: 2 });
            let tokens: Vec<String> = store
                .recent_probes(Some("x"), "p", 99)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.token)
                .collect();
            assert_eq!(tokens, ["t5", "t6", "t7", "t8", "t9"]);
            assert!(store.labels_by_id(p1).await.unwrap().is_none(), "an old snapshot goes");
            assert_eq!(store.latest_labels_id_of("p").await.unwrap(), Some(p2));
            assert_eq!(store.latest_labels_id_of("q").await.unwrap(), Some(q1), "the latest stays");
            assert_eq!(store.labels_by_id(p2).await.unwrap().unwrap().exits.len(), 3);
            assert_eq!(
                count(&store, "SELECT COUNT(*) FROM exit_labels").await,
                3 + 2,
                "no row of a pruned snapshot or draft is left"
            );
            // Nothing older left: a second pass removes nothing.
            let again = store.prune_audit(&day(5), 2).await.unwrap();
            assert_eq!(again, AuditPruned::default());
        }

        async fn a_snapshot_pruned_while_read_is_an_error_not_a_short_list(store: Store) {
            let old = store
                .insert_labels(&labels("2026-11-01T00:00:00.000Z", "p", 1_300))
                .await
                .unwrap();
            store
                .insert_labels(&labels("2026-11-02T00:00:00.000Z", "p", 1))
                .await
                .unwrap();
            let mut reader = store.read_labels(old).await.unwrap().unwrap();
            assert_eq!(reader.next_page().await.unwrap().unwrap().len(), 512);
            // The pruner deletes from the first position on: the next page starts past a gap.
            sqlx::query("DELETE FROM exit_labels WHERE snapshot_id = $1 AND position < 700")
                .bind(old)
                .execute(store.pool())
                .await
                .unwrap();
            assert!(matches!(reader.next_page().await, Err(StoreError::Malformed(_))));
            // Once all of it went, a reader that had started finds nothing where rows were due.
            let mut late = store.read_labels(old).await.unwrap().unwrap();
            let pruned = store.prune_audit("2026-11-02T00:00:00.000Z", 100).await.unwrap();
            assert_eq!(pruned.snapshots, 1);
            assert!(matches!(late.next_page().await, Err(StoreError::Malformed(_))));
            assert!(store.read_labels(old).await.unwrap().is_none());
        }
    }
}
