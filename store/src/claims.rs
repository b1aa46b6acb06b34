//! Claims: how several auditors on one database split the work of a period. A key (an exit as
//! probed by one persona, or one persona's labels snapshot) is claimed by one holder until its
//! claim expires; the holder renews its claims while it works and marks a key done when it has
//! finished. A key is claimable when no live claim holds it and it was not done since the
//! period began, so each exit is probed by one auditor at a time and once per period, and a
//! crashed auditor's keys are taken by another once their claims expire. (The claims live in
//! the table `leases`; they are not the broker's leases of exits to workers.)
//!
//! A claim is one `INSERT … ON CONFLICT DO UPDATE … WHERE … RETURNING` statement: on
//! PostgreSQL the conflicting row is locked, so of two concurrent claims the second sees the
//! first's claim and fails; SQLite runs one writer at a time.
use std::time::Duration;

use crate::handle::{Store, StoreError};
use crate::values::push_placeholder;

/// Milliseconds of `duration`, saturating.
fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl Store {
    /// Claims `key` for `holder` until `now_unix_ms + ttl`, unless another holder's claim on it
    /// is live or it was done at or after `fresh_after_unix_ms`. Whether it was claimed.
    ///
    /// # Errors
    /// Database failures.
    pub async fn claim_work(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
        now_unix_ms: i64,
        fresh_after_unix_ms: i64,
    ) -> Result<bool, StoreError> {
        let claimed: Option<String> = sqlx::query_scalar(
            "INSERT INTO leases (lease_key, holder, expires_unix_ms, done_unix_ms) \
             VALUES ($1, $2, $3, NULL) \
             ON CONFLICT (lease_key) DO UPDATE SET holder = excluded.holder, \
             expires_unix_ms = excluded.expires_unix_ms \
             WHERE (leases.expires_unix_ms < $4 OR leases.holder = excluded.holder) \
             AND (leases.done_unix_ms IS NULL OR leases.done_unix_ms < $5) \
             RETURNING lease_key",
        )
        .bind(key)
        .bind(holder)
        .bind(now_unix_ms.saturating_add(millis(ttl)))
        .bind(now_unix_ms)
        .bind(fresh_after_unix_ms)
        .fetch_optional(self.pool())
        .await?;
        Ok(claimed.is_some())
    }

    /// Extends every live claim of `holder` to `now_unix_ms + ttl`. How many it holds.
    ///
    /// # Errors
    /// Database failures.
    pub async fn renew_claims(
        &self,
        holder: &str,
        ttl: Duration,
        now_unix_ms: i64,
    ) -> Result<u64, StoreError> {
        let renewed = sqlx::query(
            "UPDATE leases SET expires_unix_ms = $1 WHERE holder = $2 AND expires_unix_ms >= $3",
        )
        .bind(now_unix_ms.saturating_add(millis(ttl)))
        .bind(holder)
        .bind(now_unix_ms)
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok(renewed)
    }

    /// Marks `key` done at `now_unix_ms` and ends `holder`'s claim on it. Whether `holder`
    /// still held it (a claim that expired and was taken is not touched).
    ///
    /// # Errors
    /// Database failures.
    pub async fn finish_claim(
        &self,
        key: &str,
        holder: &str,
        now_unix_ms: i64,
    ) -> Result<bool, StoreError> {
        let finished = sqlx::query(
            "UPDATE leases SET expires_unix_ms = 0, done_unix_ms = $1 \
             WHERE lease_key = $2 AND holder = $3",
        )
        .bind(now_unix_ms)
        .bind(key)
        .bind(holder)
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok(finished == 1)
    }

    /// Of `keys`, those not done at or after `fresh_after_unix_ms`: the period's work left,
    /// whether someone holds it now or not.
    ///
    /// # Errors
    /// Database failures.
    pub async fn claims_not_done(
        &self,
        keys: &[String],
        fresh_after_unix_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        let mut left = Vec::new();
        // Chunks keep each statement's parameters far below both engines' limits.
        // Placeholders in the engine's style (`values.rs`): the keys, then the period's start.
        for chunk in keys.chunks(500) {
            let mut sql = "SELECT lease_key FROM leases WHERE lease_key IN (".to_owned();
            for n in 1..=chunk.len() {
                if n > 1 {
                    sql.push_str(", ");
                }
                push_placeholder(&mut sql, self.engine(), n);
            }
            sql.push_str(") AND done_unix_ms >= ");
            push_placeholder(&mut sql, self.engine(), chunk.len() + 1);
            let mut query = sqlx::query_scalar::<_, String>(&sql);
            for key in chunk {
                query = query.bind(key);
            }
            query = query.bind(fresh_after_unix_ms);
            let done: std::collections::HashSet<String> =
                query.fetch_all(self.pool()).await?.into_iter().collect();
            left.extend(chunk.iter().filter(|k| !done.contains(*k)).cloned());
        }
        Ok(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(10);

    on_both_engines! {
        async fn a_key_is_held_by_one_holder_until_its_claim_expires(store: Store) {
            assert!(store.claim_work("exit:a", "one", TTL, 1_000, 0).await.unwrap());
            assert!(
                !store.claim_work("exit:a", "two", TTL, 2_000, 0).await.unwrap(),
                "a live claim is not taken"
            );
            assert!(store.claim_work("exit:a", "one", TTL, 2_000, 0).await.unwrap(), "held again");
            // Renewed at 9 000 until 19 000: still held at 15 000.
            assert_eq!(store.renew_claims("one", TTL, 9_000).await.unwrap(), 1);
            assert!(!store.claim_work("exit:a", "two", TTL, 15_000, 0).await.unwrap());
            // The holder went silent: at 19 001 its claim has expired and is taken.
            assert!(store.claim_work("exit:a", "two", TTL, 19_001, 0).await.unwrap());
            assert!(
                !store.finish_claim("exit:a", "one", 20_000).await.unwrap(),
                "a lost claim is not finished by its old holder"
            );
            assert_eq!(store.renew_claims("one", TTL, 20_000).await.unwrap(), 0);
        }

        async fn a_key_done_in_the_period_is_not_claimed_again(store: Store) {
            let keys = vec!["exit:a".to_owned(), "exit:b".to_owned()];
            assert!(store.claim_work("exit:a", "one", TTL, 1_000, 500).await.unwrap());
            assert!(store.finish_claim("exit:a", "one", 3_000).await.unwrap());
            assert_eq!(store.claims_not_done(&keys, 500).await.unwrap(), ["exit:b"]);
            assert!(
                !store.claim_work("exit:a", "two", TTL, 4_000, 500).await.unwrap(),
                "done at 3 000, in the period that began at 500"
            );
            // The next period begins at 3 500.
            assert!(store.claim_work("exit:a", "two", TTL, 5_000, 3_500).await.unwrap());
            assert_eq!(store.claims_not_done(&keys, 3_500).await.unwrap(), keys);
        }
    }
}
