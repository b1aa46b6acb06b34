//! The broker reads its exits file again on SIGHUP, without a restart. An exit the
//! new file adds is leased once its label admits it; an exit it no longer names drains: its
//! live lease renews and releases as before, and nobody gets it again. A file that does not
//! parse changes nothing.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::broker::{audit, Broker};
use support::{EchoServer, Proxy};

const TOKEN: &str = "reload-test-token-0123456789";

/// An exits file naming `names`, each an exit through `proxy`.
fn write_exits(path: &Path, echo: &EchoServer, proxy: u16, names: &[&str]) {
    let mut text = format!(
        "[echo]\nurl = \"https://localhost:{}\"\nspki_sha256 = \"{}\"\n",
        echo.port, echo.pin
    );
    for name in names {
        text.push_str(&format!(
            "\n[[exits]]\nname = \"{name}\"\nurl = \"http://127.0.0.1:{proxy}\"\n"
        ));
    }
    std::fs::write(path, text).unwrap();
}

fn lease(broker: &str, args: &[&str]) -> (i32, serde_json::Value) {
    support::broker::lease(broker, TOKEN, args)
}

/// An anonymous lease right away, if any exit is free.
fn acquire(broker: &str, holder: &str) -> Option<serde_json::Value> {
    let ask = [
        "acquire",
        "--class",
        "anonymous",
        "--holder",
        holder,
        "--wait",
        "0s",
    ];
    let (code, answer) = lease(broker, &ask);
    (code == 0).then_some(answer)
}

fn renew(broker: &str, held: &serde_json::Value) -> i32 {
    let id = held["lease_id"].as_str().unwrap();
    lease(
        broker,
        &["renew", id, "--fence", &held["fence"].to_string()],
    )
    .0
}

fn release(broker: &str, held: &serde_json::Value) -> i32 {
    let id = held["lease_id"].as_str().unwrap();
    let fence = held["fence"].to_string();
    lease(
        broker,
        &["release", id, "--fence", &fence, "--outcome", "ok"],
    )
    .0
}

#[test]
fn sighup_adds_new_exits_and_drains_removed_ones() {
    let echo = EchoServer::start();
    let tiny = Proxy::tinyproxy();
    let work = tempfile::tempdir().unwrap();
    let exits = work.path().join("exits.toml");
    let database = work.path().join("audit.db").to_string_lossy().into_owned();
    // Labels for all three, from a real audit; the broker starts with two of them.
    write_exits(&exits, &echo, tiny.port, &["a", "b", "c"]);
    audit(&exits, &database);
    write_exits(&exits, &echo, tiny.port, &["a", "b"]);
    let broker = Broker::start(&exits, &database, TOKEN, &["--labels-refresh", "500ms"]);
    let url = broker.url.clone();

    let first = acquire(&url, "w1").expect("a lease");
    let second = acquire(&url, "w2").expect("a second lease");
    let mut held: Vec<&str> = [&first, &second]
        .iter()
        .map(|lease| lease["exit"].as_str().unwrap())
        .collect();
    held.sort_unstable();
    assert_eq!(held, ["a", "b"]);
    assert!(acquire(&url, "w3").is_none(), "c is not in the file yet");

    // The file drops `a` and adds `c`.
    write_exits(&exits, &echo, tiny.port, &["b", "c"]);
    broker.hangup();
    let deadline = Instant::now() + Duration::from_secs(15);
    let third = loop {
        if let Some(lease) = acquire(&url, "w3") {
            break lease;
        }
        assert!(Instant::now() < deadline, "c was never leased");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(third["exit"], "c");
    let on_a = if first["exit"] == "a" {
        &first
    } else {
        &second
    };
    assert_eq!(renew(&url, on_a), 0, "a drains: its lease lives on");
    assert_eq!(release(&url, on_a), 0);
    assert!(
        acquire(&url, "w4").is_none(),
        "a drained: nobody gets it again"
    );

    // A file that does not parse leaves the pool as it was.
    std::fs::write(&exits, "[[exits]\nbroken").unwrap();
    broker.hangup();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(release(&url, &third), 0);
    let again = acquire(&url, "w5").expect("c is still in the pool");
    assert_eq!(again["exit"], "c");
}
