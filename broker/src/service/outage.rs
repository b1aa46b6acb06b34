//! The store out of reach: the reserve kept while it answers, an outage started when it does
//! not, grants from the reserve meanwhile, and the releases kept through it sent at its end.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use exitvoice_lease::{Granted, LeaseClass, UnitSpec};

use super::queue::Wanted;
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
    /// the country and within the gap limit `wanted` asks for.
    pub(super) fn grant_from_reserve(
        &self,
        class: LeaseClass,
        wanted: &Wanted,
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
                            && wanted
                                .country
                                .as_deref()
                                .is_none_or(|want| spec.country.as_deref() == Some(want))
                            && spec.within_gap(wanted.max_gap_ms)
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use exitvoice_exits::ExitsFile;
    use exitvoice_lease::{Acquire, Effect, EgressRecord, ExitReport, Gauges, Refusal, Released};
    use exitvoice_schema::LabelsDoc;

    use super::*;
    use crate::durability::Durability;
    use crate::pool::Pool;
    use crate::reserve::Reserve;
    use crate::service::{BrokerConfig, BrokerError, Ended, LeaseRequest};
    use crate::sql_leases::SqlLeases;

    const EXITS: &str = r#"
[[exits]]
name = "a"
url = "http://u:p@127.0.0.1:1"
[[exits]]
name = "b"
url = "http://u:p@127.0.0.1:2"
[[exits]]
name = "c"
url = "http://u:p@127.0.0.1:3"
"#;

    /// A lease store on SQLite that can be made to fail every call, as one out of reach does.
    #[derive(Clone)]
    struct Unreachable {
        inner: SqlLeases,
        down: Arc<AtomicBool>,
    }

    impl Unreachable {
        fn set_down(&self, down: bool) {
            self.down.store(down, Ordering::SeqCst);
        }

        fn reach(&self) -> Result<(), StoreFailure> {
            if self.down.load(Ordering::SeqCst) {
                return Err(StoreFailure::message("out of reach".to_owned()));
            }
            Ok(())
        }
    }

    impl LeaseStore for Unreachable {
        async fn now_ms(&self) -> Result<i64, StoreFailure> {
            self.reach()?;
            self.inner.now_ms().await
        }

        async fn sync_units(&self, units: &[UnitSpec], whole: bool) -> Result<u64, StoreFailure> {
            self.reach()?;
            self.inner.sync_units(units, whole).await
        }

        async fn acquire(&self, request: &Acquire<'_>) -> Result<Option<Granted>, StoreFailure> {
            self.reach()?;
            self.inner.acquire(request).await
        }

        async fn renew(
            &self,
            lease_id: &str,
            fence: i64,
            ttl_ms: i64,
        ) -> Result<Result<i64, Refusal>, StoreFailure> {
            self.reach()?;
            self.inner.renew(lease_id, fence, ttl_ms).await
        }

        async fn release(
            &self,
            lease_id: &str,
            fence: i64,
            outcome: &str,
            latency_ms: Option<i64>,
            effect: Effect,
        ) -> Result<Result<Released, Refusal>, StoreFailure> {
            self.reach()?;
            self.inner
                .release(lease_id, fence, outcome, latency_ms, effect)
                .await
        }

        async fn record_egress(
            &self,
            lease_id: &str,
            ip: &str,
            country: Option<&str>,
        ) -> Result<EgressRecord, StoreFailure> {
            self.reach()?;
            self.inner.record_egress(lease_id, ip, country).await
        }

        async fn exit_reports(
            &self,
            since_ms: i64,
            most: i64,
        ) -> Result<Vec<ExitReport>, StoreFailure> {
            self.reach()?;
            self.inner.exit_reports(since_ms, most).await
        }

        async fn gauges(&self) -> Result<Gauges, StoreFailure> {
            self.reach()?;
            self.inner.gauges().await
        }

        async fn durability(&self) -> Durability {
            self.inner.durability().await
        }

        async fn prune(&self, keep_ms: i64, batch: i64) -> Result<u64, StoreFailure> {
            self.reach()?;
            self.inner.prune(keep_ms, batch).await
        }

        async fn live(&self, leases: &[(String, i64)]) -> Result<Vec<bool>, StoreFailure> {
            self.reach()?;
            self.inner.live(leases).await
        }

        async fn task_lease(&self, task: &str) -> Result<Option<(String, i64)>, StoreFailure> {
            self.reach()?;
            self.inner.task_lease(task).await
        }
    }

    /// A labels snapshot of the default persona, probed just now: every exit `identity`.
    fn labels() -> LabelsDoc {
        let now = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        let exits: Vec<serde_json::Value> = ["a", "b", "c"]
            .iter()
            .map(|name| {
                serde_json::json!({
                    "name": name, "route": "identity", "last_probe_at": now, "url": "",
                    "tags": {}, "egress_ips": [], "state": "stable", "changed_at": null,
                    "bucket": null, "voices": [], "route_reason": "", "samples": 4,
                    "errors": {}, "history": [], "latency": {"p50_ms": null, "p95_ms": null},
                    "flags": {"tls_preserved": true, "h2_preserved": true,
                              "tls_intercepted": false, "remuxed": false, "not_proxied": false,
                              "tls_reoriginated": false},
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "schema_version": 2, "generated_at": now, "persona": "rustls/chrome",
            "baseline": null, "exits": exits,
        }))
        .unwrap()
    }

    /// A broker over a SQLite store in `dir` that `Unreachable` can take away, its units
    /// written from fresh labels, holding `reserve` units in reserve.
    async fn broker(dir: &std::path::Path, reserve: usize) -> Broker<Unreachable> {
        broker_on(dir, reserve, &labels()).await
    }

    /// [`broker`] with the labels `doc`.
    async fn broker_on(
        dir: &std::path::Path,
        reserve: usize,
        doc: &LabelsDoc,
    ) -> Broker<Unreachable> {
        let store = exitvoice_store::Store::open(&dir.join("broker.db"))
            .await
            .unwrap();
        store.insert_labels(doc).await.unwrap();
        let config = BrokerConfig {
            reserve,
            ..BrokerConfig::default()
        };
        let leases = Unreachable {
            inner: SqlLeases::open(store.clone(), config.longest_told_ttl())
                .await
                .unwrap(),
            down: Arc::default(),
        };
        let file: ExitsFile<serde::de::IgnoredAny> = ExitsFile::parse(EXITS.as_bytes()).unwrap();
        let broker = Broker::new(leases, store, Pool::new(file.exits), config);
        broker.refresh().await.unwrap();
        broker
    }

    fn identity() -> LeaseRequest {
        LeaseRequest {
            class: "identity".to_owned(),
            holder: "w".to_owned(),
            // Below the reserve's lease: a sub-lease granted up to its cap renews no further.
            ttl_ms: Some(5_000),
            ..LeaseRequest::default()
        }
    }

    /// The store goes away: the next keep of the reserve starts an outage; acquires are granted
    /// from the reserve, a store lease is not renewed and its release is kept; when the store
    /// answers again the outage ends and the kept release ends the lease in the store.
    #[tokio::test]
    async fn an_outage_grants_from_the_reserve_and_sends_kept_releases_at_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let broker = broker(dir.path(), 1).await;
        broker.keep_reserve().await;
        assert!(!broker.reserve.in_outage());
        assert_eq!(broker.reserve.sizes(Instant::now()).0, 1, "one unit held");
        let stored = broker.acquire(&identity()).await.unwrap().granted;
        assert!(!Reserve::is_sub(&stored.lease_id));

        broker.leases().set_down(true);
        broker.keep_reserve().await;
        assert!(broker.reserve.in_outage(), "the store did not answer");
        let sub = broker.acquire(&identity()).await.unwrap().granted;
        assert!(Reserve::is_sub(&sub.lease_id), "granted from the reserve");
        assert_ne!(sub.unit, stored.unit);
        assert!(
            matches!(
                broker.renew(&stored.lease_id, stored.fence, None).await,
                Err(BrokerError::Store(_))
            ),
            "no renewal the store cannot hear of"
        );
        assert!(matches!(
            broker
                .release(&stored.lease_id, stored.fence, "ok", None)
                .await
                .unwrap(),
            Ended::Kept
        ));
        assert!(broker.renew(&sub.lease_id, sub.fence, None).await.is_ok());
        assert!(matches!(
            broker.release(&sub.lease_id, sub.fence, "ok", None).await,
            Ok(Ended::Released(_))
        ));

        broker.leases().set_down(false);
        broker.keep_reserve().await;
        assert!(!broker.reserve.in_outage(), "the store answers again");
        assert_eq!(
            broker
                .leases()
                .renew(&stored.lease_id, stored.fence, 1_000)
                .await
                .unwrap(),
            Err(Refusal::Released),
            "the kept release was sent"
        );
    }

    /// In an outage the reserve holds a lease to its gap limit as the store would: only a
    /// unit measured within it, by the labels last read.
    #[tokio::test]
    async fn a_gap_limit_holds_for_sub_leases_from_the_reserve() {
        let dir = tempfile::tempdir().unwrap();
        let mut doc = labels();
        let gap = |us: u32| exitvoice_schema::RoundTripLabel {
            samples: 3,
            gap_min_us: us,
            excess_gap_us: us,
            ..Default::default()
        };
        doc.exits[0].latency.round_trip = Some(gap(5_000));
        doc.exits[1].latency.round_trip = Some(gap(30_000));
        let broker = broker_on(dir.path(), 3, &doc).await;
        broker.keep_reserve().await;
        assert_eq!(broker.reserve.sizes(Instant::now()).0, 3, "every unit held");
        broker.leases().set_down(true);
        broker.keep_reserve().await;
        assert!(broker.reserve.in_outage());

        let within = |ms: u64| LeaseRequest {
            max_gap_ms: Some(ms),
            ..identity()
        };
        let near = broker.acquire(&within(10)).await.unwrap().granted;
        assert!(Reserve::is_sub(&near.lease_id));
        assert_eq!(near.unit, "a");
        let refused = broker.acquire(&within(10)).await.unwrap_err();
        assert!(
            matches!(
                refused,
                BrokerError::Unavailable {
                    max_gap_ms: Some(10),
                    ..
                }
            ),
            "{refused}"
        );
        let mut rest: Vec<String> = Vec::new();
        for _ in 0..2 {
            rest.push(broker.acquire(&identity()).await.unwrap().granted.unit);
        }
        rest.sort();
        assert_eq!(rest, ["b", "c"], "without a limit, the unmeasured unit too");
        assert!(matches!(
            broker.acquire(&within(60_001)).await,
            Err(BrokerError::BadRequest(_))
        ));
    }

    /// Without a reserve the store's failures are the caller's: no outage, nothing kept.
    #[tokio::test]
    async fn without_a_reserve_a_store_failure_is_answered() {
        let dir = tempfile::tempdir().unwrap();
        let broker = broker(dir.path(), 0).await;
        let stored = broker.acquire(&identity()).await.unwrap().granted;
        broker.leases().set_down(true);
        broker.keep_reserve().await;
        assert!(!broker.reserve.in_outage());
        assert!(matches!(
            broker.acquire(&identity()).await,
            Err(BrokerError::Store(_))
        ));
        assert!(matches!(
            broker
                .release(&stored.lease_id, stored.fence, "ok", None)
                .await,
            Err(BrokerError::Store(_))
        ));
        broker.leases().set_down(false);
        assert!(matches!(
            broker
                .release(&stored.lease_id, stored.fence, "ok", None)
                .await,
            Ok(Ended::Released(_))
        ));
    }
}
