//! The store out of reach: the reserve kept while it answers, an outage started when it does
//! not, grants from the reserve meanwhile, and the releases kept through it sent at its end.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use exitvoice_lease::{Granted, LeaseClass, UnitSpec};

use super::{millis, Broker};
use crate::lease_store::{LeaseStore, StoreFailure};
use crate::reserve::Turn;

/// With a reserve, how long a store call may take before the store counts as out of reach
/// (without one, a call waits as long as the store's client does).
const STORE_TIMEOUT: Duration = Duration::from_secs(2);

impl<S: LeaseStore> Broker<S> {
    pub(super) async fn keep_reserve_forever(&self) {
        while self.reserve.enabled() {
            self.keep_reserve().await;
            tokio::time::sleep(self.reserve.period()).await;
        }
    }

    /// Renews the reserve and fills it up (when there is one); the store's answer (or its
    /// silence) starts or ends an outage.
    pub async fn keep_reserve(&self) {
        if !self.reserve.enabled() {
            return;
        }
        let holder = format!("reserve:{}", self.config.instance);
        let life = millis(self.config.max_life);
        let kept = tokio::time::timeout(
            STORE_TIMEOUT,
            self.reserve.keep(&self.leases, &holder, life),
        )
        .await;
        match kept {
            Ok(Ok(_)) => self.store_answered(true).await,
            Ok(Err(error)) => {
                self.metrics.store_error();
                tracing::debug!(%error, "keeping the reserve failed");
                self.store_answered(false).await;
            }
            Err(_) => self.store_answered(false).await,
        }
        let (held, _) = self.reserve.sizes(Instant::now());
        self.metrics.reserved(held);
    }

    /// Notes whether the store answered: an outage starts, or ends and the releases kept
    /// through it are sent.
    pub(super) async fn store_answered(&self, answered: bool) {
        match self.reserve.store_answered(answered, Instant::now()) {
            Turn::Same => {}
            Turn::Lost => {
                self.metrics.outage(true, Duration::ZERO);
                tracing::warn!("the lease store is out of reach: granting from the reserve");
            }
            Turn::Back(length, kept) => {
                self.metrics.outage(false, length);
                tracing::info!(
                    seconds = length.as_secs_f64(),
                    releases = kept.len(),
                    "the lease store answers again"
                );
                for release in kept {
                    // A refusal means the lease ran out meanwhile: nothing left to end.
                    let _ = Box::pin(self.release(
                        &release.lease_id,
                        release.fence,
                        &release.outcome,
                        release.latency_ms,
                    ))
                    .await;
                }
            }
        }
    }

    /// `call` to the store: with a reserve, a call that takes [`STORE_TIMEOUT`] fails (the
    /// store counts as out of reach); without one, it waits as long as the store's client does.
    pub(super) async fn ask_store<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, StoreFailure>>,
    ) -> Result<T, StoreFailure> {
        if !self.reserve.enabled() {
            return call.await;
        }
        tokio::time::timeout(STORE_TIMEOUT, call)
            .await
            .unwrap_or_else(|_| {
                Err(StoreFailure::message(
                    "the lease store did not answer in time".to_owned(),
                ))
            })
    }

    /// The units as last written.
    fn synced(&self) -> Option<Arc<HashMap<String, UnitSpec>>> {
        self.synced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|synced| synced.units.clone())
    }

    /// A sub-lease from the reserve, on a unit whose label (as last read) admits `class`, in
    /// `country` if one is asked for.
    pub(super) fn grant_from_reserve(
        &self,
        class: LeaseClass,
        country: Option<&str>,
        ttl: Duration,
    ) -> Option<Granted> {
        let synced = self.synced();
        let granted = self.reserve.grant(
            class,
            ttl,
            self.config.stateless_per_exit,
            |unit| {
                synced
                    .as_ref()
                    .and_then(|units| units.get(unit))
                    .filter(|spec| {
                        !spec.draining
                            && country.is_none_or(|want| spec.country.as_deref() == Some(want))
                    })
                    .and_then(|spec| spec.admits)
            },
            Instant::now(),
        );
        if granted.is_some() {
            self.metrics.granted_in_outage();
        }
        granted
    }
}
