//! The broker's store suite, run on every store the broker keeps its state in: SQLite,
//! PostgreSQL, Redis, and Redis over TLS (throwaway servers: `exitvoice-pgtest`,
//! `exitvoice-redistest`). Each test reaches the store through [`LeaseStore`] alone.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use exitvoice_lease::{Backoff, LeaseClass};

use super::*;
use crate::redis_leases::{Epochs, RedisLeases};

/// Runs each test once per store; `Store` in the test's signature is the store's type.
macro_rules! on_every_store {
    ($($(#[$meta:meta])* async fn $name:ident($store:ident: Store) $body:block)*) => {
        $(
            $(#[$meta])*
            mod $name {
                use super::*;

                async fn run<Store: LeaseStore>($store: Store) $body

                #[tokio::test]
                async fn sqlite() {
                    let dir = tempfile::tempdir().expect("tempdir");
                    let path = dir.path().join("test.db");
                    let store = exitvoice_store::Store::open(&path).await.expect("open");
                    run(on_sql(store).await).await;
                }

                #[tokio::test]
                async fn postgres() {
                    let url = exitvoice_pgtest::fresh_database(stringify!($name));
                    let database = url.parse().expect("a postgres URL");
                    let store = exitvoice_store::Store::connect(&database).await.expect("connect");
                    run(on_sql(store).await).await;
                }

                #[tokio::test]
                async fn redis() {
                    let server = exitvoice_redistest::server();
                    let (store, _epochs) = on_redis(server, stringify!($name)).await;
                    run(store).await;
                }

                #[tokio::test]
                async fn rediss() {
                    let server = exitvoice_redistest::tls_server();
                    let (store, _epochs) = on_redis(server, stringify!($name)).await;
                    run(store).await;
                }
            }
        )*
    };
}

/// The broker's state in `store`.
async fn on_sql(store: exitvoice_store::Store) -> crate::sql_leases::SqlLeases {
    crate::sql_leases::SqlLeases::open(store, std::time::Duration::from_secs(3600))
        .await
        .expect("open the SQL leases")
}

/// A pool of its own on `server` (over TLS when the server speaks it, trusting its CA), its
/// epochs in a SQLite file in the directory returned with it.
async fn on_redis(
    server: &exitvoice_redistest::Server,
    hint: &str,
) -> (RedisLeases, tempfile::TempDir) {
    let ca = server
        .ca_pem()
        .map(|path| std::fs::read(path).expect("the CA"));
    let url = server.url().parse().expect("a Redis URL");
    let dir = tempfile::tempdir().expect("tempdir");
    let epochs = Epochs {
        store: exitvoice_store::Store::open(&dir.path().join("epochs.db"))
            .await
            .expect("open"),
        hold: std::time::Duration::from_secs(3600),
    };
    let pool = exitvoice_redistest::fresh_prefix(hint);
    let leases = RedisLeases::connect(&url, ca, &pool, epochs)
        .await
        .expect("connect to Redis");
    (leases, dir)
}

/// A unit of `name` (`gateway#slot` for a gateway's session), for the broker's tests.
pub(crate) fn unit(name: &str, admits: Option<LeaseClass>) -> UnitSpec {
    UnitSpec {
        unit: name.into(),
        exit_name: name.split('#').next().unwrap_or(name).into(),
        admits,
        capacity: 2,
        gateway: name.contains('#'),
        life_ms: 3_600_000,
        draining: false,
        country: None,
        gap_ms: None,
    }
}

/// An acquire of a minute's lease, for the broker's tests.
pub(crate) fn ask<'a>(id: &'a str, class: LeaseClass, origin: Option<&'a str>) -> Acquire<'a> {
    Acquire {
        lease_id: id,
        class,
        holder: "w",
        task: None,
        origin,
        ttl_ms: 60_000,
        life_ms: 600_000,
        session_nonce: "n",
        stateless_per_origin: None,
        fences: 1,
        country: None,
        max_gap_ms: None,
    }
}

/// The store's answer to an acquire (a store failure fails the test).
async fn take<S: LeaseStore>(store: &S, request: &Acquire<'_>) -> Option<Granted> {
    store.acquire(request).await.unwrap()
}

/// The store's answer to a release (a store failure fails the test).
async fn end<S: LeaseStore>(
    store: &S,
    lease_id: &str,
    fence: i64,
    outcome: &str,
    latency_ms: Option<i64>,
    effect: Effect,
) -> Result<Released, Refusal> {
    store
        .release(lease_id, fence, outcome, latency_ms, effect)
        .await
        .unwrap()
}

const BACKOFF: Backoff = Backoff {
    ttl_ms: 3_600_000,
    jitter: 1.0,
};

on_every_store! {
    async fn an_exclusive_lease_holds_its_exit_alone(store: Store) {
        store
            .sync_units(&[unit("a", Some(LeaseClass::Identity))], true)
            .await
            .unwrap();
        let first = take(&store, &ask("l1", LeaseClass::Identity, None))
            .await
            .unwrap();
        assert_eq!(
            (first.unit.as_str(), first.fence, first.session),
            ("a", 1, None)
        );
        assert!(take(&store, &ask("l2", LeaseClass::Anonymous, None))
            .await
            .is_none());
        assert!(take(&store, &ask("l3", LeaseClass::Stateless, None))
            .await
            .is_none());
        // Release needs the lease's own fence.
        assert_eq!(
            end(&store, "l1", 7, "ok", None, Effect::Success).await,
            Err(Refusal::StaleFence)
        );
        let released = end(&store, "l1", 1, "ok", Some(12), Effect::Success)
            .await
            .unwrap();
        assert_eq!(released.exit_name, "a");
        assert_eq!(
            end(&store, "l1", 1, "ok", None, Effect::Success).await,
            Err(Refusal::Released)
        );
        let next = take(&store, &ask("l4", LeaseClass::Anonymous, None))
            .await
            .unwrap();
        assert_eq!(next.fence, 2, "the fence only grows");
    }

    async fn labels_decide_which_class_a_unit_serves(store: Store) {
        let labelled = |anon| [unit("anon", anon), unit("none", None)];
        let anonymous = Some(LeaseClass::Anonymous);
        store.sync_units(&labelled(anonymous), true).await.unwrap();
        assert!(take(&store, &ask("i", LeaseClass::Identity, None))
            .await
            .is_none());
        let held = take(&store, &ask("a", LeaseClass::Anonymous, None))
            .await
            .unwrap();
        assert_eq!(held.unit, "anon");
        // The label turns quarantine: the live lease is revoked, no new one is granted.
        let revoked = store.sync_units(&labelled(None), true).await.unwrap();
        assert_eq!(revoked, 1);
        assert_eq!(
            store.renew("a", held.fence, 1000).await.unwrap(),
            Err(Refusal::Revoked)
        );
        assert!(take(&store, &ask("s", LeaseClass::Stateless, None))
            .await
            .is_none());
        // Admitted again, the unit still waits for the revoked lease's expiry: its holder hears
        // of the revocation only when it renews, and may be at work until then.
        store.sync_units(&labelled(anonymous), true).await.unwrap();
        assert!(take(&store, &ask("a2", LeaseClass::Anonymous, None))
            .await
            .is_none());
        assert_eq!(
            store.gauges().await.unwrap().live.iter().map(|(_, n)| n).sum::<i64>(),
            0,
            "a revoked lease is not live"
        );
    }

    async fn the_unit_free_the_longest_serves_first_and_a_sync_keeps_the_order(store: Store) {
        let pool = [
            unit("a", Some(LeaseClass::Identity)),
            unit("b", Some(LeaseClass::Identity)),
        ];
        store.sync_units(&pool, true).await.unwrap();
        let first = take(&store, &ask("l1", LeaseClass::Identity, None))
            .await
            .unwrap();
        end(&store, "l1", first.fence, "ok", None, Effect::Success)
            .await
            .unwrap();
        // The labels' next refresh writes the whole pool again: it must not reorder it.
        store.sync_units(&pool, true).await.unwrap();
        let second = take(&store, &ask("l2", LeaseClass::Identity, None))
            .await
            .unwrap();
        assert_ne!(
            second.unit, first.unit,
            "the unit never leased serves before the one just let go"
        );
    }

    async fn stateless_leases_share_up_to_capacity_never_beside_an_exclusive_one(store: Store) {
        store
            .sync_units(&[unit("a", Some(LeaseClass::Identity))], true)
            .await
            .unwrap();
        for id in ["s1", "s2"] {
            assert!(take(&store, &ask(id, LeaseClass::Stateless, None))
                .await
                .is_some());
        }
        assert!(take(&store, &ask("s3", LeaseClass::Stateless, None))
            .await
            .is_none());
        assert!(take(&store, &ask("x", LeaseClass::Identity, None))
            .await
            .is_none());
        end(&store, "s1", 1, "ok", None, Effect::Success)
            .await
            .unwrap();
        assert!(take(&store, &ask("x", LeaseClass::Identity, None))
            .await
            .is_none());
        end(&store, "s2", 2, "ok", None, Effect::Success)
            .await
            .unwrap();
        assert!(take(&store, &ask("x", LeaseClass::Identity, None))
            .await
            .is_some());
    }

    /// Pruning deletes ended leases only; the exit's fence and its count of leases served
    /// go on from where they were.
    async fn pruning_forgets_ended_leases_and_keeps_fences(store: Store) {
        store
            .sync_units(&[unit("p", Some(LeaseClass::Identity))], true)
            .await
            .unwrap();
        let first = take(&store, &ask("p1", LeaseClass::Identity, None))
            .await
            .unwrap();
        end(&store, "p1", first.fence, "ok", None, Effect::Success)
            .await
            .unwrap();
        let second = take(&store, &ask("p2", LeaseClass::Identity, None))
            .await
            .unwrap();
        // Kept for an hour: nothing goes.
        assert_eq!(store.prune(3_600_000, 100).await.unwrap(), 0);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        // Kept for no time: the ended lease goes, the live one stays.
        assert_eq!(store.prune(0, 100).await.unwrap(), 1);
        assert_eq!(
            store.renew("p1", first.fence, 1000).await.unwrap(),
            Err(Refusal::Unknown)
        );
        assert!(store
            .renew("p2", second.fence, 1000)
            .await
            .unwrap()
            .is_ok());
        end(&store, "p2", second.fence, "ok", None, Effect::Success)
            .await
            .unwrap();
        let third = take(&store, &ask("p3", LeaseClass::Identity, None))
            .await
            .unwrap();
        assert!(third.fence > second.fence && second.fence > first.fence);
        let reports = store.exit_reports(0, 1000).await.unwrap();
        assert_eq!(reports[0].served, 3);
        // The report reads the newest ended leases first, as many as it is allowed.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        end(&store, "p3", third.fence, "503", Some(40), Effect::Neutral)
            .await
            .unwrap();
        let newest = &store.exit_reports(0, 1).await.unwrap()[0];
        assert_eq!(
            (&newest.outcomes[..], &newest.latencies_ms[..]),
            (&["503".to_owned()][..], &[40][..])
        );
        let mut both = store.exit_reports(0, 10).await.unwrap()[0]
            .outcomes
            .clone();
        both.sort();
        assert_eq!(both, ["503", "ok"]);
    }

    async fn a_grant_that_takes_fences_leaves_them_to_no_later_grant(store: Store) {
        store
            .sync_units(&[unit("a", Some(LeaseClass::Identity))], true)
            .await
            .unwrap();
        let reserve = Acquire {
            fences: 64,
            ..ask("l1", LeaseClass::Identity, None)
        };
        let first = take(&store, &reserve).await.unwrap();
        end(&store, "l1", first.fence, "ok", None, Effect::Success)
            .await
            .unwrap();
        let next = take(&store, &ask("l2", LeaseClass::Identity, None))
            .await
            .unwrap();
        assert_eq!(
            next.fence,
            first.fence + 64,
            "the 63 fences after the first stay the reserving lease's"
        );
    }

    async fn the_store_clock_expires_leases_and_caps_their_life(store: Store) {
        store
            .sync_units(&[unit("a", Some(LeaseClass::Identity))], true)
            .await
            .unwrap();
        let short = Acquire {
            ttl_ms: 300,
            life_ms: 600,
            ..ask("l1", LeaseClass::Identity, None)
        };
        let granted = take(&store, &short).await.unwrap();
        assert_eq!(granted.life_ends_ms - granted.now_ms, 600);
        let renewed = store
            .renew("l1", granted.fence, 1000)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(renewed, granted.life_ends_ms, "never past the life cap");
        assert_eq!(
            store.renew("l1", granted.fence, 1000).await.unwrap(),
            Err(Refusal::LifeCap)
        );
        tokio::time::sleep(std::time::Duration::from_millis(650)).await;
        assert_eq!(
            store.renew("l1", granted.fence, 1000).await.unwrap(),
            Err(Refusal::Expired)
        );
        assert_eq!(
            store.renew("nope", 1, 1000).await.unwrap(),
            Err(Refusal::Unknown)
        );
        let next = take(&store, &ask("l2", LeaseClass::Identity, None))
            .await
            .unwrap();
        assert_eq!(next.fence, 2);
        // The lapsed holder cannot release the next holder's lease, nor its own.
        assert_eq!(
            end(&store, "l1", 1, "ok", None, Effect::Success).await,
            Err(Refusal::Expired)
        );
    }

    async fn a_refusing_origin_bans_the_pair_and_retires_a_gateway_session(store: Store) {
        store
            .sync_units(
                &[
                    unit("a", Some(LeaseClass::Anonymous)),
                    unit("gw#0", Some(LeaseClass::Anonymous)),
                ],
                true,
            )
            .await
            .unwrap();
        let on_a = take(&store, &ask("l1", LeaseClass::Anonymous, Some("shop")))
            .await
            .unwrap();
        let on_gw = take(&store, &ask("l2", LeaseClass::Anonymous, Some("shop")))
            .await
            .unwrap();
        assert_eq!(on_gw.unit, "gw#0");
        let session = on_gw.session.clone().unwrap();
        assert_eq!(session, format!("n{}", on_gw.fence), "nonce then fence");
        let plain = end(
            &store,
            &on_a.lease_id,
            on_a.fence,
            "429",
            None,
            Effect::Blocked(BACKOFF),
        )
        .await
        .unwrap();
        let until = plain.banned_until_ms.unwrap();
        assert_eq!(until - plain.now_ms, BACKOFF.ttl_ms);
        let gateway = end(
            &store,
            &on_gw.lease_id,
            on_gw.fence,
            "403",
            None,
            Effect::Blocked(BACKOFF),
        )
        .await
        .unwrap();
        assert_eq!(
            (gateway.banned_until_ms, gateway.retired_session),
            (None, Some(session.clone()))
        );
        // The banned pair is skipped; the gateway serves the origin again, on a new session.
        let again = take(&store, &ask("l3", LeaseClass::Anonymous, Some("shop")))
            .await
            .unwrap();
        assert_eq!(again.unit, "gw#0");
        assert_ne!(again.session.as_deref(), Some(session.as_str()));
        let other = take(&store, &ask("l4", LeaseClass::Anonymous, Some("news")))
            .await
            .unwrap();
        assert_eq!(other.unit, "a", "another origin is not banned");
        let news = end(
            &store,
            "l4",
            other.fence,
            "429",
            None,
            Effect::Blocked(BACKOFF),
        )
        .await
        .unwrap();
        assert_eq!(news.retired_session, None, "a plain exit has no session");
        assert!(news.banned_until_ms.is_some());
        let third = take(&store, &ask("l5", LeaseClass::Anonymous, Some("news"))).await;
        assert!(third.is_none(), "a is banned for news, gw#0 is held");
    }

    async fn a_repeat_offenders_ban_doubles_and_a_success_forgets_it(store: Store) {
        store
            .sync_units(&[unit("a", Some(LeaseClass::Anonymous))], true)
            .await
            .unwrap();
        let short = Effect::Blocked(Backoff {
            ttl_ms: 40,
            jitter: 1.0,
        });
        let mut lengths = Vec::new();
        let mut recovered = 0;
        for id in ["l1", "l2", "l3"] {
            let granted = loop {
                if let Some(granted) =
                    take(&store, &ask(id, LeaseClass::Anonymous, Some("o"))).await
                {
                    break granted;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            };
            let effect = if id == "l3" { Effect::Success } else { short };
            let released = end(&store, id, granted.fence, "429", None, effect)
                .await
                .unwrap();
            lengths.extend(
                released
                    .banned_until_ms
                    .map(|until| until - released.now_ms),
            );
            recovered += released.recovered_bans;
        }
        assert_eq!(lengths, [40, 80]);
        assert_eq!(recovered, 1);
        // Forgotten: the next ban of the pair starts over at the first length.
        let granted = take(&store, &ask("l4", LeaseClass::Anonymous, Some("o")))
            .await
            .unwrap();
        let released = end(&store, "l4", granted.fence, "429", None, short)
            .await
            .unwrap();
        assert_eq!(
            released.banned_until_ms.map(|until| until - released.now_ms),
            Some(40),
            "the expired ban was forgotten after a success"
        );
    }

    async fn a_streak_of_failures_bans_the_whole_exit(store: Store) {
        store
            .sync_units(&[unit("a", Some(LeaseClass::Stateless))], true)
            .await
            .unwrap();
        let failed = Effect::Failed {
            backoff: BACKOFF,
            streak: 2,
        };
        // A success between two failures ends the streak: the ban comes at the second failure
        // after it.
        let steps = [
            ("l1", failed, false),
            ("l2", Effect::Success, false),
            ("l3", failed, false),
            ("l4", failed, true),
        ];
        for (id, effect, bans) in steps {
            let granted = take(&store, &ask(id, LeaseClass::Stateless, Some("o")))
                .await
                .unwrap();
            let released = end(&store, id, granted.fence, "timeout", None, effect)
                .await
                .unwrap();
            assert_eq!(released.banned_until_ms.is_some(), bans, "{id}");
        }
        assert!(
            take(&store, &ask("l3", LeaseClass::Stateless, Some("other")))
                .await
                .is_none()
        );
    }

    async fn a_task_keeps_its_lease_while_it_renews(store: Store) {
        store
            .sync_units(
                &[
                    unit("gw#0", Some(LeaseClass::Identity)),
                    unit("gw#1", Some(LeaseClass::Identity)),
                ],
                true,
            )
            .await
            .unwrap();
        let first = take(
            &store,
            &Acquire {
                task: Some("t"),
                ..ask("l1", LeaseClass::Identity, None)
            },
        )
        .await
        .unwrap();
        let again = take(
            &store,
            &Acquire {
                task: Some("t"),
                ..ask("l2", LeaseClass::Identity, None)
            },
        )
        .await
        .unwrap();
        assert!(again.sticky);
        assert_eq!(
            (again.lease_id.as_str(), again.session.clone()),
            ("l1", first.session.clone())
        );
        let other = take(&store, &ask("l3", LeaseClass::Identity, None))
            .await
            .unwrap();
        assert_ne!(other.session, first.session);
        assert!(
            other.fence > first.fence,
            "a gateway's slots share its fence"
        );
    }

    async fn liveness_is_asked_in_one_call_and_a_task_finds_its_lease(store: Store) {
        store
            .sync_units(
                &[
                    unit("a", Some(LeaseClass::Identity)),
                    unit("b", Some(LeaseClass::Identity)),
                    unit("c", Some(LeaseClass::Identity)),
                ],
                true,
            )
            .await
            .unwrap();
        let tasked = take(
            &store,
            &Acquire {
                task: Some("t"),
                ..ask("l1", LeaseClass::Anonymous, None)
            },
        )
        .await
        .unwrap();
        let plain = take(&store, &ask("l2", LeaseClass::Identity, None))
            .await
            .unwrap();
        let short = take(
            &store,
            &Acquire {
                ttl_ms: 50,
                ..ask("l3", LeaseClass::Identity, None)
            },
        )
        .await
        .unwrap();
        assert_eq!(
            store.task_lease("t").await.unwrap(),
            Some(("l1".to_owned(), tasked.fence))
        );
        assert_eq!(store.task_lease("other").await.unwrap(), None);
        end(&store, "l2", plain.fence, "ok", None, Effect::Success)
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(80)).await;
        let asked = [
            ("l1".to_owned(), tasked.fence),
            ("l1".to_owned(), tasked.fence + 9),
            ("l2".to_owned(), plain.fence),
            ("l3".to_owned(), short.fence),
            ("nope".to_owned(), 1),
        ];
        assert_eq!(
            store.live(&asked).await.unwrap(),
            [true, false, false, false, false],
            "live: its own fence, not released, not expired, known"
        );
        end(&store, "l1", tasked.fence, "403", None, Effect::Neutral)
            .await
            .unwrap();
        assert_eq!(store.task_lease("t").await.unwrap(), None);
        assert_eq!(store.live(&asked[..1]).await.unwrap(), [false]);
    }

    async fn an_egress_is_remembered_per_task_and_shared_ones_are_told(store: Store) {
        let units = [
            unit("a", Some(LeaseClass::Identity)),
            unit("b", Some(LeaseClass::Identity)),
            unit("c", Some(LeaseClass::Identity)),
        ];
        store.sync_units(&units, true).await.unwrap();
        let first = Acquire {
            task: Some("t"),
            ..ask("l1", LeaseClass::Identity, None)
        };
        take(&store, &first).await.unwrap();
        let noted = store
            .record_egress("l1", "192.0.2.1", Some("DE"))
            .await
            .unwrap();
        assert_eq!(
            noted,
            EgressRecord {
                previous: None,
                previous_country: None,
                shared: false
            }
        );
        let noted = store.record_egress("l1", "192.0.2.2", None).await.unwrap();
        assert_eq!(
            (noted.previous.as_deref(), noted.previous_country.as_deref()),
            (Some("192.0.2.1"), Some("DE")),
            "the task's last address and where it was placed"
        );
        // A task's next lease hears where the task last left from.
        let next = Acquire {
            task: Some("t"),
            ..ask("l3", LeaseClass::Stateless, None)
        };
        take(&store, &next).await.unwrap();
        let noted = store
            .record_egress("l3", "192.0.2.3", Some("FR"))
            .await
            .unwrap();
        assert_eq!(
            (noted.previous.as_deref(), noted.previous_country),
            (Some("192.0.2.2"), None),
            "the last check knew no country"
        );
        take(&store, &ask("l2", LeaseClass::Identity, None))
            .await
            .unwrap();
        let noted = store.record_egress("l2", "192.0.2.2", None).await.unwrap();
        assert_eq!(
            noted,
            EgressRecord {
                previous: None,
                previous_country: None,
                shared: true
            }
        );
    }

    async fn a_lease_that_asks_for_a_country_gets_a_unit_of_it(store: Store) {
        let in_country = |name, country: Option<&str>| UnitSpec {
            country: country.map(str::to_owned),
            ..unit(name, Some(LeaseClass::Identity))
        };
        store
            .sync_units(
                &[
                    in_country("de", Some("DE")),
                    in_country("fr", Some("FR")),
                    in_country("gw#1", Some("FR")),
                    in_country("unknown", None),
                ],
                true,
            )
            .await
            .unwrap();
        let ask_in = |id, class, country| Acquire {
            country,
            ..ask(id, class, None)
        };
        let de = take(&store, &ask_in("l1", LeaseClass::Identity, Some("DE")))
            .await
            .unwrap();
        assert_eq!(de.unit, "de");
        assert!(
            take(&store, &ask_in("l2", LeaseClass::Anonymous, Some("DE")))
                .await
                .is_none(),
            "no unit of another country stands in"
        );
        let mut french: Vec<String> = Vec::new();
        for id in ["l3", "l4"] {
            let granted = take(&store, &ask_in(id, LeaseClass::Stateless, Some("FR")))
                .await
                .unwrap();
            french.push(granted.unit);
        }
        french.sort();
        assert_eq!(french, ["fr", "gw#1"], "stateless leases spread over FR's units");
        assert!(take(&store, &ask_in("l5", LeaseClass::Identity, Some("CH")))
            .await
            .is_none());
        // Without a country any free unit serves, the one of no known country included.
        let any = take(&store, &ask("l6", LeaseClass::Identity, None))
            .await
            .unwrap();
        assert_eq!(any.unit, "unknown");
        // A unit whose country changes serves the new one only, once it is free.
        store
            .sync_units(&[in_country("de", Some("CH"))], false)
            .await
            .unwrap();
        end(&store, "l1", de.fence, "ok", None, Effect::Success)
            .await
            .unwrap();
        assert!(take(&store, &ask_in("l7", LeaseClass::Identity, Some("DE")))
            .await
            .is_none());
        let moved = take(&store, &ask_in("l8", LeaseClass::Identity, Some("CH")))
            .await
            .unwrap();
        assert_eq!(moved.unit, "de");
    }

    async fn a_lease_that_asks_for_a_gap_limit_gets_a_unit_measured_within_it(store: Store) {
        let with_gap = |name, gap_ms: Option<u32>| UnitSpec {
            gap_ms,
            ..unit(name, Some(LeaseClass::Identity))
        };
        store
            .sync_units(
                &[
                    with_gap("near", Some(5)),
                    with_gap("far", Some(30)),
                    with_gap("unmeasured", None),
                ],
                true,
            )
            .await
            .unwrap();
        let within = |id, class, max_gap_ms| Acquire {
            max_gap_ms: Some(max_gap_ms),
            ..ask(id, class, None)
        };
        let near = take(&store, &within("g1", LeaseClass::Identity, 10))
            .await
            .unwrap();
        assert_eq!(near.unit, "near");
        // The one unit within 10 ms is held: nothing else stands in, neither the unit over the
        // limit nor the one never measured, for any class.
        for (id, class) in [("g2", LeaseClass::Identity), ("g3", LeaseClass::Stateless)] {
            assert!(
                take(&store, &within(id, class, 10)).await.is_none(),
                "{id}: only a measured gap within the limit serves"
            );
        }
        // A limit exactly at a unit's gap admits it.
        let far = take(&store, &within("g4", LeaseClass::Identity, 30))
            .await
            .unwrap();
        assert_eq!(far.unit, "far");
        // Without a limit any free unit serves, the unmeasured one included.
        let any = take(&store, &ask("g5", LeaseClass::Identity, None))
            .await
            .unwrap();
        assert_eq!(any.unit, "unmeasured");
        // A unit whose gap grows over the limit serves it no more once free; one measured
        // anew within it does.
        store
            .sync_units(
                &[with_gap("near", Some(50)), with_gap("unmeasured", Some(2))],
                false,
            )
            .await
            .unwrap();
        end(&store, "g1", near.fence, "ok", None, Effect::Success)
            .await
            .unwrap();
        end(&store, "g5", any.fence, "ok", None, Effect::Success)
            .await
            .unwrap();
        let measured = take(&store, &within("g6", LeaseClass::Identity, 10))
            .await
            .unwrap();
        assert_eq!(measured.unit, "unmeasured");
        assert!(take(&store, &within("g7", LeaseClass::Identity, 10))
            .await
            .is_none());
        // A unit whose gap is no longer known meets no limit.
        store
            .sync_units(&[with_gap("near", None)], false)
            .await
            .unwrap();
        assert!(take(&store, &within("g8", LeaseClass::Identity, 60))
            .await
            .is_none());
        let plain = take(&store, &ask("g9", LeaseClass::Identity, None))
            .await
            .unwrap();
        assert_eq!(plain.unit, "near");
    }

    async fn a_gap_limit_finds_the_unit_within_it_behind_many_over_it(store: Store) {
        // 200 free units over the limit, every one older in the free order than the one
        // within it (a pool of far exits with one near exit).
        let mut units: Vec<UnitSpec> = (0..200)
            .map(|i| UnitSpec {
                gap_ms: Some(30),
                ..unit(&format!("far-{i:03}"), Some(LeaseClass::Identity))
            })
            .collect();
        store.sync_units(&units, true).await.unwrap();
        units.push(UnitSpec {
            gap_ms: Some(5),
            ..unit("near", Some(LeaseClass::Identity))
        });
        store.sync_units(&units, true).await.unwrap();
        let near = take(
            &store,
            &Acquire {
                max_gap_ms: Some(10),
                ..ask("g1", LeaseClass::Identity, None)
            },
        )
        .await
        .unwrap();
        assert_eq!(near.unit, "near");
    }

    async fn a_stateless_cap_per_origin_holds_per_unit(store: Store) {
        store
            .sync_units(&[unit("a", Some(LeaseClass::Stateless))], true)
            .await
            .unwrap();
        let capped = |id, origin| Acquire {
            stateless_per_origin: Some(1),
            fences: 1,
            ..ask(id, LeaseClass::Stateless, Some(origin))
        };
        assert!(take(&store, &capped("s1", "shop")).await.is_some());
        assert!(take(&store, &capped("s2", "shop")).await.is_none());
        assert!(take(&store, &capped("s3", "news")).await.is_some());
        // Without the cap only the unit's capacity (2) counts, and it is reached.
        assert!(
            take(&store, &ask("s4", LeaseClass::Stateless, Some("shop")))
                .await
                .is_none()
        );
    }

    async fn concurrent_acquires_never_double_hold_a_unit(store: Store) {
        let units: Vec<_> = (0..6)
            .map(|i| unit(&format!("e{i}"), Some(LeaseClass::Identity)))
            .collect();
        store.sync_units(&units, true).await.unwrap();
        let held = Arc::new(Mutex::new(HashSet::new()));
        let collisions = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let granted = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let mut workers = Vec::new();
        for w in 0..16 {
            let (store, held, collisions, granted) = (
                store.clone(),
                held.clone(),
                collisions.clone(),
                granted.clone(),
            );
            workers.push(tokio::spawn(async move {
                for n in 0..15 {
                    let id = format!("w{w}-{n}");
                    let Some(lease) = take(&store, &ask(&id, LeaseClass::Identity, None)).await
                    else {
                        tokio::task::yield_now().await;
                        continue;
                    };
                    granted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if !held.lock().unwrap().insert(lease.unit.clone()) {
                        collisions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    tokio::task::yield_now().await;
                    held.lock().unwrap().remove(&lease.unit);
                    end(&store, &id, lease.fence, "ok", None, Effect::Success)
                        .await
                        .unwrap();
                }
            }));
        }
        for worker in workers {
            worker.await.unwrap();
        }
        assert_eq!(collisions.load(std::sync::atomic::Ordering::Relaxed), 0);
        assert!(granted.load(std::sync::atomic::Ordering::Relaxed) >= 6);
    }

    /// Exclusive and stateless leases taken, renewed and ended at once on a few units,
    /// half the releases through the transaction path (a retirement) and half without:
    /// no unit ever holds an exclusive lease beside any other, nor more stateless leases
    /// than its capacity.
    async fn mixed_classes_and_release_paths_keep_units_exclusive(store: Store) {
        let units: Vec<_> = (0..3)
            .map(|i| unit(&format!("m{i}"), Some(LeaseClass::Identity)))
            .collect();
        store.sync_units(&units, true).await.unwrap();
        // Per unit: (exclusive holders, stateless holders) as the workers see them.
        let held = Arc::new(Mutex::new(
            std::collections::HashMap::<String, (u32, u32)>::new(),
        ));
        let violations = Arc::new(Mutex::new(Vec::new()));
        let mut workers = Vec::new();
        for w in 0..12 {
            let (store, held, violations) = (store.clone(), held.clone(), violations.clone());
            workers.push(tokio::spawn(async move {
                for n in 0..20 {
                    let class = if (w + n) % 3 == 0 {
                        LeaseClass::Identity
                    } else {
                        LeaseClass::Stateless
                    };
                    let id = format!("m{w}-{n}");
                    let Some(lease) = take(&store, &ask(&id, class, None)).await else {
                        tokio::task::yield_now().await;
                        continue;
                    };
                    {
                        let mut held = held.lock().unwrap();
                        let (exclusive, shared) = held.entry(lease.unit.clone()).or_default();
                        let clash = if class.exclusive() {
                            *exclusive > 0 || *shared > 0
                        } else {
                            *exclusive > 0 || *shared >= 2
                        };
                        if clash {
                            violations
                                .lock()
                                .unwrap()
                                .push((id.clone(), *exclusive, *shared));
                        }
                        if class.exclusive() {
                            *exclusive += 1;
                        } else {
                            *shared += 1;
                        }
                    }
                    tokio::task::yield_now().await;
                    let renewed = store.renew(&id, lease.fence, 60_000).await.unwrap();
                    assert!(renewed.is_ok(), "{id}: {renewed:?}");
                    {
                        let mut held = held.lock().unwrap();
                        let (exclusive, shared) = held.entry(lease.unit.clone()).or_default();
                        if class.exclusive() {
                            *exclusive -= 1;
                        } else {
                            *shared -= 1;
                        }
                    }
                    let effect = if n % 2 == 0 {
                        Effect::Success
                    } else {
                        Effect::Retire
                    };
                    let ended = end(&store, &id, lease.fence, "ok", None, effect).await;
                    assert!(ended.is_ok(), "{id}: {ended:?}");
                }
            }));
        }
        for worker in workers {
            worker.await.unwrap();
        }
        assert_eq!(*violations.lock().unwrap(), Vec::new());
        // Every unit is free again: three exclusive leases fit at once.
        for i in 0..3 {
            let id = format!("after-{i}");
            assert!(take(&store, &ask(&id, LeaseClass::Identity, None))
                .await
                .is_some());
        }
    }
    async fn a_unit_that_leaves_the_pool_drains(store: Store) {
        let both = [
            unit("a", Some(LeaseClass::Identity)),
            unit("b", Some(LeaseClass::Identity)),
        ];
        store.sync_units(&both, true).await.unwrap();
        let held = take(&store, &ask("l1", LeaseClass::Identity, None))
            .await
            .unwrap();
        let other = if held.unit == "a" { "b" } else { "a" };
        // The pool names only the other unit now: the one left out drains.
        let revoked = store
            .sync_units(&[unit(other, Some(LeaseClass::Identity))], true)
            .await
            .unwrap();
        assert_eq!(revoked, 0, "a draining unit's leases run out, unrevoked");
        assert!(store.renew("l1", held.fence, 60_000).await.unwrap().is_ok());
        let next = take(&store, &ask("l2", LeaseClass::Identity, None))
            .await
            .unwrap();
        assert_eq!(next.unit, other);
        end(&store, "l1", held.fence, "ok", None, Effect::Success)
            .await
            .unwrap();
        assert!(
            take(&store, &ask("l3", LeaseClass::Identity, None))
                .await
                .is_none(),
            "the drained unit takes no new lease"
        );
        // A refresh drains a unit by its spec, the same way.
        let drained = UnitSpec {
            draining: true,
            ..unit(other, Some(LeaseClass::Identity))
        };
        assert_eq!(store.sync_units(&[drained], false).await.unwrap(), 0);
        assert!(store.renew("l2", next.fence, 60_000).await.unwrap().is_ok());
        end(&store, "l2", next.fence, "ok", None, Effect::Success)
            .await
            .unwrap();
        assert!(take(&store, &ask("l4", LeaseClass::Identity, None))
            .await
            .is_none());
    }
}
