//! A database written by the server before the connection/request split moves forward without
//! loss. `tests/data/observations-v1.db` was written by `exitvoice serve` at `ed4b644` (one
//! observation row per request, each carrying its connection's echo, ClientHello and prefix):
//! an h2 probe, an HTTP/1.1 probe, two h2 requests on one connection, and a connection whose
//! client refused the certificate. The expected values are read from that old table itself,
//! with plain SQL, before the store opens (and migrates) a copy of it.

use std::collections::BTreeMap;

use exitvoice_schema::observation::Summary;
use exitvoice_schema::{Failure, ObservationQuery};
use exitvoice_store::Store;
use serde_json::Value;
use sqlx::Row as _;

/// One old row, as the old table holds it.
struct OldRow {
    request_index: i64,
    token: Option<String>,
    failure: Option<String>,
    summary: Value,
    hello: Vec<u8>,
    prefix: Vec<u8>,
}

async fn old_rows(path: &std::path::Path) -> BTreeMap<(String, i64), OldRow> {
    let url = format!("sqlite://{}?mode=ro", path.display());
    let pool = sqlx::SqlitePool::connect(&url)
        .await
        .expect("open old copy");
    let rows = sqlx::query(
        "SELECT conn_id, request_index, token, failure, summary, hello, prefix FROM observations",
    )
    .fetch_all(&pool)
    .await
    .expect("old rows");
    pool.close().await;
    rows.iter()
        .map(|row| {
            let conn_id: String = row.get("conn_id");
            let old = OldRow {
                request_index: row.get("request_index"),
                token: row.get("token"),
                failure: row.get("failure"),
                summary: serde_json::from_str(row.get::<&str, _>("summary")).expect("JSON"),
                hello: row.get("hello"),
                prefix: row.get("prefix"),
            };
            ((conn_id, old.request_index), old)
        })
        .collect()
}

#[tokio::test]
async fn old_observations_move_to_connections_and_requests_without_loss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("old.db");
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/observations-v1.db");
    std::fs::copy(&fixture, &db).expect("copy fixture");
    let old = old_rows(&db).await;
    assert_eq!(old.len(), 5, "the fixture's rows");

    let store = Store::open(&db).await.expect("open and migrate");
    let listed = store
        .observations(
            &ObservationQuery {
                limit: 100,
                raw: true,
                ..ObservationQuery::default()
            },
            |_, _, _, _| panic!("moved rows keep their layers: nothing is derived"),
        )
        .await
        .expect("list");
    assert_eq!(listed.len(), old.len(), "every old observation is listed");
    let connections: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM connections")
        .fetch_one(store.pool())
        .await
        .expect("count");
    assert_eq!(
        connections, 4,
        "the two requests of one connection share its row"
    );
    let old_table: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'observations'",
    )
    .fetch_one(store.pool())
    .await
    .expect("count");
    assert_eq!(old_table, 0, "the old table is gone");

    for stored in &listed {
        let new = &stored.observation;
        let key = (new.conn_id.clone(), i64::from(new.request_index));
        let was = old
            .get(&key)
            .unwrap_or_else(|| panic!("{key:?} was not in the old table"));
        assert_eq!(new.token, was.token, "{key:?}");
        assert_eq!(new.hello, was.hello, "{key:?}: the ClientHello bytes");
        assert!(
            new.prefix.starts_with(&was.prefix),
            "{key:?}: the connection keeps its longest prefix, which starts with this one's"
        );
        let summary = serde_json::to_value(&new.summary).expect("JSON");
        match &new.summary {
            Summary::Request(_) => {
                for field in [
                    "/method",
                    "/path",
                    "/token",
                    "/bucket",
                    "/profile",
                    "/alpn",
                    "/tls/ja4",
                    "/tls/voice_id",
                    "/tls/detail",
                    "/http2/akamai_fingerprint",
                    "/http2/voice_id",
                    "/http2/pseudo_header_order",
                    "/http2/header_order",
                    "/http1",
                    "/request",
                ] {
                    assert_eq!(
                        summary.pointer(field),
                        was.summary.pointer(field),
                        "{key:?}: {field}"
                    );
                }
            }
            Summary::Connection(connection) => {
                assert_eq!(was.request_index, 0);
                assert_eq!(connection.failure, Some(Failure::TlsAlertReceived));
                assert_eq!(new.failure_detail, was.failure, "the old text is kept");
                assert_eq!(summary.pointer("/tls/ja4"), was.summary.pointer("/tls/ja4"));
            }
        }
    }
    store.pool().close().await;

    // Opening again finds nothing left to move.
    let again = Store::open(&db).await.expect("reopen");
    assert_eq!(again.observation_count().await.expect("count"), 5);
}
