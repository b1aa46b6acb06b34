//! Shared helpers of the auditor's end-to-end tests: real proxies on loopback, started by
//! `tests/proxies/proxy.sh` in their own temporary directory and stopped (by PID) on drop.
#![allow(dead_code)]

pub mod bound_exit;
pub mod broker;
pub mod browser;
pub mod delay_relay;
pub mod forwarder;
pub mod netns;
pub mod proxy_client;
pub mod proxy_world;
pub mod simulated;
pub mod slow_path;
pub mod tcp_echo;
pub mod workers;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Password every test proxy is started with: `@ : /` exercise percent-decoding, and the
/// secret-leak tests grep for it.
pub const PASSWORD: &str = "ev-s3cr@t:p/ss";
/// The same, percent-encoded for a URL.
pub const PASSWORD_ENCODED: &str = "ev-s3cr%40t%3Ap%2Fss";
/// tinyproxy's `BasicAuth` takes only `[-a-z0-9._]` in a password, so it gets its own.
pub const TINY_PASSWORD: &str = "ev-tiny.s3cret";
/// User name for squid and tinyproxy.
pub const USER: &str = "evuser";
/// System account dante checks (created by proxy.sh if missing).
pub const SOCKS_USER: &str = "evaudit";

/// Starts of a proxy daemon before giving up (see [`Proxy::start`]).
const START_ATTEMPTS: usize = 3;

/// A free loopback TCP port (bound once, then released): only for daemons that cannot be handed
/// a listening socket.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

/// A loopback port nobody listens on, kept so while the returned socket lives: it is bound
/// without `SO_REUSEADDR` and never listens, so connecting is refused and no parallel test can
/// bind the port meanwhile.
pub fn closed_port() -> (tokio::net::TcpSocket, u16) {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .expect("bind 127.0.0.1:0");
    let port = socket.local_addr().expect("local addr").port();
    (socket, port)
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/proxies/proxy.sh")
}

/// A running proxy; stopped when dropped.
pub struct Proxy {
    /// The port it listens on, 127.0.0.1.
    pub port: u16,
    name: &'static str,
    dir: tempfile::TempDir,
}

impl Proxy {
    /// Starts `kind` (`squid`, `tinyproxy`, `dante`, `mitmproxy`, `haproxy`, `haproxy-tls`,
    /// `haproxy-pp`, `haproxy-failover`) with extra args.
    ///
    /// The daemons take a port number, not a listening socket, so the port is picked free and
    /// can be taken by a parallel test before the daemon binds it: proxy.sh then fails (it
    /// accepts only its own daemon listening there) and the start is retried on another port.
    pub fn start(kind: &'static str, args: &[&str]) -> Self {
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let dir = tempfile::Builder::new()
                .prefix(&format!("exitvoice-{kind}-"))
                .tempdir()
                .expect("tempdir");
            let port = free_port();
            let output = Command::new(script())
                .arg("start")
                .arg(kind)
                .arg(dir.path())
                .arg(port.to_string())
                .args(args)
                .output()
                .expect("run tests/proxies/proxy.sh");
            if output.status.success() {
                return Self {
                    port,
                    name: kind,
                    dir,
                };
            }
            failures.push(format!(
                "port {port}: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        panic!("{kind} did not start:\n{}", failures.join("\n"));
    }

    /// squid with Basic auth [`USER`]:[`PASSWORD`].
    pub fn squid() -> Self {
        Self::start("squid", &[USER, PASSWORD])
    }

    /// The exit URL of a [`Proxy::squid`], credentials included.
    pub fn squid_url(&self) -> String {
        format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}", self.port)
    }

    /// tinyproxy without auth.
    pub fn tinyproxy() -> Self {
        Self::start("tinyproxy", &[])
    }

    /// tinyproxy with BasicAuth [`USER`]:[`TINY_PASSWORD`].
    pub fn tinyproxy_auth() -> Self {
        Self::start("tinyproxy", &[USER, TINY_PASSWORD])
    }

    /// dante SOCKS5 with username auth [`SOCKS_USER`]:[`PASSWORD`].
    pub fn dante() -> Self {
        Self::start("dante", &[SOCKS_USER, PASSWORD])
    }

    /// The proxy's run directory (configs, logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Proxy {
    /// The name `proxy.sh stop` knows the daemon by.
    fn pid_name(&self) -> &'static str {
        match self.name {
            "haproxy-tls" | "haproxy-pp" | "haproxy-failover" => "haproxy",
            name => name,
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("stop")
            .arg(self.dir.path())
            .arg(self.pid_name())
            .status();
    }
}

/// `exitvoice serve` on a free loopback port with a generated certificate; killed on drop.
pub struct EchoServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its certificate pin, `sha256//<base64>`.
    pub pin: String,
    child: std::process::Child,
    /// Holds the echo database and certificate.
    pub dir: tempfile::TempDir,
}

impl EchoServer {
    /// Starts the echo server on `127.0.0.1:0` (the kernel picks a free port, so parallel tests
    /// cannot collide) and waits for its address and pin lines.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`EchoServer::start`] with `extra` flags for `exitvoice serve`.
    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_on(None, extra)
    }

    /// [`EchoServer::start_with`] on `database` (given as `EXITVOICE_DATABASE_URL`, as a
    /// password should be), or on `echo.db` in its directory. It runs in its directory, where
    /// a server on PostgreSQL keeps its generated certificate.
    pub fn start_on(database: Option<&str>, extra: &[&str]) -> Self {
        use std::io::BufRead;
        let dir = tempfile::Builder::new()
            .prefix("exitvoice-echo-")
            .tempdir()
            .expect("tempdir");
        let mut command = Command::new(env!("CARGO_BIN_EXE_exitvoice"));
        command
            .current_dir(dir.path())
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0");
        match database {
            Some(url) => command.env("EXITVOICE_DATABASE_URL", url),
            None => command.arg("--db").arg(dir.path().join("echo.db")),
        };
        let mut child = command
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("serve.log")).expect("log file"))
            .spawn()
            .expect("spawn exitvoice serve");
        let stdout = child.stdout.take().expect("stdout");
        let (mut port, mut pin) = (None, None);
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.expect("serve stdout");
            if let Some(addr) = line.split("listening on https://").nth(1) {
                let addr: std::net::SocketAddr = addr.trim().parse().expect("socket address");
                port = port.or(Some(addr.port()));
            }
            if let Some(rest) = line.split("certificate pin ").nth(1) {
                pin = rest.split_whitespace().next().map(str::to_owned);
                break;
            }
        }
        Self {
            port: port.expect("serve printed no address"),
            pin: pin.expect("serve printed no pin"),
            child,
            dir,
        }
    }
}

impl EchoServer {
    /// What the server logged (its stderr) so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default()
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one `exitvoice audit --once` run left behind.
pub struct AuditRun {
    /// The labels JSON (`--labels-out`).
    pub labels: serde_json::Value,
    /// stdout (the summary table).
    pub stdout: String,
    /// stderr (the JSON logs).
    pub stderr: String,
}

impl AuditRun {
    /// The label of exit `name`.
    pub fn exit(&self, name: &str) -> &serde_json::Value {
        exit_label(&self.labels, name)
    }
}

/// Exit `name`'s label in a labels document.
pub fn exit_label<'a>(labels: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    labels["exits"]
        .as_array()
        .and_then(|exits| exits.iter().find(|e| e["name"] == name))
        .unwrap_or_else(|| panic!("no label for {name}: {labels}"))
}

/// Writes an exits file for `echo` and `exits` (name, url) into `dir`.
pub fn exits_file(dir: &Path, echo: &EchoServer, exits: &[(&str, String)]) -> PathBuf {
    let mut text = format!(
        "[echo]\nurl = \"https://localhost:{}\"\nspki_sha256 = \"{}\"\n",
        echo.port, echo.pin
    );
    for (name, url) in exits {
        text.push_str(&format!(
            "\n[[exits]]\nname = \"{name}\"\nurl = \"{url}\"\n"
        ));
    }
    let path = dir.join("exits.toml");
    std::fs::write(&path, text).expect("write exits file");
    path
}

/// Runs `exitvoice audit --once` with `extra` flags; asserts it exits 0.
pub fn audit(exits: &Path, db: &Path, extra: &[&str]) -> AuditRun {
    let (code, run) = audit_code(exits, db, extra);
    assert_eq!(code, 0, "audit failed:\n{}\n{}", run.stdout, run.stderr);
    run
}

/// Runs `exitvoice audit --once` with `extra` flags: its exit code and what it left behind.
/// The labels it writes are checked against the labels JSON Schema.
pub fn audit_code(exits: &Path, db: &Path, extra: &[&str]) -> (i32, AuditRun) {
    let labels_path = db.with_extension("labels.json");
    let output = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .arg("audit")
        .arg("--exits")
        .arg(exits)
        .arg("--db")
        .arg(db)
        .arg("--once")
        .arg("--labels-out")
        .arg(&labels_path)
        .args(["--spacing", "50ms", "--jitter", "50ms"])
        .args(extra)
        .output()
        .expect("run exitvoice audit");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        stdout.contains("same-exit overlaps (must be 0): 0"),
        "overlap count missing or non-zero:\n{stdout}\n{stderr}"
    );
    let labels = serde_json::from_slice(&std::fs::read(&labels_path).expect("labels file"))
        .expect("labels JSON");
    assert_valid_labels(&labels);
    let run = AuditRun {
        labels,
        stdout,
        stderr,
    };
    (output.status.code().unwrap_or(-1), run)
}

/// The labels contract, `schema/json/labels.schema.json`.
pub fn labels_schema() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/json/labels.schema.json");
    serde_json::from_slice(&std::fs::read(path).expect("read the labels schema"))
        .expect("the labels schema is JSON")
}

/// Panics with every violation unless `labels` validates against the labels JSON Schema.
pub fn assert_valid_labels(labels: &serde_json::Value) {
    let validator = jsonschema::draft202012::new(&labels_schema()).expect("a valid JSON Schema");
    let errors: Vec<String> = validator
        .iter_errors(labels)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "labels do not match schema/json/labels.schema.json:\n{}\n{labels}",
        errors.join("\n")
    );
}

/// Every probe record in an auditor database, oldest first, as JSON.
pub fn probes(db: &Path) -> Vec<serde_json::Value> {
    let url = format!("sqlite://{}?mode=ro", db.display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect(&url)
            .await
            .expect("open db");
        let rows: Vec<String> = sqlx::query_scalar("SELECT record FROM probes ORDER BY id")
            .fetch_all(&mut conn)
            .await
            .expect("probes");
        rows.iter()
            .map(|r| serde_json::from_str(r).expect("record JSON"))
            .collect()
    })
}

/// Runs `exitvoice diff --db DB ARGS…`: its exit code and stdout.
pub fn diff(args: &[&str], db: &Path) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .arg("diff")
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("run exitvoice diff");
    // Shown with a failing test's output.
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}
