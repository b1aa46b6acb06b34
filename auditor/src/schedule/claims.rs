//! The claims a run takes in the store, so that auditors sharing one database split the exits:
//! each exit (as probed by one persona) is probed by one auditor at a time and once per period,
//! and one auditor per period writes the labels snapshot of a persona and set of exits (auditors
//! with other exits files write their own); `exitvoice_store`'s `claims` module says how a
//! claim works.

use std::time::Duration;

use exitvoice_store::{Store, StoreError};

/// Milliseconds since the Unix epoch, now.
pub(super) fn now_unix_ms() -> i64 {
    let now = time::OffsetDateTime::now_utc();
    i64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// One run's hold on the store's work claims.
#[derive(Clone, Debug)]
pub(super) struct Claims {
    store: Store,
    /// The run id: who holds the claims.
    holder: String,
    persona: String,
    ttl: Duration,
    /// Work done at or after this (by any auditor) is not done again in this run.
    fresh_after_unix_ms: i64,
}

impl Claims {
    /// Claims for a run starting now: with a `period` (`--every`), what was done in the last
    /// 80 % of it (the scheduler's jitter is ±10 %) counts as this period's; without, only what
    /// is done from now on.
    pub(super) fn new(
        store: Store,
        holder: String,
        persona: String,
        ttl: Duration,
        period: Option<Duration>,
    ) -> Self {
        let now = now_unix_ms();
        let recent = period.map_or(0, |p| i64::try_from(p.as_millis() * 4 / 5).unwrap_or(0));
        Self {
            store,
            holder,
            persona,
            ttl,
            fresh_after_unix_ms: now.saturating_sub(recent),
        }
    }

    /// The key of `exit` as probed by this persona.
    pub(super) fn exit_key(&self, exit: &str) -> String {
        format!("exit\u{1f}{}\u{1f}{exit}", self.persona)
    }

    /// The labels snapshot's key: the persona and a digest of the exits' names, sorted.
    fn labels_key(&self, exits: &[&str]) -> String {
        use sha2::Digest as _;
        let mut names = exits.to_vec();
        names.sort_unstable();
        let digest = sha2::Sha256::digest(names.join("\n").as_bytes());
        format!(
            "labels\u{1f}{}\u{1f}{}",
            self.persona,
            hex::encode(&digest[..8])
        )
    }

    /// Claims `exit`: false when another auditor holds it or it was done in this period.
    pub(super) async fn claim_exit(&self, exit: &str) -> Result<bool, StoreError> {
        self.claim(&self.exit_key(exit)).await
    }

    /// Marks `exit` done and lets it go.
    pub(super) async fn finish_exit(&self, exit: &str) -> Result<bool, StoreError> {
        self.store
            .finish_claim(&self.exit_key(exit), &self.holder, now_unix_ms())
            .await
    }

    /// Of `exits`, those not done in this period by any auditor.
    pub(super) async fn not_done<'e>(&self, exits: &[&'e str]) -> Result<Vec<&'e str>, StoreError> {
        let keys: Vec<String> = exits.iter().map(|e| self.exit_key(e)).collect();
        let left: std::collections::HashSet<String> = self
            .store
            .claims_not_done(&keys, self.fresh_after_unix_ms)
            .await?
            .into_iter()
            .collect();
        Ok(exits
            .iter()
            .zip(&keys)
            .filter(|(_, key)| left.contains(*key))
            .map(|(exit, _)| *exit)
            .collect())
    }

    /// Claims this period's labels snapshot of `exits` and marks it done at once: true for one
    /// auditor.
    pub(super) async fn take_labels(&self, exits: &[&str]) -> Result<bool, StoreError> {
        let key = self.labels_key(exits);
        if !self.claim(&key).await? {
            return Ok(false);
        }
        self.store
            .finish_claim(&key, &self.holder, now_unix_ms())
            .await
    }

    async fn claim(&self, key: &str) -> Result<bool, StoreError> {
        self.store
            .claim_work(
                key,
                &self.holder,
                self.ttl,
                now_unix_ms(),
                self.fresh_after_unix_ms,
            )
            .await
    }

    /// Renews this run's claims every third of their lifetime until the returned task is
    /// aborted, so a slow exit is not taken from a live auditor; a failed renewal is logged
    /// and tried again.
    pub(super) fn keep_alive(&self) -> tokio::task::JoinHandle<()> {
        let claims = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(claims.ttl / 3).await;
                if let Err(error) = claims
                    .store
                    .renew_claims(&claims.holder, claims.ttl, now_unix_ms())
                    .await
                {
                    tracing::warn!(%error, "renewing the run's claims failed");
                }
            }
        })
    }
}
