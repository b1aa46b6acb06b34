//! Refreshes: the persona's labels read, the units written from them and the pool (a reloaded
//! exits file's too), ended leases pruned.

use std::sync::{Arc, PoisonError};

use time::OffsetDateTime;

use super::sync::{changed_units, Synced};
use super::types::BrokerError;
use super::{millis, Broker};
use crate::lease_store::{LeaseStore, StoreFailure};
use crate::pool::{self, LabelFacts, Labels};

/// Leases one pruning statement deletes at most, and statements a refresh runs at most: 50,000
/// leases per refresh, some 5,000 a second at the default refresh, beyond any rate measured.
const PRUNE_BATCH: i64 = 5_000;
const PRUNE_BATCHES: usize = 10;

impl<S: LeaseStore> Broker<S> {
    /// Reads the persona's newest labels and gives each unit the class its label admits now
    /// (by the store's clock); leases a label stopped admitting are revoked. How many.
    ///
    /// # Errors
    /// Store failures.
    pub async fn refresh(&self) -> Result<u64, BrokerError> {
        let labels = self.labels().await?;
        let now_ms = self.leases.now_ms().await?;
        let now = OffsetDateTime::from_unix_timestamp_nanos(i128::from(now_ms) * 1_000_000)
            .map_err(|_| BrokerError::Internal("the store's clock is out of range".to_owned()))?;
        let pool = self.pool();
        let (max_age, capacity, max_life) = (
            self.config.labels_max_age,
            self.config.stateless_per_exit,
            self.config.max_life,
        );
        let geo = self.config.geo.clone();
        let _turn = self.refreshing.lock().await;
        let synced = {
            let synced = self.synced.lock().unwrap_or_else(PoisonError::into_inner);
            match synced.as_ref() {
                Some(synced) if synced.holds(labels.as_ref(), &pool, now) => return Ok(0),
                synced => synced.map(|synced| synced.units.clone()),
            }
        };
        let whole = synced.is_none();
        let (read_labels, read_pool) = (labels.clone(), pool.clone());
        // At 10,000 exits this is ~14 ms of CPU: off the runtime's workers, which go on
        // answering meanwhile (on one, every request waited for it).
        let planned = tokio::task::spawn_blocking(move || {
            let units = pool.units(
                labels.as_deref(),
                now,
                max_age,
                capacity,
                max_life,
                geo.as_deref(),
            );
            let until = labels
                .as_deref()
                .and_then(|labels| pool::next_age_out(labels, now, max_age));
            (changed_units(units, synced.as_deref()), until)
        })
        .await;
        let ((changed, written), until) = match planned {
            Ok(planned) => planned,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // The runtime is shutting down: nothing to write.
            Err(_) => return Ok(0),
        };
        let revoked = if whole || !changed.is_empty() {
            self.leases.sync_units(&changed, whole).await?
        } else {
            0
        };
        *self.synced.lock().unwrap_or_else(PoisonError::into_inner) = Some(Synced {
            units: Arc::new(written),
            labels: read_labels,
            pool: read_pool,
            at: now,
            until,
        });
        self.metrics.revoked(revoked);
        if revoked > 0 {
            tracing::info!(
                revoked,
                "leases revoked: their exits' labels no longer admit them"
            );
        }
        Ok(revoked)
    }

    /// Leases from the exits of a reloaded exits file: new exits are leased as their labels
    /// admit, exits it no longer names drain (no new lease; live ones run out). How many leases
    /// the refresh that follows revoked.
    ///
    /// # Errors
    /// Store failures (the new pool stays: the next refresh writes it).
    pub async fn reload(&self, exits: Vec<exitvoice_exits::Exit>) -> Result<u64, BrokerError> {
        {
            let mut pool = self.pool.write().unwrap_or_else(PoisonError::into_inner);
            *pool = Arc::new(pool.reloaded(exits));
        }
        self.refresh().await
    }

    /// What the pool reads of the persona's newest labels snapshot, read again only when a
    /// newer one was stored, a page of exits at a time: the broker keeps a few facts per exit,
    /// never the snapshot (at 100,000 exits, hundreds of MB of labels).
    async fn labels(&self) -> Result<Option<Arc<Labels>>, BrokerError> {
        let newest = self
            .labels
            .latest_labels_id_of(&self.config.persona)
            .await
            .map_err(StoreFailure::from)?;
        let mut cached = self.snapshot.lock().await;
        match (newest, cached.as_ref()) {
            (None, _) => return Ok(None),
            (Some(id), Some((known, facts))) if id == *known => return Ok(Some(facts.clone())),
            (Some(id), _) => {
                let reader = self
                    .labels
                    .read_labels(id)
                    .await
                    .map_err(StoreFailure::from)?;
                *cached = match reader {
                    Some(mut reader) => {
                        let mut facts = Labels::new();
                        while let Some(page) =
                            reader.next_page().await.map_err(StoreFailure::from)?
                        {
                            facts.extend(
                                page.iter()
                                    .map(|label| (label.name.clone(), LabelFacts::of(label))),
                            );
                        }
                        Some((id, Arc::new(facts)))
                    }
                    None => None,
                };
                self.metrics.labels_snapshot(id);
            }
        }
        Ok(cached.as_ref().map(|(_, facts)| facts.clone()))
    }

    /// Refreshes the labels every `labels_refresh`, and keeps the reserve, until the task is
    /// dropped.
    pub async fn refresh_forever(self: Arc<Self>) {
        tokio::join!(self.refresh_labels_forever(), self.keep_reserve_forever());
    }

    async fn refresh_labels_forever(&self) {
        let mut every = tokio::time::interval(self.config.labels_refresh);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if let Err(error) = self.refresh().await {
                self.metrics.store_error();
                tracing::warn!(%error, "refreshing the labels failed");
            }
            if let Err(error) = self.prune().await {
                self.metrics.store_error();
                tracing::warn!(%error, "pruning ended leases failed");
            }
        }
    }

    /// Deletes the leases that ended more than `retain` ago, a batch at a time, at most
    /// [`PRUNE_BATCHES`] batches a call (a backlog goes over several refreshes); how many.
    ///
    /// # Errors
    /// Store failures.
    pub async fn prune(&self) -> Result<u64, StoreFailure> {
        if self.config.retain.is_zero() {
            return Ok(0);
        }
        let keep = millis(self.config.retain);
        let mut pruned = 0;
        for _ in 0..PRUNE_BATCHES {
            let batch = self.leases.prune(keep, PRUNE_BATCH).await?;
            pruned += batch;
            self.metrics.pruned(batch);
            if batch < PRUNE_BATCH.unsigned_abs() {
                break;
            }
        }
        Ok(pruned)
    }
}
