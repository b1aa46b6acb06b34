//! Gateway sessions: `user-{session}` × N expands into N exits, each with an id minted by the
//! auditor; a session keeps its id while it works and gets a fresh one after every failure.

mod support;

use exitvoice_store::Store;
use support::{audit, EchoServer, Proxy};

fn gateway_file(
    dir: &std::path::Path,
    echo: &EchoServer,
    port: u16,
    sessions: u32,
) -> std::path::PathBuf {
    let text = format!(
        "[echo]\nurl = \"https://localhost:{}\"\nspki_sha256 = \"{}\"\n\n[[exits]]\nname = \"gw\"\n\
         url = \"http://cust-{{session}}:pw@127.0.0.1:{port}\"\nsessions = {sessions}\n",
        echo.port, echo.pin
    );
    let path = dir.join("exits.toml");
    std::fs::write(&path, text).unwrap();
    path
}

async fn sessions_of(db: &std::path::Path, exit: &str) -> Vec<String> {
    let store = Store::open(db).await.unwrap();
    store
        .recent_probes(Some(exit), "rustls/chrome", 100)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.session.expect("session exits record their session id"))
        .collect()
}

#[tokio::test]
async fn working_sessions_are_sticky_and_distinct() {
    let echo = EchoServer::start();
    // tinyproxy without auth stands in for a gateway that accepts any session user name.
    let tiny = Proxy::tinyproxy();
    let work = tempfile::tempdir().unwrap();
    let exits = gateway_file(work.path(), &echo, tiny.port, 2);
    let db = work.path().join("audit.db");
    let run = audit(&exits, &db, &["--samples", "3"]);
    assert_eq!(run.exit("gw#1")["samples"], 3);
    assert_eq!(run.exit("gw#2")["samples"], 3);
    assert!(run.exit("gw#1")["url"]
        .as_str()
        .unwrap()
        .contains("cust-{session}:***@"));
    let one = sessions_of(&db, "gw#1").await;
    let two = sessions_of(&db, "gw#2").await;
    assert_eq!(one.len(), 3);
    assert!(one.iter().all(|id| id == &one[0]), "sticky: {one:?}");
    assert!(two.iter().all(|id| id == &two[0]), "sticky: {two:?}");
    assert_ne!(one[0], two[0], "each session its own id");
}

#[tokio::test]
async fn a_failed_session_id_is_never_reused() {
    let echo = EchoServer::start();
    // Accepts and never answers: every probe fails with a timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for socket in silent.incoming() {
            held.push(socket);
        }
    });
    let work = tempfile::tempdir().unwrap();
    let exits = gateway_file(work.path(), &echo, port, 1);
    let db = work.path().join("audit.db");
    let run = audit(
        &exits,
        &db,
        &[
            "--samples",
            "4",
            "--retries",
            "0",
            "--tunnel-timeout",
            "300ms",
        ],
    );
    assert_eq!(run.exit("gw#1")["errors"]["timeout"], 4);
    let ids = sessions_of(&db, "gw#1").await;
    let distinct: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(ids.len(), 4);
    assert_eq!(distinct.len(), 4, "a failed id came back: {ids:?}");
}
