//! `exitvoice serve` against real clients: each client, run by `tests/clients/run-client.sh`
//! against `https://echo.exitvoice.test:PORT/probe/<token>` on an ephemeral loopback port, gets
//! an echo equal to what a recording of the same client says about it, and the same observation
//! is stored in SQLite and served back by `/api/observations`.
//!
//! Which recording: `captures/<client>/` when the installed client reports the version that
//! recording was made with. Otherwise (Debian updates chromium, firefox-esr, openssl, openjdk and
//! nodejs every few weeks) the test records the installed client now, with the same independent
//! recorder and tools that made captures/ (`tests/tools/record-client.sh`: `record.py`, tshark on
//! lo, `expect.py` with tshark, ja4plus and hyperframe/hpack), into a temporary directory in the
//! captures/ format, prints both versions and that it derived the values live, and compares with
//! that. A client is recorded once per run of this binary, whichever tests need it.
//! `EXITVOICE_LIVE_EXPECT=all` (or a comma-separated list of clients) records live even when the
//! versions agree, to check the live path itself.
//!
//! Where each expected value comes from:
//! - JA4, JA4_r, the Akamai string and hash, the pseudo-header and header order, the first
//!   stream id and the HTTP/1 request line and header order: `capture.json`, computed by
//!   independent tools (ja4plus, tshark, hyperframe/hpack; see captures/README.md). JA3 and
//!   JA4_o/JA4_ro too, for the clients whose two recorded connections agree on them (Chromium
//!   permutes its extensions, so its JA3 and JA4_o differ per connection by design).
//! - ALPN offered / negotiated / spoken and SNI: the recorder's notes (`conn1.json`, Python ssl).
//! - TLS voice and HTTP/2 or HTTP/1 voice: a relation, not a constant — the live connection must
//!   carry the voice our parser gives each recorded connection (`conn1` and `conn2`) of the same
//!   client (same client, same voice; that is what users rely on). Comparing with both makes a
//!   voice that wrongly depends on a per-connection draw fail whenever the two draws differ:
//!   Firefox's two stored recordings drew different GREASE ECH AEAD ids. Likewise the browser
//!   profile matched. And no two clients' recordings share both voices.
//! - Bucket: what the client is (A for the browsers, B for the HTTP/2 libraries, none for the
//!   HTTP/1-only clients, which offer no h2).
//!
//! Two more relations on real clients: a connection resuming its TLS session (curl, and
//! `openssl s_client -sess_out/-sess_in`, which also sends session_ticket) keeps the voice of
//! the recorded connection.
//!
//! Each client run and each live recording has a time limit (`CLIENT_TIMEOUT` for run-client.sh,
//! plus a watchdog here); whatever the run started (found by a marker in its environment) is
//! killed by PID afterwards, so a hung browser fails its test instead of hanging the suite.
//!
//! Run with `cargo test --test echo_clients`; needs every client of tests/clients, the test CA,
//! the `echo.exitvoice.test` hosts entry (scripts/install-test-deps.sh), and root for tshark
//! when it records live.

mod echo_support;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use echo_support::{as_stored, curl, json_stream, EchoServer, Row};
use exitvoice_protocol::classify::browser_profile;
use exitvoice_protocol::h1::parse_head;
use exitvoice_protocol::h2::parse_prefix;
use exitvoice_protocol::tls::parse_client_hello;
use serde_json::{json, Value};

/// Seconds run-client.sh gives one client run (normal runs take 0.1 s to about 6 s, Firefox
/// being the slowest).
const CLIENT_TIMEOUT_SECS: u64 = 45;

/// How long past `CLIENT_TIMEOUT_SECS` the watchdog here waits before killing the run itself.
const WATCHDOG_GRACE: Duration = Duration::from_secs(15);

/// The watchdog of one live recording: tests/tools/record-client.sh runs the client up to five
/// times (each bounded by `CLIENT_TIMEOUT_SECS`, plus 1.5 s), around tshark and expect.py (a few
/// seconds). A normal recording takes 10 to 30 s.
const RECORD_TIMEOUT: Duration = Duration::from_secs(5 * (CLIENT_TIMEOUT_SECS + 7) + 60);

/// What a client is, which fixes its bucket.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// Chromium, Firefox: bucket A, a browser profile matches.
    Browser,
    /// An HTTP/2 library: bucket B, no browser profile.
    H2Library,
    /// Offers no h2 at all: no bucket.
    Http1Only,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One client's recording: `captures/<client>/`, or a live one in the same format.
struct Recording {
    /// Where it came from, for messages: `captures/<client>` or `a live recording of <client>`.
    label: String,
    doc: Value,
    /// The recorder's notes on conn1.
    meta: Value,
    /// The raw ClientHello records of conn1 and conn2.
    hellos: Vec<Vec<u8>>,
    /// The decrypted client prefixes of conn1 and conn2.
    prefixes: Vec<Vec<u8>>,
}

impl Recording {
    /// Reads a recording directory (captures/README.md describes the format).
    fn load(dir: &Path, label: String) -> Self {
        let doc: Value = serde_json::from_slice(&read(&dir.join("capture.json")))
            .unwrap_or_else(|e| panic!("{label}/capture.json: {e}"));
        let file =
            |i: usize, key: &str| dir.join(doc["connections"][i][key].as_str().unwrap_or_default());
        let meta = serde_json::from_slice(&read(&file(0, "recorder_meta")))
            .unwrap_or_else(|e| panic!("{label}: recorder notes: {e}"));
        let hellos = (0..2).map(|i| read(&file(i, "hello"))).collect();
        let prefixes = (0..2).map(|i| read(&file(i, "prefix"))).collect();
        Self {
            label,
            meta,
            hellos,
            prefixes,
            doc,
        }
    }

    /// Records the installed `client` now, with tests/tools/record-client.sh (the recorder and
    /// the independent tools of captures/), and reads the result.
    fn record_live(client: &'static str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(&format!("exitvoice-live-{client}-"))
            .tempdir()
            .expect("tempdir");
        let dest = dir.path().join(client);
        let run = run_marked(
            client,
            Command::new(root().join("tests/tools/record-client.sh"))
                .arg(client)
                .arg(&dest)
                // Its work files too go where a killed run's leftovers are removed.
                .env("TMPDIR", dir.path()),
            dir.path(),
            RECORD_TIMEOUT,
        );
        if let Err(why) = run {
            panic!("{client}: recording it live failed: {why}");
        }
        Self::load(&dest, format!("a live recording of {client}"))
    }

    /// The expected `field` of connection `i`.
    fn expected(&self, i: usize, field: &str) -> Option<&Value> {
        self.doc["connections"][i]["expected"]
            .get(field)
            .and_then(|v| v.get("value"))
    }

    /// conn1's expected `field`; panics when capture.json lacks it.
    fn want(&self, field: &str) -> &Value {
        self.expected(0, field)
            .unwrap_or_else(|| panic!("{}/capture.json: no expected {field}", self.label))
    }

    /// conn1's expected `field` when both recorded connections agree on it.
    fn stable(&self, field: &str) -> Option<&Value> {
        let first = self.expected(0, field)?;
        (self.expected(1, field) == Some(first)).then_some(first)
    }

    /// Whether the recorded connection spoke HTTP/2 (capture.json then has an Akamai string).
    fn is_h2(&self) -> bool {
        self.expected(0, "akamai").is_some()
    }

    /// The TLS voice our parser gives the recorded hello of connection `i` (0: conn1).
    fn tls_voice(&self, i: usize) -> String {
        match parse_client_hello(&self.hellos[i]) {
            Ok(hello) => hello.fingerprints().voice_id().to_owned(),
            Err(e) => panic!("{}/conn{}.hello.bin does not parse: {e}", self.label, i + 1),
        }
    }

    /// The HTTP/2 or HTTP/1 voice our parser gives the recorded prefix of connection `i`.
    fn app_voice(&self, i: usize) -> String {
        let prefix = &self.prefixes[i];
        if self.is_h2() {
            match parse_prefix(prefix) {
                Ok(p) => exitvoice_protocol::h2::voice_id(&p).to_string(),
                Err(e) => panic!(
                    "{}/conn{}.prefix.bin does not parse: {e}",
                    self.label,
                    i + 1
                ),
            }
        } else {
            match parse_head(prefix) {
                Ok(head) => exitvoice_protocol::h1::voice_id(&head).to_string(),
                Err(e) => panic!(
                    "{}/conn{}.prefix.bin does not parse: {e}",
                    self.label,
                    i + 1
                ),
            }
        }
    }

    /// Compares a live voice with the voice of both recorded connections (`layer`: "tls",
    /// "http2" or "http1"). Firefox draws some hello fields per connection, and its two
    /// recordings drew differently, so a voice that wrongly depends on them cannot equal both.
    fn check_voice(&self, errors: &mut Vec<String>, layer: &str, got: &Value) {
        for i in 0..2 {
            let want = if layer == "tls" {
                self.tls_voice(i)
            } else {
                self.app_voice(i)
            };
            expect(
                errors,
                &format!("{layer}.voice_id"),
                &format!(
                    "our parser over {}/conn{} (same client, same voice)",
                    self.label,
                    i + 1
                ),
                &json!(want),
                got,
            );
        }
    }

    /// The browser profile our table gives the recorded HTTP/2 prefix (`null` when none).
    fn profile(&self) -> Value {
        if !self.is_h2() {
            return Value::Null;
        }
        match parse_prefix(&self.prefixes[0]) {
            Ok(p) => browser_profile(&p).map_or(Value::Null, |profile| json!(profile.name)),
            Err(e) => panic!("{}/conn1.prefix.bin does not parse: {e}", self.label),
        }
    }
}

/// Fails unless `echo.exitvoice.test` resolves to loopback only (tests never leave loopback).
fn assert_test_name_is_loopback() {
    use std::net::ToSocketAddrs as _;
    let addrs: Vec<std::net::SocketAddr> = ("echo.exitvoice.test", 443)
        .to_socket_addrs()
        .map(Iterator::collect)
        .unwrap_or_default();
    assert!(
        !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()),
        "echo.exitvoice.test must resolve to loopback only (got {addrs:?}): run \
         scripts/install-test-deps.sh, which adds `127.0.0.1 echo.exitvoice.test` to /etc/hosts"
    );
}

/// The installed client's version, as run-client.sh reports it.
fn installed_version(client: &str) -> String {
    let out = Command::new(root().join("tests/clients/run-client.sh"))
        .args(["--version", client])
        .output()
        .expect("run tests/clients/run-client.sh");
    assert!(out.status.success(), "{client} --version: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The recording `client`'s live echo is compared with: `captures/<client>/` when the installed
/// client reports the version it was recorded with (and `EXITVOICE_LIVE_EXPECT` does not name the
/// client), else a live recording of the installed client. Made once per client per run of this
/// binary and shared by the tests that need it.
fn recording(client: &'static str) -> &'static Recording {
    static MADE: Mutex<BTreeMap<&str, &'static OnceLock<Recording>>> = Mutex::new(BTreeMap::new());
    let cell: &'static OnceLock<Recording> = MADE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(client)
        .or_insert_with(|| Box::leak(Box::default()));
    // Another test asking for the same client meanwhile waits for this one recording.
    cell.get_or_init(|| {
        let stored = Recording::load(
            &root().join("captures").join(client),
            format!("captures/{client}"),
        );
        let recorded = stored.doc["version"].as_str().unwrap_or_default();
        let installed = installed_version(client);
        let why = if installed != recorded {
            format!("installed {installed:?}, captures/{client} recorded with {recorded:?}")
        } else if live_expect_asked(client) {
            "EXITVOICE_LIVE_EXPECT asks for a live recording".to_owned()
        } else {
            return stored;
        };
        note(&format!(
            "{client}: {why}: deriving the expected values live \
             (tests/tools/record-client.sh: record.py, tshark, ja4plus, hyperframe/hpack)"
        ));
        let started = Instant::now();
        let live = Recording::record_live(client);
        note(&format!(
            "{client}: recorded live in {:.1} s (version {})",
            started.elapsed().as_secs_f64(),
            live.doc["version"]
        ));
        live
    })
}

/// Whether `EXITVOICE_LIVE_EXPECT` (`all`, or client names separated by commas) names `client`.
fn live_expect_asked(client: &str) -> bool {
    std::env::var("EXITVOICE_LIVE_EXPECT").is_ok_and(|v| {
        v.split(',')
            .any(|name| name.trim() == client || name.trim() == "all")
    })
}

/// Writes a line to stderr directly, past the test harness's capture, so it shows in the log of
/// a passing run too.
fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "echo_clients: {line}");
}

/// One finished client run.
struct ClientRun {
    stdout: Vec<u8>,
    stderr: String,
    secs: f64,
}

/// Runs `run-client.sh CLIENT URL` with a time limit; kills whatever the run left behind.
fn run_client(client: &str, url: &str, dir: &Path) -> ClientRun {
    let run = run_marked(
        client,
        Command::new(root().join("tests/clients/run-client.sh")).args([client, url]),
        dir,
        Duration::from_secs(CLIENT_TIMEOUT_SECS) + WATCHDOG_GRACE,
    );
    run.unwrap_or_else(|why| panic!("{client} {why}"))
}

/// Runs `command` with stdin closed, stdout and stderr into files in `dir`, `CLIENT_TIMEOUT` for
/// run-client.sh, browser profiles under `dir` (removed with it even when the run had to be
/// killed before run-client.sh could clean up) and this run's marker in the environment, killed
/// when it is still running after `limit`. Afterwards kills whatever the run left behind. Says
/// why when the command did not finish or failed.
fn run_marked(
    what: &str,
    command: &mut Command,
    dir: &Path,
    limit: Duration,
) -> Result<ClientRun, String> {
    let marker = format!(
        "{what}-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let stdout_path = dir.join(format!("{what}.stdout"));
    let stderr_path = dir.join(format!("{what}.stderr"));
    let started = Instant::now();
    let mut child = command
        .env("CLIENT_TIMEOUT", CLIENT_TIMEOUT_SECS.to_string())
        .env(MARKER_VAR, &marker)
        .env("PROFILE_ROOT", dir)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
    let deadline = started + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    let leftovers = kill_marked(&marker);
    let secs = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&read(&stderr_path)).into_owned();
    match status {
        None => Err(format!(
            "did not finish within {secs:.0} s (killed; leftover PIDs {leftovers:?}); \
             stderr:\n{stderr}"
        )),
        Some(status) if !status.success() => Err(format!(
            "failed ({status}, {secs:.1} s; leftover PIDs killed: {leftovers:?}); \
             stderr:\n{stderr}"
        )),
        Some(_) => Ok(ClientRun {
            stdout: read(&stdout_path),
            stderr,
            secs,
        }),
    }
}

/// The environment variable that marks every process of one client run.
const MARKER_VAR: &str = "EXITVOICE_ECHO_CLIENTS_RUN";

/// Kills (SIGKILL, by PID) every process whose environment carries this run's marker: the
/// processes this test started, including any the client detached. Returns their PIDs.
fn kill_marked(marker: &str) -> Vec<u32> {
    let needle = format!("{MARKER_VAR}={marker}");
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let pids: Vec<u32> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|var| var == needle.as_bytes()))
        })
        .collect();
    for pid in &pids {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }
    pids
}

/// Undoes the HTML escaping Chromium's `--dump-dom` applies to the text of the `<pre>`.
fn html_text(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// The echo a client printed, when it prints one (Firefox's `--screenshot` prints nothing).
fn printed_echo(client: &str, run: &ClientRun) -> Option<Value> {
    let text = String::from_utf8_lossy(&run.stdout);
    let body = match client {
        "firefox-esr" => return None,
        // The DOM of the page: the JSON body is the text of its <pre>.
        "chromium" => {
            let start = text.find("<pre>").map(|i| i + "<pre>".len());
            let end = text.rfind("</pre>");
            match (start, end) {
                (Some(start), Some(end)) if start <= end => html_text(&text[start..end]),
                _ => panic!("chromium: no <pre> in the dumped DOM:\n{text}"),
            }
        }
        // The raw HTTP/1.1 response.
        "openssl-s_client" => match text.split_once("\r\n\r\n") {
            Some((_, body)) => body.to_owned(),
            None => panic!("openssl s_client: no response head:\n{text}"),
        },
        // The body, after a one-line prefix (version, protocol, status) for the small programs.
        _ => match text.find('{') {
            Some(i) => text[i..].to_owned(),
            None => panic!(
                "{client}: no JSON in its output:\n{text}\nstderr:\n{}",
                run.stderr
            ),
        },
    };
    match serde_json::from_str(body.trim()) {
        Ok(echo) => Some(echo),
        Err(e) => panic!("{client}: echo is not JSON ({e}):\n{body}"),
    }
}

/// Records a mismatch between `want` and `got`, saying where `want` came from.
fn expect(errors: &mut Vec<String>, what: &str, source: &str, want: &Value, got: &Value) {
    if want != got {
        errors.push(format!("{what}: expected {want} ({source}), got {got}"));
    }
}

/// Runs `client` once against a fresh server and checks its echo and stored observation.
async fn check_client(client: &'static str, kind: Kind) {
    assert_test_name_is_loopback();
    let rec = recording(client);
    assert_eq!(
        rec.is_h2(),
        kind != Kind::Http1Only,
        "{client}: the recording's protocol does not fit the client's kind"
    );

    let certs = root().join(".tools/certs");
    let cert = certs.join("leaf-chain.pem");
    let key = certs.join("leaf.key");
    assert!(
        cert.is_file() && key.is_file(),
        "no test certificate in {}: run scripts/install-test-deps.sh",
        certs.display()
    );
    let server = EchoServer::start(&[
        "--cert",
        cert.to_str().expect("UTF-8 path"),
        "--key",
        key.to_str().expect("UTF-8 path"),
    ]);
    let token = format!(
        "{client}-{}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros())
    );
    let path = format!("/probe/{token}");
    let url = format!("https://echo.exitvoice.test:{}{path}", server.port);
    let run = run_client(client, &url, server.dir.path());
    let printed = printed_echo(client, &run);

    // The stored observation: straight from SQLite, and through the API.
    let rows = server
        .rows_until(|rows| rows.iter().any(|r| r.token.as_deref() == Some(&token)))
        .await;
    let mine: Vec<&Row> = rows
        .iter()
        .filter(|r| r.token.as_deref() == Some(&token))
        .collect();
    assert_eq!(
        mine.len(),
        1,
        "{client}: one stored observation with token {token}; rows: {:?}\nserver stderr:\n{}",
        rows.iter()
            .map(|r| (&r.conn_id, r.request_index, &r.token, &r.failure))
            .collect::<Vec<_>>(),
        server.stderr()
    );
    let row = mine[0];
    let api = curl(&[
        "-sS",
        "--cacert",
        certs.join("ca.pem").to_str().expect("UTF-8 path"),
        &format!(
            "https://echo.exitvoice.test:{}/api/observations?token={token}",
            server.port
        ),
    ]);
    assert!(api.status.success(), "/api/observations: {api:?}");
    let listed = &json_stream(&api.stdout)[0]["observations"];
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(1),
        "{client}: /api/observations?token={token}: {listed}"
    );
    assert_eq!(
        listed[0]["summary"], row.summary,
        "{client}: /api/observations serves the row stored in SQLite"
    );
    assert_eq!(listed[0]["conn_id"], row.conn_id.as_str());
    let echo = match printed {
        Some(echo) => {
            assert_eq!(
                as_stored(&echo),
                row.summary,
                "{client}: the stored summary is the echo the client received"
            );
            echo
        }
        None => row.summary.clone(),
    };

    let mut errors = Vec::new();
    let capture = format!("{}/capture.json", rec.label);
    let notes = format!("{}/conn1.json (recorder)", rec.label);
    let ours = format!("our parser over {}/conn1", rec.label);

    // TLS.
    for field in ["ja4", "ja4_r"] {
        expect(
            &mut errors,
            &format!("tls.{field}"),
            &capture,
            rec.want(field),
            &echo["tls"][field],
        );
    }
    for (field, echoed) in [
        ("ja3", "ja3_hash"),
        ("ja3_string", "ja3"),
        ("ja4_o", "ja4_o"),
        ("ja4_ro", "ja4_ro"),
    ] {
        if let Some(want) = rec.stable(field) {
            expect(
                &mut errors,
                &format!("tls.{echoed}"),
                &format!("{capture}, equal in both recorded connections"),
                want,
                &echo["tls"][echoed],
            );
        }
    }
    rec.check_voice(&mut errors, "tls", &echo["tls"]["voice_id"]);
    expect(
        &mut errors,
        "tls.resumed",
        "a fresh client",
        &json!(false),
        &echo["tls"]["resumed"],
    );

    // ALPN and SNI, as the recorder saw them.
    let alpn_offered = rec.meta["alpn_offered"].clone();
    expect(
        &mut errors,
        "alpn.offered",
        &notes,
        &alpn_offered,
        &echo["alpn"]["offered"],
    );
    expect(
        &mut errors,
        "alpn.negotiated",
        &notes,
        &rec.meta["alpn_negotiated"],
        &echo["alpn"]["negotiated"],
    );
    expect(
        &mut errors,
        "alpn.spoken",
        &notes,
        &rec.meta["spoken"],
        &echo["alpn"]["spoken"],
    );
    expect(
        &mut errors,
        "stored sni",
        &notes,
        &rec.meta["sni"],
        &json!(row.sni),
    );

    // HTTP/2 or HTTP/1.
    if rec.is_h2() {
        let h2 = &echo["http2"];
        expect(
            &mut errors,
            "http2.akamai_fingerprint",
            &capture,
            rec.want("akamai"),
            &h2["akamai_fingerprint"],
        );
        expect(
            &mut errors,
            "http2.akamai_fingerprint_hash",
            &capture,
            rec.want("akamai_hash"),
            &h2["akamai_fingerprint_hash"],
        );
        expect(
            &mut errors,
            "http2.pseudo_header_order",
            &capture,
            rec.want("h2_pseudo_header_order"),
            &h2["pseudo_header_order"],
        );
        expect(
            &mut errors,
            "http2.header_order",
            &capture,
            rec.want("h2_header_order"),
            &h2["header_order"],
        );
        rec.check_voice(&mut errors, "http2", &h2["voice_id"]);
        expect(
            &mut errors,
            "request.stream_id",
            &format!("{capture} h2_first_stream_id"),
            rec.want("h2_first_stream_id"),
            &echo["request"]["stream_id"],
        );
        expect(
            &mut errors,
            "http1",
            "an h2 connection",
            &Value::Null,
            &echo["http1"],
        );
    } else {
        let h1 = &echo["http1"];
        let line = rec.want("http1_request_line").as_str().unwrap_or_default();
        let mut parts = line.split(' ');
        let (method, version) = (
            parts.next().unwrap_or_default(),
            parts.nth(1).unwrap_or_default(),
        );
        expect(
            &mut errors,
            "http1.request_line",
            &format!("{capture}, with this run's path"),
            &json!(format!("{method} {path} {version}")),
            &h1["request_line"],
        );
        expect(
            &mut errors,
            "http1.header_order",
            &capture,
            rec.want("http1_header_order"),
            &h1["header_order"],
        );
        rec.check_voice(&mut errors, "http1", &h1["voice_id"]);
        expect(
            &mut errors,
            "request.stream_id",
            "HTTP/1",
            &Value::Null,
            &echo["request"]["stream_id"],
        );
        expect(
            &mut errors,
            "http2",
            "an HTTP/1 connection",
            &Value::Null,
            &echo["http2"],
        );
    }
    expect(
        &mut errors,
        "request.index",
        "the connection's first request",
        &json!(1),
        &echo["request"]["index"],
    );
    expect(
        &mut errors,
        "token",
        "this run's URL",
        &json!(token),
        &echo["token"],
    );

    // Bucket and browser profile, by what the client is.
    let bucket = match kind {
        Kind::Browser => json!("A"),
        Kind::H2Library => json!("B"),
        Kind::Http1Only => Value::Null,
    };
    expect(
        &mut errors,
        "bucket",
        &format!("{kind:?}"),
        &bucket,
        &echo["bucket"],
    );
    if (kind == Kind::Browser) == echo["profile"].is_null() {
        errors.push(format!(
            "profile: a browser profile should match exactly for browsers ({kind:?}), got {}",
            echo["profile"]
        ));
    }
    expect(
        &mut errors,
        "profile",
        &ours,
        &rec.profile(),
        &echo["profile"],
    );

    // The stored raw bytes are the connection's: recomputing from them gives the same JA4.
    match parse_client_hello(&row.hello) {
        Ok(hello) => expect(
            &mut errors,
            "JA4 recomputed from the stored hello",
            &capture,
            rec.want("ja4"),
            &json!(hello.fingerprints().ja4()),
        ),
        Err(e) => errors.push(format!("stored hello does not parse: {e}")),
    }
    if row.prefix.is_empty() {
        errors.push("stored prefix is empty".to_owned());
    }

    assert!(
        errors.is_empty(),
        "{client} ({}, {:.1} s) against {url}: {} mismatch(es) with {}:\n  {}",
        rec.doc["version"],
        run.secs,
        errors.len(),
        rec.label,
        errors.join("\n  ")
    );
}

#[tokio::test]
async fn chromium_headless() {
    check_client("chromium", Kind::Browser).await;
}

#[tokio::test]
async fn firefox_esr_headless() {
    check_client("firefox-esr", Kind::Browser).await;
}

#[tokio::test]
async fn curl_http2() {
    check_client("curl-h2", Kind::H2Library).await;
}

#[tokio::test]
async fn curl_http1_1() {
    check_client("curl-h1", Kind::Http1Only).await;
}

#[tokio::test]
async fn python_httpx_h2() {
    check_client("python-httpx-h2", Kind::H2Library).await;
}

#[tokio::test]
async fn node_http2() {
    check_client("node-http2", Kind::H2Library).await;
}

#[tokio::test]
async fn go_net_http_h2() {
    check_client("go-h2", Kind::H2Library).await;
}

#[tokio::test]
async fn go_net_http_h1() {
    check_client("go-h1", Kind::Http1Only).await;
}

#[tokio::test]
async fn java_httpclient_h2() {
    check_client("java-httpclient", Kind::H2Library).await;
}

#[tokio::test]
async fn node_https() {
    check_client("node-https", Kind::Http1Only).await;
}

#[tokio::test]
async fn python_requests() {
    check_client("python-requests", Kind::Http1Only).await;
}

#[tokio::test]
async fn python_aiohttp() {
    check_client("python-aiohttp", Kind::Http1Only).await;
}

#[tokio::test]
async fn openssl_s_client() {
    check_client("openssl-s_client", Kind::Http1Only).await;
}

#[tokio::test]
async fn nghttp() {
    check_client("nghttp", Kind::H2Library).await;
}

/// Different clients speak differently: no two of the recordings the live echoes are compared
/// with (above: each live echo carries both voices of its client's recording) share both their
/// TLS voice and their HTTP/2 or HTTP/1 voice.
#[test]
fn different_clients_never_share_both_voices() {
    let list = Command::new(root().join("tests/clients/run-client.sh"))
        .arg("--list")
        .output()
        .expect("run tests/clients/run-client.sh --list");
    let names = String::from_utf8_lossy(&list.stdout).into_owned();
    let clients: Vec<&'static str> = names
        .split_whitespace()
        .map(|name| &*Box::leak(name.to_owned().into_boxed_str()))
        .collect();
    assert_eq!(clients.len(), 14, "{names}");
    let voices: Vec<(&str, String, String)> = clients
        .iter()
        .map(|&client| {
            let rec = recording(client);
            (rec.label.as_str(), rec.tls_voice(0), rec.app_voice(0))
        })
        .collect();
    for (i, (a, tls_a, app_a)) in voices.iter().enumerate() {
        for (b, tls_b, app_b) in &voices[i + 1..] {
            assert!(
                !(tls_a == tls_b && app_a == app_b),
                "{a} and {b} share both voices: {tls_a}, {app_a}"
            );
        }
    }
}

/// A resumed connection keeps its client's voice: curl (HTTP/1.1, `Connection: close`) fetches
/// two URLs over two connections, the second resuming the first's TLS session. Both echoes carry
/// the TLS voice of the recorded curl-h1 connection, and both are stored.
#[tokio::test]
async fn curl_resumed_connection_keeps_the_recorded_voice() {
    assert_test_name_is_loopback();
    let rec = recording("curl-h1");
    let certs = root().join(".tools/certs");
    let server = EchoServer::start(&[
        "--cert",
        certs.join("leaf-chain.pem").to_str().expect("UTF-8 path"),
        "--key",
        certs.join("leaf.key").to_str().expect("UTF-8 path"),
    ]);
    let url = |token: &str| format!("https://echo.exitvoice.test:{}/probe/{token}", server.port);
    let out = curl(&[
        "-sS",
        "--http1.1",
        "--cacert",
        certs.join("ca.pem").to_str().expect("UTF-8 path"),
        "-H",
        "Connection: close",
        &url("fresh-hello"),
        &url("resumed-hello"),
    ]);
    assert!(out.status.success(), "curl: {out:?}");
    let echoes = json_stream(&out.stdout);
    assert_eq!(echoes.len(), 2, "two echoes");
    let (fresh, resumed) = (&echoes[0], &echoes[1]);
    assert_ne!(
        fresh["peer"]["port"], resumed["peer"]["port"],
        "two connections"
    );
    assert_eq!(fresh["tls"]["resumed"], false);
    assert_eq!(
        resumed["tls"]["resumed"], true,
        "curl resumed the first session: {}",
        resumed["tls"]
    );
    let mut errors = Vec::new();
    for echo in [fresh, resumed] {
        rec.check_voice(&mut errors, "tls", &echo["tls"]["voice_id"]);
    }
    assert!(errors.is_empty(), "resumption: {}", errors.join("\n"));
    let rows = server
        .rows_until(|rows| rows.iter().filter(|r| r.token.is_some()).count() >= 2)
        .await;
    for echo in [fresh, resumed] {
        let stored = rows
            .iter()
            .find(|r| r.token.as_deref() == echo["token"].as_str())
            .unwrap_or_else(|| panic!("{} stored", echo["token"]));
        assert_eq!(
            stored.summary,
            as_stored(echo),
            "stored summary is the echo"
        );
    }
}

/// The same with `openssl s_client`, which (unlike curl) sends the session_ticket extension:
/// a run saving its session (`-sess_out`), then a run resuming it (`-sess_in`), both carry the
/// TLS voice of the recorded openssl-s_client connection.
#[tokio::test]
async fn openssl_resumed_session_keeps_the_recorded_voice() {
    assert_test_name_is_loopback();
    let rec = recording("openssl-s_client");
    let certs = root().join(".tools/certs");
    let server = EchoServer::start(&[
        "--cert",
        certs.join("leaf-chain.pem").to_str().expect("UTF-8 path"),
        "--key",
        certs.join("leaf.key").to_str().expect("UTF-8 path"),
    ]);
    let session = server.dir.path().join("openssl-session.pem");
    let session = session.to_str().expect("UTF-8 path");
    let hostport = format!("echo.exitvoice.test:{}", server.port);
    let ca = certs.join("ca.pem");
    let mut echoes = Vec::new();
    for (token, session_flag) in [
        ("saved-session", "-sess_out"),
        ("resumed-session", "-sess_in"),
    ] {
        // The flags of run-client.sh's openssl-s_client, plus the session file.
        let mut child = Command::new("timeout")
            .args([
                "-k",
                "5",
                &CLIENT_TIMEOUT_SECS.to_string(),
                "openssl",
                "s_client",
            ])
            .args([
                "-quiet",
                "-connect",
                &hostport,
                "-servername",
                "echo.exitvoice.test",
            ])
            .arg("-CAfile")
            .arg(&ca)
            .args([session_flag, session])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("openssl is installed (scripts/install-test-deps.sh)");
        let request =
            format!("GET /probe/{token} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\r\n");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(request.as_bytes())
            .expect("write the request");
        let out = child.wait_with_output().expect("openssl s_client");
        assert!(
            out.status.success(),
            "openssl s_client {session_flag}: {out:?}"
        );
        let run = ClientRun {
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            secs: 0.0,
        };
        echoes.push(printed_echo("openssl-s_client", &run).expect("an echo"));
    }
    assert_eq!(echoes[0]["tls"]["resumed"], false);
    assert_eq!(
        echoes[1]["tls"]["resumed"], true,
        "openssl resumed the saved session: {}",
        echoes[1]["tls"]
    );
    let mut errors = Vec::new();
    for echo in &echoes {
        rec.check_voice(&mut errors, "tls", &echo["tls"]["voice_id"]);
    }
    assert!(errors.is_empty(), "resumption: {}", errors.join("\n"));
    let rows = server
        .rows_until(|rows| rows.iter().filter(|r| r.token.is_some()).count() >= 2)
        .await;
    for echo in &echoes {
        let stored = rows
            .iter()
            .find(|r| r.token.as_deref() == echo["token"].as_str())
            .unwrap_or_else(|| panic!("{} stored", echo["token"]));
        assert_eq!(
            stored.summary,
            as_stored(echo),
            "stored summary is the echo"
        );
    }
}
