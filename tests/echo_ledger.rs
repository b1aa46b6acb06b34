//! The h3 downgrade ledger (`/api/ledger?token=`) against real clients on loopback: curl, which
//! never speaks HTTP/3, becomes `never_tries_h3` after three TCP returns; aioquic, which comes
//! back over HTTP/3 with the token, is `h3_ok`; headless Chromium that sees `alt-svc` directly
//! tries QUIC on a later visit, and the same Chromium through squid (HTTP CONNECT only) never
//! does. Needs curl, chromium, squid, certutil and `.tools/venv` with aioquic
//! (scripts/install-test-deps.sh).
//!
//! Every client here comes from 127.0.0.1, and a QUIC attempt carries no token, so attempts
//! are matched by IP: each case that counts attempts runs on a server of its own.

mod echo_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use echo_support::{curl, EchoServer};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The ledger's identities for `token`, from 127.0.2.1 (an address no client here uses).
fn ledger(server: &EchoServer, token: &str) -> Vec<Value> {
    let out = curl(&[
        "-sk",
        "--http1.1",
        "--interface",
        "127.0.2.1",
        &server.url(&format!("/api/ledger?token={token}")),
    ]);
    let answer: Value = serde_json::from_slice(&out.stdout).expect("ledger JSON");
    answer["identities"].as_array().expect("identities").clone()
}

/// Rows of the stored ledger.
fn stored_identities(server: &EchoServer) -> u64 {
    stored_count(server, "SELECT count(*) FROM ledger_identities")
}

/// The count `sql` reads from the server's database, by the sqlite3 shell.
fn stored_count(server: &EchoServer, sql: &str) -> u64 {
    let out = Command::new("sqlite3")
        .arg(server.db())
        .arg(sql)
        .output()
        .expect("run sqlite3");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a count")
}

/// `curl` GETs `/probe/<token>` on a connection of its own.
fn curl_probe(server: &EchoServer, token: &str) {
    let out = curl(&[
        "-sk",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &server.url(&format!("/probe/{token}")),
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
}

/// The spec's rule (3 returns 2 s apart over 60 s) scaled down, so a test takes seconds.
const QUICK_RULE: [&str; 4] = ["--ledger-spacing", "300ms", "--ledger-span", "1s"];

#[test]
fn a_changed_identity_is_stored_within_seconds_and_survives_kill_9() {
    let mut server = EchoServer::start(&QUICK_RULE);
    curl_probe(&server, "ledger-kill-0001");
    // Stored while the server runs, not only when it stops: curl's identity (127.0.0.1; the
    // ledger's own reader comes from 127.0.2.1) gets its row within a few seconds.
    let curls = "SELECT count(*) FROM ledger_identities WHERE client_ip = '127.0.0.1'";
    let deadline = Instant::now() + Duration::from_secs(5);
    while stored_count(&server, curls) == 0 {
        assert!(
            Instant::now() < deadline,
            "curl's identity not stored within 5 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Two of the writer's seconds more, so a change that came after the row was written is in
    // too; then a crash, with no shutdown to write anything.
    std::thread::sleep(Duration::from_millis(2500));
    let seen = ledger(&server, "ledger-kill-0001");
    assert_eq!(seen.len(), 1, "{seen:?}");
    server.kill9();
    server.restart();
    assert_eq!(ledger(&server, "ledger-kill-0001"), seen);
}

#[test]
fn curl_never_tries_h3_and_aioquic_comes_back_over_h3() {
    let mut server = EchoServer::start(&QUICK_RULE);
    curl_probe(&server, "ledger-curl-0001");
    let first = ledger(&server, "ledger-curl-0001");
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["verdict"], "pending", "{first:?}");
    // Three quick returns are not three chances to try QUIC.
    for _ in 0..3 {
        curl_probe(&server, "ledger-curl-0001");
    }
    let quick = ledger(&server, "ledger-curl-0001");
    assert_eq!(quick[0]["verdict"], "pending", "{quick:?}");
    assert_eq!(quick[0]["tcp_connections_after_alt_svc"], 3);
    assert!(quick[0]["spaced_returns"].as_u64() < Some(3), "{quick:?}");
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(400));
        curl_probe(&server, "ledger-curl-0001");
    }
    let after = ledger(&server, "ledger-curl-0001");
    assert_eq!(after[0]["verdict"], "never_tries_h3", "{after:?}");
    assert_eq!(after[0]["tcp_connections"], 7);
    assert_eq!(after[0]["tcp_connections_after_alt_svc"], 6);
    assert!(after[0]["alt_svc_first_ms"].is_i64());

    // The ledger is stored (`--store-peer-ip full`, the default): after a restart (SIGTERM
    // drains the writer) the identity and its verdict are back, and it keeps counting.
    assert!(server.sigterm().success());
    server.restart();
    assert_eq!(ledger(&server, "ledger-curl-0001"), after);
    curl_probe(&server, "ledger-curl-0001");
    let later = ledger(&server, "ledger-curl-0001");
    assert_eq!(later[0]["tcp_connections"], 8, "{later:?}");

    // An identity is an address: with `--store-peer-ip prefix` the ledger stays in memory.
    let mut prefix = EchoServer::start(&["--store-peer-ip", "prefix"]);
    curl_probe(&prefix, "ledger-prefix-01");
    assert_eq!(ledger(&prefix, "ledger-prefix-01").len(), 1);
    assert!(prefix.sigterm().success());
    assert_eq!(stored_identities(&prefix), 0);
    assert!(stored_identities(&server) >= 1);

    // aioquic: one TCP visit (alt-svc), then HTTP/3 with the same token.
    let server = EchoServer::start(&[]);
    curl_probe(&server, "ledger-aioquic-01");
    let output = Command::new(root().join(".tools/venv/bin/python"))
        .arg(root().join("tests/clients/py_aioquic.py"))
        .args(["127.0.0.1", &server.port.to_string(), "localhost"])
        .arg(server.cert_pem())
        .arg("/probe/ledger-aioquic-01")
        .output()
        .expect("run py_aioquic.py (scripts/install-test-deps.sh)");
    assert!(output.status.success(), "aioquic failed");
    let identities = ledger(&server, "ledger-aioquic-01");
    assert_eq!(identities.len(), 1, "{identities:?}");
    let entry = &identities[0];
    assert_eq!(entry["verdict"], "h3_ok", "{entry}");
    assert_eq!(entry["h3_requests"], 1);
    assert_eq!(entry["quic_src_ip"], "127.0.0.1");
    assert!(entry["quic_voice_id"]
        .as_str()
        .is_some_and(|v| v.starts_with("quicv2_")));

    // Without QUIC no alt-svc is sent, so no verdict can be reached.
    let off = EchoServer::start(&["--no-quic"]);
    for _ in 0..4 {
        curl_probe(&off, "ledger-noquic-01");
    }
    let entry = &ledger(&off, "ledger-noquic-01")[0];
    assert_eq!(entry["verdict"], "expired", "{entry}");
    assert!(entry["alt_svc_first_ms"].is_null());
}

/// A profile home whose NSS database trusts the test CA (as a browser that trusts a private
/// CA): Chromium's QUIC verifies the certificate of an `alt-svc` alternative and ignores
/// `--ignore-certificate-errors`.
fn home_trusting_test_ca(dir: &Path) -> PathBuf {
    let home = dir.join("home");
    let db = home.join(".pki/nssdb");
    std::fs::create_dir_all(&db).expect("nssdb dir");
    let db_arg = format!("sql:{}", db.display());
    let ok = |args: &[&str]| {
        let status = Command::new("certutil")
            .args(args)
            .status()
            .expect("certutil (libnss3-tools)");
        assert!(status.success(), "certutil {args:?}");
    };
    ok(&["-d", &db_arg, "-N", "--empty-password"]);
    let ca = root().join(".tools/certs/ca.pem");
    ok(&[
        "-d",
        &db_arg,
        "-A",
        "-t",
        "C,,",
        "-n",
        "exitvoice-test-ca",
        "-i",
        ca.to_str().expect("utf-8"),
    ]);
    home
}

/// An echo server with the test CA's leaf for echo.exitvoice.test (in /etc/hosts).
fn server_with_test_leaf(extra: &[&str]) -> EchoServer {
    let certs = root().join(".tools/certs");
    let (chain, key) = (certs.join("leaf-chain.pem"), certs.join("leaf.key"));
    let mut args = vec![
        "--cert",
        chain.to_str().expect("utf-8"),
        "--key",
        key.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    EchoServer::start(&args)
}

/// Loads `url` in headless Chromium with the auditor's flags (QUIC allowed), in `profile`,
/// through `proxy` if given.
fn chromium(home: &Path, profile: &Path, url: &str, proxy: Option<u16>) {
    let mut command = Command::new("chromium");
    command
        .env("HOME", home)
        .args(exitvoice_auditor::probe::chromium::HEADLESS_FLAGS)
        .arg("--enable-quic")
        .arg(format!("--user-data-dir={}", profile.display()));
    if let Some(port) = proxy {
        command.arg(format!("--proxy-server=http://127.0.0.1:{port}"));
    }
    let output = command
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(output.status.success(), "chromium {url}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("spoken"),
        "an echo for {url}"
    );
}

/// squid as an open HTTP CONNECT proxy on loopback; stopped (by its PID) on drop.
struct Squid {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Squid {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let d = dir.path().display();
        let conf = format!(
            "http_port 127.0.0.1:{port}\nhttp_access allow all\npid_filename {d}/squid.pid\n\
             cache_log {d}/cache.log\naccess_log {d}/access.log\ncache deny all\n\
             cache_mem 8 MB\ncoredump_dir {d}\nshutdown_lifetime 0 seconds\n"
        );
        std::fs::write(dir.path().join("squid.conf"), conf).expect("squid.conf");
        // squid drops root for its own user, which must be able to write the logs.
        let _ = Command::new("chmod").arg("777").arg(dir.path()).status();
        let child = Command::new("squid")
            .args(["-N", "-f"])
            .arg(dir.path().join("squid.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run squid");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "squid did not listen");
            std::thread::sleep(Duration::from_millis(100));
        }
        Self { child, port, dir }
    }

    fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default()
    }
}

impl Drop for Squid {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

#[test]
fn chromium_direct_tries_h3_and_through_squid_never_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = home_trusting_test_ca(dir.path());

    // Direct: the first visit sees alt-svc; Chromium races QUIC on the next.
    let direct = server_with_test_leaf(&[]);
    let url = format!(
        "https://echo.exitvoice.test:{}/probe/ledger-chromium-direct",
        direct.port
    );
    let profile = dir.path().join("direct");
    for _ in 0..2 {
        chromium(&home, &profile, &url, None);
    }
    let entry = &ledger(&direct, "ledger-chromium-direct")[0];
    let verdict = entry["verdict"].as_str().expect("verdict");
    assert!(
        verdict == "attempted_h3" || verdict == "h3_ok",
        "Chromium direct: {entry}"
    );

    // Through squid: CONNECT carries TCP only, and Chromium with a proxy never tries QUIC.
    let squid = Squid::start();
    // The rule scaled down; the visits are spaced by sleeps, not by how long Chromium takes.
    let proxied = server_with_test_leaf(&QUICK_RULE);
    let url = format!(
        "https://echo.exitvoice.test:{}/probe/ledger-chromium-squid",
        proxied.port
    );
    let profile = dir.path().join("squid");
    for visit in 0..4 {
        if visit > 0 {
            std::thread::sleep(Duration::from_millis(400));
        }
        chromium(&home, &profile, &url, Some(squid.port));
    }
    assert!(
        squid
            .access_log()
            .contains(&format!("CONNECT echo.exitvoice.test:{}", proxied.port)),
        "the visits went through squid"
    );
    let entry = &ledger(&proxied, "ledger-chromium-squid")[0];
    assert_eq!(
        entry["verdict"], "never_tries_h3",
        "Chromium through squid: {entry}"
    );
    assert_eq!(entry["quic_attempts"], 0);
}
