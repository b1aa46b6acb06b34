//! Shared by the `echo_*` end-to-end tests: runs the real `exitvoice serve` binary on an
//! ephemeral loopback port with its own temporary database, and talks to it with real clients
//! (curl, and rustls for what curl cannot do). Needs `curl` (scripts/install-test-deps.sh).
#![allow(dead_code)] // Each test file uses its own part of this module.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use exitvoice_exits::leaf::LeafVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A running `exitvoice serve` child process.
pub struct EchoServer {
    child: Child,
    /// The port of the first listen address (`127.0.0.1:0`).
    pub port: u16,
    /// Every address the server printed, in order.
    pub addrs: Vec<std::net::SocketAddr>,
    /// The pin the server printed (`sha256//…`).
    pub pin: String,
    /// Where it serves Prometheus metrics (`--metrics-listen`), if it said so.
    pub metrics: Option<std::net::SocketAddr>,
    /// Temporary directory holding the database and the generated certificate.
    pub dir: tempfile::TempDir,
    _logs: tempfile::TempDir,
    stderr_path: PathBuf,
    args: Vec<String>,
    env: Vec<(String, PathBuf)>,
}

/// Spawns `exitvoice serve --listen 127.0.0.1:0 --db <db> <args>` (stderr appended to
/// `stderr_path`) and waits until it printed its addresses and pin.
fn spawn(
    db: &Path,
    stderr_path: &Path,
    args: &[String],
    env: &[(String, PathBuf)],
) -> (
    Child,
    Vec<std::net::SocketAddr>,
    String,
    Option<std::net::SocketAddr>,
) {
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(stderr_path)
        .expect("stderr file");
    let mut command = Command::new(env!("CARGO_BIN_EXE_exitvoice"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(db)
        .args(args)
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr);
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("spawn exitvoice serve");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (mut addrs, mut pin, mut metrics) = (Vec::new(), None, None);
    while pin.is_none() {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("server printed its address and pin");
        if let Some(addr) = line.strip_prefix("exitvoice serve: listening on https://") {
            addrs.push(addr.parse().expect("socket address"));
        }
        if let Some(rest) = line.strip_prefix("exitvoice serve: metrics on http://") {
            let addr = rest.trim_end_matches("/metrics");
            metrics = Some(addr.parse().expect("metrics address"));
        }
        if let Some(rest) = line.strip_prefix("exitvoice serve: certificate pin ") {
            pin = rest.split(' ').next().map(str::to_owned);
        }
    }
    (child, addrs, pin.expect("pin"), metrics)
}

impl EchoServer {
    /// Starts the binary with `--listen 127.0.0.1:0 --db <tmp>/echo.db` plus `extra` flags, and
    /// waits until it printed its address and pin.
    pub fn start(extra: &[&str]) -> Self {
        Self::start_with_env(extra, &[])
    }

    /// Like [`Self::start`], with extra environment variables.
    pub fn start_with_env(extra: &[&str], env: &[(&str, &Path)]) -> Self {
        Self::start_in(tempfile::tempdir().expect("tempdir"), extra, env)
    }

    /// Like [`Self::start_with_env`], with the database (`echo.db`) in `dir`.
    pub fn start_in(dir: tempfile::TempDir, extra: &[&str], env: &[(&str, &Path)]) -> Self {
        // Logs live apart from the database, so a full database filesystem still gets them.
        let logs = tempfile::tempdir().expect("log tempdir");
        let stderr_path = logs.path().join("stderr.log");
        let args: Vec<String> = extra.iter().map(|a| (*a).to_owned()).collect();
        let env: Vec<(String, PathBuf)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.to_path_buf()))
            .collect();
        let (child, addrs, pin, metrics) =
            spawn(&dir.path().join("echo.db"), &stderr_path, &args, &env);
        Self {
            child,
            port: addrs
                .first()
                .map(std::net::SocketAddr::port)
                .expect("an address"),
            addrs,
            pin,
            metrics,
            dir,
            _logs: logs,
            stderr_path,
            args,
            env,
        }
    }

    /// Starts the server again on the same database and flags (after [`Self::kill9`] or
    /// [`Self::sigterm`]); the port changes.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let (child, addrs, pin, metrics) =
            spawn(&self.db(), &self.stderr_path, &self.args, &self.env);
        self.child = child;
        self.metrics = metrics;
        self.port = addrs
            .first()
            .map(std::net::SocketAddr::port)
            .expect("an address");
        self.addrs = addrs;
        self.pin = pin;
    }

    /// `https://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// The database file.
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("echo.db")
    }

    /// The generated certificate (PEM) beside the database.
    pub fn cert_pem(&self) -> PathBuf {
        self.dir.path().join("echo.db.cert.pem")
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Peak resident memory of the server so far (`VmHWM` of /proc/PID/status), in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// Sends SIGKILL and waits for the process to be gone.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Sends SIGTERM and waits (at most 30 s) for the process to exit.
    pub fn sigterm(&mut self) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `GET /healthz` as JSON (through curl), from 127.0.2.1: an operator's address that no test
    /// client or attacker uses, so a source in the penalty box does not lose its view.
    pub fn healthz(&self) -> Value {
        let out = curl(&[
            "-sk",
            "--http1.1",
            "--interface",
            "127.0.2.1",
            &self.url("/healthz"),
        ]);
        serde_json::from_slice(&out.stdout).expect("healthz JSON")
    }

    /// Waits until the open-connection gauge reads zero (at most `within`); returns the last
    /// `/healthz` body read. The health request's own connection is the one still open.
    pub fn wait_open_zero(&self, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let health = self.healthz();
            // The connection carrying this very /healthz request is open while it is answered.
            if health["connections"]["open"] == 1 || Instant::now() > deadline {
                return health;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// All stored observations, oldest first (polls until `want(rows)` or 10 s).
    pub async fn rows_until(&self, want: impl Fn(&[Row]) -> bool) -> Vec<Row> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let rows = read_rows(&self.db()).await;
            if want(&rows) || Instant::now() > deadline {
                return rows;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The stored row of the request that carried `token`, once it is stored (panics after
    /// [`EchoServer::rows_until`]'s wait).
    pub async fn row_of_token(&self, token: &str) -> Row {
        let rows = self
            .rows_until(|rows| rows.iter().any(|row| row.token.as_deref() == Some(token)))
            .await;
        rows.into_iter()
            .find(|row| row.token.as_deref() == Some(token))
            .expect("the request was stored")
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One stored observation row.
#[derive(Clone, Debug)]
pub struct Row {
    pub conn_id: String,
    pub request_index: i64,
    /// The peer as stored: `ip:port`.
    pub peer: String,
    pub token: Option<String>,
    pub sni: Option<String>,
    pub failure: Option<String>,
    pub summary: Value,
    pub hello: Vec<u8>,
    pub prefix: Vec<u8>,
}

/// Reads every observation through the store's own listing (requests joined with their
/// connection, and connections without a request), beside the running server.
pub async fn read_rows(db: &Path) -> Vec<Row> {
    let Ok(store) = exitvoice_store::Store::open(db).await else {
        return Vec::new();
    };
    let query = exitvoice_schema::ObservationQuery {
        limit: u32::MAX,
        raw: true,
        ..exitvoice_schema::ObservationQuery::default()
    };
    let rows = store
        .observations(&query, exitvoice_protocol::analysis::layers)
        .await
        .unwrap_or_default();
    store.pool().close().await;
    rows.into_iter()
        .map(|stored| {
            let o = stored.observation;
            Row {
                conn_id: o.conn_id,
                request_index: i64::from(o.request_index),
                peer: format!("{}:{}", o.peer.ip, o.peer.port),
                token: o.token,
                sni: o.sni,
                failure: o.failure_detail,
                summary: serde_json::to_value(&o.summary).expect("summary JSON"),
                hello: o.hello,
                prefix: o.prefix,
            }
        })
        .collect()
}

/// Runs curl with `args`.
pub fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(args)
        .output()
        .expect("curl is installed (scripts/install-test-deps.sh)")
}

/// Parses one or several concatenated JSON documents (curl with several URLs prints them back
/// to back).
pub fn json_stream(bytes: &[u8]) -> Vec<Value> {
    serde_json::Deserializer::from_slice(bytes)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .expect("JSON documents")
}

/// A rustls client config that accepts exactly the certificate in `cert_pem` (pinning, as the
/// auditor does, without a CA; handshake signatures still checked) and offers `alpn`.
pub fn client_config(cert_pem: &Path, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let der = CertificateDer::from_pem_file(cert_pem)
        .expect("server certificate PEM")
        .to_vec();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(LeafVerifier::new(provider, move |leaf| {
            if leaf.as_ref() == der.as_slice() {
                Ok(())
            } else {
                Err(rustls::Error::General("not the pinned certificate".into()))
            }
        })))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A real ClientHello (its TLS records), as rustls sends it to `server`.
pub fn client_hello(server: &EchoServer) -> Vec<u8> {
    let config = client_config(&server.cert_pem(), &[b"h2", b"http/1.1"]);
    let name = ServerName::try_from("localhost").expect("name");
    let mut client = rustls::ClientConnection::new(config, name).expect("client");
    let mut hello = Vec::new();
    client.write_tls(&mut hello).expect("hello bytes");
    hello
}

/// Connects to the server with rustls (SNI `localhost`).
pub async fn tls_connect(
    port: u16,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    let name = ServerName::try_from("localhost").expect("server name");
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
}

/// Sends one HTTP/1.1 request (`Connection: close`) and returns the whole response.
pub async fn http1_request(stream: &mut TlsStream<TcpStream>, path: &str) -> String {
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: exitvoice-test\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("write request");
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    String::from_utf8_lossy(&response).into_owned()
}

/// The JSON body of an HTTP/1.1 response (after the blank line; no chunking expected from a
/// `Connection: close` JSON answer with a content-length).
pub fn http1_body(response: &str) -> Value {
    let (_, body) = response.split_once("\r\n\r\n").expect("head and body");
    serde_json::from_str(body).expect("JSON body")
}

/// The echo as the store keeps it: a live `/api/all` or `/probe/<token>` answer without its
/// `coherence`, which is judged for each answer (with the request's User-Agent) and not stored.
pub fn as_stored(echo: &Value) -> Value {
    let mut echo = echo.clone();
    if let Some(fields) = echo.as_object_mut() {
        fields.remove("coherence");
    }
    echo
}
