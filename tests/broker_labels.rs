//! The broker obeys real audits: an exit that starts intercepting (a loopback forwarder switched
//! from tinyproxy to mitmproxy between two `exitvoice audit --once` runs) stops being leased
//! within one labels refresh, and its live lease is revoked. And its egress check names the
//! address an exit leaves from, as the echo server saw it, where the echo's geo databases place
//! it, and tells a task when it changed, left its country, or left the exit's country. A lease may ask for a
//! country: the exit's in the exits file, else the one the audit's geo databases saw. A lease
//! may ask for a largest round-trip gap (`max_gap_ms`): only an exit whose label measured one
//! within it serves.

mod geo_support;
mod support;

use std::process::Command;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::bound_exit::BoundExit;
use support::broker::{audit, audit_with, set_gaps, Broker};
use support::{exits_file, EchoServer, Proxy};

const TOKEN: &str = "labels-test-token-0123456789";
const REFRESH_MS: u64 = 500;

/// A TCP forwarder on loopback whose target port can be switched: the "exit".
fn forwarder(runtime: &tokio::runtime::Runtime, target: Arc<AtomicU16>) -> u16 {
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let to = target.load(Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut upstream) =
                        tokio::net::TcpStream::connect(("127.0.0.1", to)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    }
                });
            }
        });
        port
    })
}

fn lease(broker: &str, args: &[&str]) -> (i32, serde_json::Value) {
    support::broker::lease(broker, TOKEN, args)
}

#[test]
fn an_exit_that_starts_intercepting_stops_being_leased_within_one_refresh() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let echo = EchoServer::start();
    let tiny = Proxy::tinyproxy();
    let mitm = Proxy::start("mitmproxy", &[]);
    let target = Arc::new(AtomicU16::new(tiny.port));
    let exit = forwarder(&runtime, target.clone());
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[("flip", format!("http://127.0.0.1:{exit}"))],
    );
    let db = work.path().join("audit.db");
    let database = db.to_string_lossy();
    audit(&exits, &database);

    let broker = Broker::start(
        &exits,
        &database,
        TOKEN,
        &["--labels-refresh", &format!("{REFRESH_MS}ms")],
    );
    let url = broker.url.clone();

    let (code, held) = lease(&url, &["acquire", "--class", "anonymous", "--holder", "w1"]);
    assert_eq!(code, 0, "{held}");
    assert_eq!(held["exit"], "flip");
    let (id, fence) = (
        held["lease_id"].as_str().unwrap(),
        held["fence"].to_string(),
    );
    let (code, renewed) = lease(&url, &["renew", id, "--fence", &fence]);
    assert_eq!(code, 0, "{renewed}");

    // The exit starts intercepting; the next real audit sees it.
    target.store(mitm.port, Ordering::SeqCst);
    audit(&exits, &database);
    let audited = Instant::now();
    let revoked = loop {
        let (code, answer) = lease(&url, &["renew", id, "--fence", &fence]);
        if code == 4 {
            break answer;
        }
        assert!(
            audited.elapsed() < Duration::from_millis(3 * REFRESH_MS),
            "still renewed: {answer}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(revoked["error"], "revoked");
    let (code, none) = lease(&url, &["acquire", "--class", "stateless", "--holder", "w2"]);
    assert_eq!(
        (code, &none["error"]),
        (3, &serde_json::json!("no exit of class stateless is free"))
    );
}

#[test]
fn the_egress_check_tells_a_task_its_address_changed() {
    let work = tempfile::tempdir().unwrap();
    // The echo places the two addresses in two countries (geo_support: an independent writer,
    // read back with mmdblookup).
    let geo = work.path().join("country.mmdb");
    geo_support::write_mmdb(
        &geo,
        "ipinfo",
        &[
            "127.0.0.2/32=DE,64501,Berlin Carrier",
            "127.0.0.3/32=FR,64502,Paris Carrier",
        ],
    );
    let echo = EchoServer::start_with(&["--geoip", geo.to_str().unwrap()]);
    // Each connection through this exit leaves from the next of two loopback addresses.
    let sources = ["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap()];
    let exit = BoundExit::start(&sources);
    let exits = exits_file(
        work.path(),
        &echo,
        &[("rotating", format!("http://127.0.0.1:{}", exit.port))],
    );
    // The exit is expected to leave from Germany.
    let mut text = std::fs::read_to_string(&exits).unwrap();
    text.push_str("country = \"DE\"\n");
    std::fs::write(&exits, text).unwrap();
    let database = work.path().join("audit.db").to_string_lossy().into_owned();
    audit(&exits, &database);
    // Its state in a database of its own; the labels still come from the audit's.
    let state = work.path().join("broker-state.db");
    let broker = Broker::start(
        &exits,
        &database,
        TOKEN,
        &["--store", &state.to_string_lossy()],
    );
    let ask = [
        "acquire",
        "--class",
        "stateless",
        "--holder",
        "w1",
        "--task",
        "t1",
        "--egress",
    ];
    let (code, first) = lease(&broker.url, &ask);
    assert_eq!(code, 0, "{first}");
    let seen = first["egress"]["ip"]
        .as_str()
        .unwrap_or_else(|| panic!("{first}"))
        .to_owned();
    assert!(seen == "127.0.0.2" || seen == "127.0.0.3", "{first}");
    assert_eq!(first["egress"]["tls_intercepted"], false, "{first}");
    assert_eq!(first["egress"]["changed"], false, "{first}");
    // The task comes back for its lease; the exit now leaves from the other address.
    let (code, again) = lease(&broker.url, &ask);
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["lease_id"], first["lease_id"], "{again}");
    assert_ne!(again["egress"]["ip"], first["egress"]["ip"], "{again}");
    assert_eq!(again["egress"]["changed"], true, "{again}");
    // The two addresses are in two countries: the task is told it left its country.
    assert_eq!(
        first["egress"]["country_changed"],
        serde_json::Value::Null,
        "{first}"
    );
    assert_eq!(again["egress"]["country_changed"], true, "{again}");
    for answer in [&first, &again] {
        let ip = answer["egress"]["ip"].as_str().unwrap();
        let country = geo_support::mmdblookup(&geo, ip, &["country_code"]);
        assert_eq!(answer["egress"]["country"], country, "{answer}");
        assert_eq!(
            answer["egress"]["country_mismatch"],
            country != "DE",
            "{answer}"
        );
        assert_eq!(
            answer["egress"]["organization"],
            geo_support::mmdblookup(&geo, ip, &["as_name"])
        );
        assert_eq!(answer["egress"]["geo_sources"][0]["file"], "country.mmdb");
    }
    let leases = |path: &str| {
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            let store = exitvoice_store::Store::open(std::path::Path::new(path))
                .await
                .unwrap();
            let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM broker_leases")
                .fetch_one(store.pool())
                .await
                .unwrap();
            rows
        })
    };
    assert_eq!(
        leases(&state.to_string_lossy()),
        1,
        "the lease is in --store"
    );
    assert_eq!(leases(&database), 0, "and not in --database");
}

/// A lease may ask for a country: the exit's in the exits file, else where the labels placed
/// it (`audit --geoip`), else where the broker's own databases place it (`broker --geoip`).
#[test]
fn a_lease_that_asks_for_a_country_gets_an_exit_of_that_country_or_none() {
    let work = tempfile::tempdir().unwrap();
    let geo = work.path().join("country.mmdb");
    geo_support::write_mmdb(
        &geo,
        "maxmind-country",
        &[
            "127.0.0.2/32=DE,64501,Berlin Carrier",
            "127.0.0.3/32=FR,64502,Paris Carrier",
        ],
    );
    assert_eq!(
        geo_support::mmdblookup(&geo, "127.0.0.2", &["country", "iso_code"]),
        serde_json::json!("DE"),
        "the independent reader places Berlin's address in DE"
    );
    // The echo has no geo database: only the broker's can place the addresses.
    let echo = EchoServer::start();
    let berlin = BoundExit::start(&["127.0.0.2".parse().unwrap()]);
    let paris = BoundExit::start(&["127.0.0.3".parse().unwrap()]);
    let exits = exits_file(
        work.path(),
        &echo,
        &[
            ("berlin", format!("http://127.0.0.1:{}", berlin.port)),
            ("paris", format!("http://127.0.0.1:{}", paris.port)),
        ],
    );
    // Paris's country is in the exits file (lower case, as users write it); Berlin's is not.
    let mut text = std::fs::read_to_string(&exits).unwrap();
    text.push_str("country = \"fr\"\n");
    std::fs::write(&exits, text).unwrap();
    let database = work.path().join("audit.db").to_string_lossy().into_owned();
    audit(&exits, &database);
    let state = |name: &str| work.path().join(name).to_string_lossy().into_owned();

    let broker = Broker::start(
        &exits,
        &database,
        TOKEN,
        &["--store", &state("a.db"), "--geoip", geo.to_str().unwrap()],
    );
    let ask = |url: &str, holder: &str, country: &str, extra: &[&str]| {
        let mut args = vec![
            "acquire",
            "--class",
            "anonymous",
            "--holder",
            holder,
            "--country",
            country,
        ];
        args.extend_from_slice(extra);
        lease(url, &args)
    };
    let (code, de) = ask(&broker.url, "w1", "de", &["--egress"]);
    assert_eq!(
        (code, &de["exit"]),
        (0, &serde_json::json!("berlin")),
        "{de}"
    );
    assert_eq!(
        de["egress"]["country"], "DE",
        "placed by the broker's database: {de}"
    );
    assert_eq!(
        de["egress"]["geo_sources"][0]["file"], "country.mmdb",
        "{de}"
    );
    // The only German exit is held: no other exit stands in for it.
    let (code, none) = ask(&broker.url, "w2", "DE", &[]);
    assert_eq!(
        (code, &none["error"]),
        (
            3,
            &serde_json::json!("no exit of class anonymous in DE is free")
        ),
        "{none}"
    );
    let (code, fr) = ask(&broker.url, "w3", "FR", &[]);
    assert_eq!(
        (code, &fr["exit"]),
        (0, &serde_json::json!("paris")),
        "{fr}"
    );
    let (code, bad) = ask(&broker.url, "w4", "DEU", &[]);
    assert_eq!(code, 1, "{bad}");
    assert!(
        bad["error"]
            .as_str()
            .is_some_and(|e| e.contains("two letters")),
        "{bad}"
    );
    // Berlin is free again once released, for a lease of its country.
    let fence = de["fence"].to_string();
    let (code, released) = lease(
        &broker.url,
        &[
            "release",
            de["lease_id"].as_str().unwrap(),
            "--fence",
            &fence,
            "--outcome",
            "ok",
        ],
    );
    assert_eq!(code, 0, "{released}");
    let (code, again) = ask(&broker.url, "w2", "DE", &[]);
    assert_eq!(
        (code, &again["exit"]),
        (0, &serde_json::json!("berlin")),
        "{again}"
    );
    drop(broker);

    // Audited with the database, the labels place Berlin: a broker without one finds it.
    audit_with(&exits, &database, &["--geoip", geo.to_str().unwrap()]);
    let broker = Broker::start(&exits, &database, TOKEN, &["--store", &state("b.db")]);
    let (code, de) = ask(&broker.url, "w5", "DE", &[]);
    assert_eq!(
        (code, &de["exit"]),
        (0, &serde_json::json!("berlin")),
        "{de}"
    );
}

/// Two exits that leave from one address are one exit: an exclusive lease whose egress check
/// finds another live lease on its address is ended (never handed out) and another taken.
#[test]
fn exits_that_share_an_address_are_never_leased_exclusively_at_once() {
    let echo = EchoServer::start();
    let shared = ["127.0.0.4".parse().unwrap()];
    let (a, b) = (BoundExit::start(&shared), BoundExit::start(&shared));
    let c = BoundExit::start(&["127.0.0.5".parse().unwrap()]);
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[
            ("a", format!("http://127.0.0.1:{}", a.port)),
            ("b", format!("http://127.0.0.1:{}", b.port)),
            ("c", format!("http://127.0.0.1:{}", c.port)),
        ],
    );
    let database = work.path().join("audit.db").to_string_lossy().into_owned();
    audit(&exits, &database);
    let broker = Broker::start(&exits, &database, TOKEN, &[]);
    let ask = |holder: &str| {
        lease(
            &broker.url,
            &[
                "acquire",
                "--class",
                "anonymous",
                "--holder",
                holder,
                "--egress",
            ],
        )
    };
    let (code, first) = ask("w1");
    assert_eq!(code, 0, "{first}");
    let (code, second) = ask("w2");
    assert_eq!(code, 0, "{second}");
    assert_ne!(
        first["egress"]["ip"], second["egress"]["ip"],
        "{first}\n{second}"
    );
    assert_eq!(second["egress"]["shared"], false, "{second}");
    // The one exit left free leaves from an address already held.
    let (code, third) = ask("w3");
    assert_eq!(code, 3, "{third}");
    let metrics = Command::new("curl")
        .args(["-sf", "-H", &format!("Authorization: Bearer {TOKEN}")])
        .arg(format!("{}/metrics", broker.url))
        .output()
        .unwrap();
    let metrics = String::from_utf8_lossy(&metrics.stdout);
    assert!(
        !metrics.contains("exitvoice_broker_egress_shared_total 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("exitvoice_broker_egress_shared_total"),
        "{metrics}"
    );
}

/// A lease that asks for `max_gap_ms` gets only an exit whose label measured a round-trip gap
/// (`latency.round_trip.gap_min_us`) within it: never one measured over it, nor one never
/// measured; when none is free it is refused as a country nobody serves is. A bad limit is a
/// `400` that leases nothing.
#[test]
fn a_lease_that_asks_for_a_gap_limit_gets_an_exit_measured_within_it_or_none() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let echo = EchoServer::start();
    let tiny = Proxy::tinyproxy();
    let target = Arc::new(AtomicU16::new(tiny.port));
    let work = tempfile::tempdir().unwrap();
    let names = ["near", "far", "unmeasured"];
    let exits: Vec<(&str, String)> = names
        .iter()
        .map(|name| {
            let port = forwarder(&runtime, target.clone());
            (*name, format!("http://127.0.0.1:{port}"))
        })
        .collect();
    let exits = exits_file(work.path(), &echo, &exits);
    let database = work.path().join("audit.db").to_string_lossy().into_owned();
    audit(&exits, &database);
    set_gaps(
        &database,
        &[
            ("near", Some(5_000)),
            ("far", Some(30_000)),
            ("unmeasured", None),
        ],
    );
    let broker = Broker::start(&exits, &database, TOKEN, &[]);
    let ask = |holder: &str, limit: Option<&str>| {
        let mut args = vec!["acquire", "--class", "anonymous", "--holder", holder];
        if let Some(limit) = limit {
            args.extend(["--max-gap-ms", limit]);
        }
        lease(&broker.url, &args)
    };

    let (code, near) = ask("w1", Some("10"));
    assert_eq!(
        (code, &near["exit"]),
        (0, &serde_json::json!("near")),
        "{near}"
    );
    // The only exit within 10 ms is held: neither the one over it nor the unmeasured one
    // stands in.
    let (code, none) = ask("w2", Some("10"));
    assert_eq!(
        (code, &none["error"]),
        (
            3,
            &serde_json::json!("no exit of class anonymous within a 10 ms gap is free")
        ),
        "{none}"
    );
    let (code, far) = ask("w3", Some("30"));
    assert_eq!(
        (code, &far["exit"]),
        (0, &serde_json::json!("far")),
        "{far}"
    );
    // Without a limit any free exit serves, the unmeasured one included.
    let (code, any) = ask("w4", None);
    assert_eq!(
        (code, &any["exit"]),
        (0, &serde_json::json!("unmeasured")),
        "{any}"
    );

    // Bad limits, as a client may send them: each a 400 that says what is wrong.
    for body in [
        r#""max_gap_ms": -1"#,
        r#""max_gap_ms": "10""#,
        r#""max_gap_ms": 1.5"#,
        r#""max_gap_ms": 60001"#,
        r#""max_gap_ms": 18446744073709551616"#,
        r#""max_gap_ms": 1e30"#,
    ] {
        let out = Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}", "-X", "POST"])
            .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
            .args(["-H", "Content-Type: application/json"])
            .args([
                "-d",
                &format!(r#"{{"class": "stateless", "holder": "w5", {body}}}"#),
            ])
            .arg(format!("{}/v1/leases", broker.url))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let (answer, status) = text.rsplit_once('\n').unwrap();
        assert_eq!(status, "400", "{body}: {answer}");
        assert!(answer.contains("max_gap_ms"), "{body}: {answer}");
    }
    let (code, _) = ask("w6", Some("10"));
    assert_eq!(code, 3, "nothing was leased by the bad requests");
}
