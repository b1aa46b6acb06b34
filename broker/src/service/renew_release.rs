//! Renewals and releases, of the store's leases and of the reserve's sub-leases, and outcomes
//! reported for a task.

use std::time::Instant;

use super::acquire::MAX_NAME;
use super::types::{BrokerError, Ended};
use super::{millis, Broker};
use crate::lease_store::{LeaseStore, StoreFailure};
use crate::policy;
use crate::reserve::{PendingRelease, Reserve};

impl<S: LeaseStore> Broker<S> {
    /// Extends a lease; its new expiry (store ms) and time to live.
    ///
    /// # Errors
    /// A refusal (unknown, stale fence, expired, revoked, life cap) or a store failure.
    pub async fn renew(
        &self,
        lease_id: &str,
        fence: i64,
        ttl_ms: Option<u64>,
    ) -> Result<(i64, i64), BrokerError> {
        let ttl = self.ttl(ttl_ms)?;
        if Reserve::is_sub(lease_id) {
            let renewed = self.reserve.renew(lease_id, fence, ttl, Instant::now());
            return match renewed {
                Ok(expires) => Ok((expires, millis(ttl))),
                Err(refusal) => {
                    self.metrics.refused(refusal.as_str());
                    Err(BrokerError::Refused(refusal))
                }
            };
        }
        if self.reserve.in_outage() {
            // No renewal the store cannot hear of: it would grant the unit at the old expiry.
            return Err(BrokerError::Store(StoreFailure::message(
                "the lease store is out of reach".to_owned(),
            )));
        }
        let ttl = millis(ttl);
        let expires = self
            .ask_store(self.leases.renew(lease_id, fence, ttl))
            .await
            .map_err(|error| {
                self.metrics.store_error();
                BrokerError::from(error)
            })?;
        match expires {
            Ok(expires) => Ok((expires, ttl)),
            Err(refusal) => {
                self.metrics.refused(refusal.as_str());
                Err(BrokerError::Refused(refusal))
            }
        }
    }

    /// Ends a lease with the worker's outcome. A sub-lease of the reserve ends here (its outcome
    /// is counted, and bans nothing); with a reserve, a store lease whose release fails is kept
    /// and ended when the store answers again.
    ///
    /// # Errors
    /// A bad outcome, a refusal, or a store failure.
    pub async fn release(
        &self,
        lease_id: &str,
        fence: i64,
        outcome: &str,
        latency_ms: Option<i64>,
    ) -> Result<Ended, BrokerError> {
        let effect = policy::effect(outcome, self.config.ban_ttl, self.config.error_streak)?;
        let keep = || {
            self.reserve.keep_release(PendingRelease {
                lease_id: lease_id.to_owned(),
                fence,
                outcome: outcome.to_owned(),
                latency_ms,
            })
        };
        let released = if Reserve::is_sub(lease_id) {
            self.reserve.release(lease_id, fence, Instant::now())
        } else if self.reserve.in_outage() && keep() {
            // The store is out of reach: no call to wait on.
            return Ok(Ended::Kept);
        } else {
            let release = self
                .leases
                .release(lease_id, fence, outcome, latency_ms, effect);
            match self.ask_store(release).await {
                Ok(released) => released,
                Err(error) => {
                    self.metrics.store_error();
                    if !(self.reserve.enabled() && keep()) {
                        return Err(BrokerError::from(error));
                    }
                    self.store_answered(false).await;
                    return Ok(Ended::Kept);
                }
            }
        };
        let released = match released {
            Ok(released) => released,
            Err(refusal) => {
                self.metrics.refused(refusal.as_str());
                return Err(BrokerError::Refused(refusal));
            }
        };
        self.released.notify_waiters();
        self.metrics
            .outcome(&released.exit_name, outcome, latency_ms);
        self.metrics.recovered(released.recovered_bans);
        if released.retired_session.is_some() {
            self.metrics.ban("session");
        } else if released.banned_until_ms.is_some() {
            self.metrics.ban(if matches!(outcome, "timeout" | "error") {
                "exit"
            } else {
                "origin"
            });
        }
        Ok(Ended::Released(released))
    }

    /// Ends `task`'s live lease with the worker's outcome (what the broker cannot see inside
    /// TLS: a `403`, a captcha): bans and retirements follow as for a release, and the
    /// forward proxy closes the lease's tunnels. `None` when the task holds no live lease.
    ///
    /// # Errors
    /// A bad outcome or task, a refusal (it ended meanwhile), or a store failure.
    pub async fn report_task(
        &self,
        task: &str,
        outcome: &str,
        latency_ms: Option<i64>,
    ) -> Result<Option<Ended>, BrokerError> {
        policy::effect(outcome, self.config.ban_ttl, self.config.error_streak)?;
        if task.is_empty() || task.len() > MAX_NAME || task.chars().any(char::is_control) {
            return Err(BrokerError::BadRequest(
                "task is empty, too long or has control characters".to_owned(),
            ));
        }
        let found = self
            .ask_store(self.leases.task_lease(task))
            .await
            .map_err(|error| {
                self.metrics.store_error();
                BrokerError::from(error)
            })?;
        let Some((lease_id, fence)) = found else {
            return Ok(None);
        };
        self.release(&lease_id, fence, outcome, latency_ms)
            .await
            .map(Some)
    }
}
