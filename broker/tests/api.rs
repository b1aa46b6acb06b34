//! The broker's API end to end over its router, on SQLite and on a real PostgreSQL (a throwaway
//! cluster, `exitvoice-pgtest`): leases, waits, fences, labels, bans, bad input and the token.
//! The labels are a snapshot stored as the auditor stores its own (they are the broker's input,
//! not a computed expectation).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use exitvoice_broker::auth::BrokerToken;
use exitvoice_broker::pool::Pool;
use exitvoice_broker::service::{Broker, BrokerConfig};
use exitvoice_broker::sql_leases::SqlLeases;
use exitvoice_exits::ExitsFile;
use exitvoice_schema::LabelsDoc;
use exitvoice_store::{Database, Store};
use http_body_util::BodyExt as _;
use serde_json::{json, Value};
use tower::ServiceExt as _;

const TOKEN: &str = "a-token-of-32-characters-exactly";
const PASSWORD: &str = "pw-s3cr@t";

const EXITS: &str = r#"
[[exits]]
name = "dc"
url = "http://user:pw-s3cr%40t@127.0.0.1:3128"
[[exits]]
name = "gw"
url = "http://cust-{session}:pw-s3cr%40t@127.0.0.1:9999"
sessions = 2
sticky = "10m"
"#;

/// A labels snapshot of the persona `rustls/chrome`, probed just now, with these routes.
fn labels(routes: &[(&str, &str)]) -> LabelsDoc {
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let exits: Vec<Value> = routes
        .iter()
        .map(|(name, route)| {
            json!({
                "name": name, "route": route, "last_probe_at": now, "url": "", "tags": {},
                "egress_ips": [], "state": "stable", "changed_at": null, "bucket": null,
                "voices": [], "route_reason": "", "samples": 4, "errors": {}, "history": [],
                "latency": {"p50_ms": null, "p95_ms": null},
                "flags": {"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false,
                          "remuxed": false, "not_proxied": false, "tls_reoriginated": false},
            })
        })
        .collect();
    serde_json::from_value(json!({
        "schema_version": 2, "generated_at": now, "persona": "rustls/chrome",
        "baseline": null, "exits": exits,
    }))
    .unwrap()
}

struct Harness {
    store: Store,
    broker: Arc<Broker<SqlLeases>>,
    app: axum::Router,
}

impl Harness {
    async fn new(store: Store) -> Self {
        Self::with(store, BrokerConfig::default()).await
    }

    async fn with(store: Store, config: BrokerConfig) -> Self {
        store
            .insert_labels(&labels(&[
                ("dc", "identity"),
                ("gw#1", "anonymous"),
                ("gw#2", "identity"),
            ]))
            .await
            .unwrap();
        let file: ExitsFile<serde::de::IgnoredAny> = ExitsFile::parse(EXITS.as_bytes()).unwrap();
        let leases = SqlLeases::open(store.clone(), config.longest_told_ttl())
            .await
            .unwrap();
        let broker = Arc::new(Broker::new(
            leases,
            store.clone(),
            Pool::new(file.exits),
            config,
        ));
        broker.refresh().await.unwrap();
        let app = exitvoice_broker::api::router(
            broker.clone(),
            Some(BrokerToken::new(TOKEN.to_owned()).unwrap()),
        );
        Self { store, broker, app }
    }

    async fn call(
        &self,
        method: Method,
        uri: &str,
        body: Option<&str>,
        token: Option<&str>,
    ) -> (StatusCode, Value) {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let request = request
            .header("content-type", "application/json")
            .body(Body::from(body.unwrap_or("").to_owned()))
            .unwrap();
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, value)
    }

    async fn post(&self, uri: &str, body: &str) -> (StatusCode, Value) {
        self.call(Method::POST, uri, Some(body), Some(TOKEN)).await
    }

    async fn delete(&self, uri: &str) -> (StatusCode, Value) {
        self.call(Method::DELETE, uri, None, Some(TOKEN)).await
    }

    async fn rows(&self) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM broker_leases")
            .fetch_one(self.store.pool())
            .await
            .unwrap()
    }
}

macro_rules! on_both_engines {
    ($($name:ident),*) => {
        $(
            mod $name {
                #[tokio::test]
                async fn sqlite() {
                    let dir = tempfile::tempdir().unwrap();
                    let store = super::Store::open(&dir.path().join("broker.db")).await.unwrap();
                    super::$name(super::Harness::new(store).await).await;
                }

                #[tokio::test]
                async fn postgres() {
                    let url = exitvoice_pgtest::fresh_database(stringify!($name));
                    let database: super::Database = url.parse().unwrap();
                    let store = super::Store::connect(&database).await.unwrap();
                    super::$name(super::Harness::new(store).await).await;
                }
            }
        )*
    };
}

on_both_engines!(
    a_lease_cycle,
    bad_input_changes_nothing,
    a_waiter_gets_the_released_exit,
    labels_and_bans_decide,
    labels_that_age_out_admit_nothing_from_the_next_refresh
);

async fn a_lease_cycle(h: Harness) {
    let (status, lease) = h
        .post(
            "/v1/leases",
            r#"{"class":"identity","holder":"w1","origin":"shop"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{lease}");
    assert_eq!(lease["exit"], "dc");
    assert_eq!(lease["proxy_url"], "http://user:pw-s3cr%40t@127.0.0.1:3128");
    assert_eq!(lease["session"], Value::Null);
    assert_eq!(lease["ttl_ms"], 60_000);
    let id = lease["lease_id"].as_str().unwrap();
    let fence = lease["fence"].as_i64().unwrap();
    // The gateway's slots: gw#1 admits only anonymous, so both admit anonymous at most.
    let (status, busy) = h
        .post("/v1/leases", r#"{"class":"identity","holder":"w2"}"#)
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{busy}");
    assert!(busy["retry_after_ms"].as_u64().unwrap() > 0);
    let (status, gw) = h
        .post(
            "/v1/leases",
            r#"{"class":"anonymous","holder":"w2","task":"t"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{gw}");
    let session = gw["session"].as_str().unwrap();
    assert_eq!(
        gw["proxy_url"],
        format!("http://cust-{session}:pw-s3cr%40t@127.0.0.1:9999")
    );
    // The same task gets its live lease back.
    let (status, again) = h
        .post(
            "/v1/leases",
            r#"{"class":"anonymous","holder":"w2","task":"t"}"#,
        )
        .await;
    assert_eq!(
        (status, &again["lease_id"], &again["sticky"]),
        (StatusCode::OK, &gw["lease_id"], &json!(true))
    );

    let (status, renewed) = h
        .post(
            &format!("/v1/leases/{id}/renew"),
            &format!(r#"{{"fence":{fence},"ttl_ms":30000}}"#),
        )
        .await;
    assert_eq!(
        (status, &renewed["ttl_ms"]),
        (StatusCode::OK, &json!(30000))
    );
    let (status, stale) = h
        .post(
            &format!("/v1/leases/{id}/renew"),
            &format!(r#"{{"fence":{}}}"#, fence - 1),
        )
        .await;
    assert_eq!(
        (status, &stale["error"]),
        (StatusCode::CONFLICT, &json!("stale_fence"))
    );
    let (status, _) = h.post("/v1/leases/nope/renew", r#"{"fence":1}"#).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, exits) = h.call(Method::GET, "/v1/exits", None, Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK);
    let dc = exits["exits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["exit"] == "dc")
        .unwrap();
    assert_eq!(
        (&dc["leased"], &dc["holders"][0]["holder"]),
        (&json!(true), &json!("w1"))
    );
    assert!(
        !exits.to_string().contains(PASSWORD),
        "credentials only in a lease's answer"
    );

    let (status, released) = h
        .delete(&format!(
            "/v1/leases/{id}?fence={fence}&outcome=ok&latency_ms=120"
        ))
        .await;
    assert_eq!(
        (status, &released["released"]),
        (StatusCode::OK, &json!(true))
    );
    let (status, twice) = h
        .delete(&format!("/v1/leases/{id}?fence={fence}&outcome=ok"))
        .await;
    assert_eq!(
        (status, &twice["error"]),
        (StatusCode::CONFLICT, &json!("released"))
    );
    let (status, next) = h
        .post("/v1/leases", r#"{"class":"identity","holder":"w3"}"#)
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(
        next["fence"].as_i64().unwrap() > fence,
        "the fence only grows"
    );

    let (status, exits) = h.call(Method::GET, "/v1/exits", None, Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK);
    let dc = exits["exits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["exit"] == "dc")
        .unwrap();
    assert_eq!(
        (
            &dc["leases_served"],
            &dc["success_rate"],
            &dc["latency_p50_ms"]
        ),
        (&json!(2), &json!(1.0), &json!(120))
    );
    let (status, metrics) = h.call(Method::GET, "/metrics", None, Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK);
    let text = metrics.as_str().unwrap();
    assert!(text.contains("exitvoice_broker_collisions 0"), "{text}");
    assert!(
        text.contains("exitvoice_broker_refused_total{reason=\"stale_fence\"} 1"),
        "{text}"
    );
}

async fn bad_input_changes_nothing(h: Harness) {
    let before = h.rows().await;
    for (body, what) in [
        ("{not json", "bad JSON"),
        (r#"{"class":"vip","holder":"w"}"#, "class must be"),
        (
            r#"{"class":"identity","holder":"w","ttl_ms":99999999999}"#,
            "ttl_ms is at most",
        ),
        (
            r#"{"class":"identity","holder":"w","ttl_ms":0}"#,
            "ttl_ms must be positive",
        ),
        (r#"{"class":"identity","holder":""}"#, "holder is required"),
        (
            r#"{"class":"identity","holder":"w","wait_ms":3600000}"#,
            "wait_ms is at most",
        ),
        (
            r#"{"class":"identity","holder":"w","extra":1}"#,
            "unknown field",
        ),
    ] {
        let (status, answer) = h.post("/v1/leases", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert!(
            answer["error"].as_str().unwrap().contains(what),
            "{body}: {answer}"
        );
    }
    let body = r#"{"class":"identity","holder":"w"}"#;
    for token in [
        None,
        Some("a-token-of-32-characters-exactlx"),
        Some("short"),
    ] {
        let (status, _) = h.call(Method::POST, "/v1/leases", Some(body), token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}");
    }
    let (status, _) = h.call(Method::GET, "/metrics", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = h.call(Method::GET, "/healthz", None, None).await;
    assert_eq!(status, StatusCode::OK, "health needs no token");
    assert_eq!(h.rows().await, before, "nothing was stored");

    let (_, lease) = h.post("/v1/leases", body).await;
    let (id, fence) = (
        lease["lease_id"].as_str().unwrap(),
        lease["fence"].as_i64().unwrap(),
    );
    for query in [
        "",
        "?fence=x&outcome=ok",
        &format!("?fence={fence}&outcome=teapot"),
        &format!("?fence={fence}&outcome=ok&latency_ms=-1"),
    ] {
        let (status, answer) = h.delete(&format!("/v1/leases/{id}{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {answer}");
    }
    let (status, _) = h
        .post(
            &format!("/v1/leases/{id}/renew"),
            &format!(r#"{{"fence":{fence}}}"#),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the lease survived the bad releases"
    );
}

async fn a_waiter_gets_the_released_exit(h: Harness) {
    let (_, held) = h
        .post("/v1/leases", r#"{"class":"identity","holder":"w1"}"#)
        .await;
    let (id, fence) = (
        held["lease_id"].as_str().unwrap().to_owned(),
        held["fence"].as_i64().unwrap(),
    );
    let broker = h.broker.clone();
    let releaser = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        broker.release(&id, fence, "ok", None).await.unwrap();
    });
    let started = std::time::Instant::now();
    let (status, lease) = h
        .post(
            "/v1/leases",
            r#"{"class":"identity","holder":"w2","wait_ms":5000}"#,
        )
        .await;
    releaser.await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{lease}");
    assert_eq!(lease["exit"], "dc");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "it waited for the release"
    );
}

/// An identity lease right away, released at once: the acquire's status.
async fn lease_and_release(h: &Harness) -> StatusCode {
    let (status, lease) = h
        .post(
            "/v1/leases",
            r#"{"class":"identity","holder":"w","wait_ms":0}"#,
        )
        .await;
    if status == StatusCode::CREATED {
        let uri = format!(
            "/v1/leases/{}?fence={}&outcome=ok",
            lease["lease_id"].as_str().unwrap(),
            lease["fence"]
        );
        assert_eq!(h.delete(&uri).await.0, StatusCode::OK);
    }
    status
}

/// A refresh with no new snapshot has nothing to work out until a label ages out; then it
/// does: the exit it labels is leased no more.
async fn labels_that_age_out_admit_nothing_from_the_next_refresh(h: Harness) {
    const MAX_AGE: Duration = Duration::from_secs(2);
    let config = BrokerConfig {
        labels_max_age: MAX_AGE,
        ..BrokerConfig::default()
    };
    // Labels probed now, read by a broker that counts them for two seconds.
    let h = Harness::with(h.store, config).await;
    let probed = std::time::Instant::now();
    assert_eq!(lease_and_release(&h).await, StatusCode::CREATED);
    h.broker.refresh().await.unwrap();
    assert_eq!(
        lease_and_release(&h).await,
        StatusCode::CREATED,
        "still recent"
    );
    tokio::time::sleep((MAX_AGE + Duration::from_millis(500)).saturating_sub(probed.elapsed()))
        .await;
    h.broker.refresh().await.unwrap();
    assert_eq!(
        lease_and_release(&h).await,
        StatusCode::SERVICE_UNAVAILABLE,
        "the labels aged out"
    );
}

async fn labels_and_bans_decide(h: Harness) {
    let (_, lease) = h
        .post("/v1/leases", r#"{"class":"identity","holder":"w1"}"#)
        .await;
    let (id, fence) = (
        lease["lease_id"].as_str().unwrap(),
        lease["fence"].as_i64().unwrap(),
    );
    // A newer audit quarantines dc: the next refresh revokes its lease and leases it no more.
    h.store
        .insert_labels(&labels(&[
            ("dc", "quarantine"),
            ("gw#1", "anonymous"),
            ("gw#2", "identity"),
        ]))
        .await
        .unwrap();
    assert_eq!(h.broker.refresh().await.unwrap(), 1);
    let (status, revoked) = h
        .post(
            &format!("/v1/leases/{id}/renew"),
            &format!(r#"{{"fence":{fence}}}"#),
        )
        .await;
    assert_eq!(
        (status, &revoked["error"]),
        (StatusCode::CONFLICT, &json!("revoked"))
    );
    let (status, _) = h
        .post(
            "/v1/leases",
            r#"{"class":"stateless","holder":"w2","origin":"shop"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "the gateway still serves");
    // A 429 on a gateway session retires the session, never the gateway.
    let (_, gw) = h
        .post(
            "/v1/leases",
            r#"{"class":"anonymous","holder":"w3","origin":"shop"}"#,
        )
        .await;
    let uri = format!(
        "/v1/leases/{}?fence={}&outcome=429",
        gw["lease_id"].as_str().unwrap(),
        gw["fence"]
    );
    let (status, released) = h.delete(&uri).await;
    assert_eq!(
        (status, &released["session_retired"]),
        (StatusCode::OK, &json!(true))
    );
    let (status, again) = h
        .post(
            "/v1/leases",
            r#"{"class":"anonymous","holder":"w4","origin":"shop"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_ne!(again["session"], gw["session"]);
}
