//! `exitvoice broker --store rediss://…` on a real Redis over TLS (Debian's redis-server, a CA
//! of the test's own): leases live there. A CA that did not sign the server's certificate stops
//! the broker at start, and the error names the store without its password.

mod support;

use std::process::Command;

use support::broker::{audit, lease, Broker};
use support::{exits_file, EchoServer, Proxy};

const TOKEN: &str = "redis-test-token-0123456789";
const PASSWORD: &str = "s3cret-redis-pw";

#[test]
fn the_broker_keeps_its_leases_in_redis_over_tls() {
    let echo = EchoServer::start();
    let tiny = Proxy::tinyproxy();
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[("a", format!("http://127.0.0.1:{}", tiny.port))],
    );
    let database = work.path().join("audit.db").to_string_lossy().into_owned();
    audit(&exits, &database);

    let redis = exitvoice_redistest::tls_server();
    let ca = redis.ca_pem().unwrap().to_string_lossy().into_owned();
    let pool = exitvoice_redistest::fresh_prefix("broker_redis");
    let store = [
        "--store",
        &redis.url(),
        "--redis-ca",
        &ca,
        "--redis-pool",
        &pool,
    ];
    let broker = Broker::start(&exits, &database, TOKEN, &store);
    let ask = ["acquire", "--class", "anonymous", "--holder", "w1"];
    let (code, held) = lease(&broker.url, TOKEN, &ask);
    assert_eq!(code, 0, "{held}");
    assert_eq!(held["exit"], "a");
    let listed = Command::new("redis-cli")
        .args(["--tls", "--cacert", &ca, "-p", &redis.port().to_string()])
        .args(["--scan", "--pattern"])
        .arg(format!("exitvoice:{{{pool}}}:lease:*"))
        .output()
        .expect("run redis-cli");
    let keys = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(keys.lines().count(), 1, "the lease is Redis's: {keys}");
    let id = held["lease_id"].as_str().unwrap();
    let fence = held["fence"].to_string();
    let release = ["release", id, "--fence", &fence, "--outcome", "ok"];
    assert_eq!(lease(&broker.url, TOKEN, &release).0, 0);

    // Trusting another CA (the echo server's own certificate), with a password in the URL.
    let url = redis
        .url()
        .replace("rediss://", &format!("rediss://broker:{PASSWORD}@"));
    let wrong_ca = echo.dir.path().join("echo.db.cert.pem");
    let output = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .args(["broker", "--listen", "127.0.0.1:0", "--store", &url])
        .arg("--redis-ca")
        .arg(&wrong_ca)
        .arg("--exits")
        .arg(&exits)
        .env("EXITVOICE_DATABASE_URL", &database)
        .env("EXITVOICE_BROKER_TOKEN", TOKEN)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("connecting to rediss://broker:***@127.0.0.1:"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(PASSWORD) && !String::from_utf8_lossy(&output.stdout).contains(PASSWORD)
    );
}

/// At start the broker reads the store's persistence and replication, as the server reports
/// them, and says what a crash or a failover of it would lose.
#[test]
fn the_broker_says_what_a_crash_of_its_redis_would_lose() {
    let echo = EchoServer::start();
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[("a", "http://127.0.0.1:9".to_owned())],
    );
    let redis = exitvoice_redistest::private_server_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
    ]);
    let database = work.path().join("broker.db").to_string_lossy().into_owned();
    let mut broker = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .args(["broker", "--listen", "127.0.0.1:0", "--store", &redis.url()])
        .arg("--exits")
        .arg(&exits)
        .env("EXITVOICE_DATABASE_URL", &database)
        .env("EXITVOICE_BROKER_TOKEN", TOKEN)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(broker.stderr.take().unwrap());
    let line = std::io::BufRead::lines(stderr)
        .map_while(Result::ok)
        .find(|line| line.contains("crash_loses"))
        .unwrap_or_default();
    let _ = broker.kill();
    let _ = broker.wait();
    let said: serde_json::Value = serde_json::from_str(&line).expect("a JSON log line");
    let fields = &said["fields"];
    assert_eq!(
        fields["crash_loses"], "up to about a second of writes (appendfsync everysec)",
        "{line}"
    );
    assert!(
        fields["failover_loses"]
            .as_str()
            .is_some_and(|text| text.starts_with("no replica")),
        "{line}"
    );
    assert!(
        fields["settings"]
            .as_str()
            .unwrap()
            .contains("appendonly=\"yes\""),
        "{line}"
    );
}
