//! Throwaway Redis servers for tests: Debian's `redis-server` binary (the test command installs
//! the `redis-server` package), started as a child process in a temporary directory, listening
//! on loopback only on a free port, with no persistence (`--save "" --appendonly no`) and
//! nothing from the system's configuration (no config file; the Debian service on port 6379 is
//! never used, nor needed).
//!
//! Two servers per test process are shared and started on first use: a plain one
//! ([`server`]) and a TLS-only one ([`tls_server`]), whose certificate, signed by a CA made for
//! it ([`Server::ca_pem`]), is valid for `127.0.0.1` and `localhost`. A watchdog kills them and
//! removes their directories when the process ends, however it ends. Tests that kill or restart
//! a server take a private one ([`private_server`]), which dropping kills. Tests sharing a
//! server keep apart by prefixing their keys with [`fresh_prefix`].

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// Debian's server binary.
const REDIS_SERVER: &str = "/usr/bin/redis-server";

/// How long a server may take to answer after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How many free ports a new server tries when another process takes the one it was given
/// between the probe and the server's own `bind`.
const PORT_ATTEMPTS: u32 = 5;

/// The line the server logs once it listens.
const READY_LINE: &str = "Ready to accept connections";

/// A running server.
pub struct Server {
    port: u16,
    /// Its temporary directory: working directory (`--dir`), log, pid file, certificates.
    dir: PathBuf,
    /// The CA's PEM file, for the TLS server.
    ca: Option<PathBuf>,
    /// Private servers are killed and their directory removed on drop; shared ones (statics,
    /// never dropped) by the watchdog.
    private: bool,
    /// The server process; `None` while stopped.
    child: Mutex<Option<Child>>,
    /// Arguments of its own, after the defaults (persistence, replication, cluster mode).
    extra: Vec<String>,
}

impl Server {
    /// The loopback port the server listens on (the TLS port, for the TLS server).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/`, or `rediss://127.0.0.1:<port>/` for the TLS server (whose
    /// certificate is valid for `127.0.0.1` and `localhost`, signed by [`Server::ca_pem`]).
    pub fn url(&self) -> String {
        let scheme = if self.ca.is_some() { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }

    /// Its working directory: its RDB file, its AOF directory, its cluster's node file.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The PEM file of the CA that signed the TLS server's certificate; `None` for a plain
    /// server.
    pub fn ca_pem(&self) -> Option<&Path> {
        self.ca.as_deref()
    }

    /// Kills the server (SIGKILL) and starts it again on the same port with an empty data set
    /// (nothing is persisted: a server started with persistence loads what it had written),
    /// returning once it answers: Redis "forgot everything". On a shared server this empties
    /// it for every test of the process, so tests doing it take a [`private_server`].
    ///
    /// # Panics
    /// If the server does not start again within 30 seconds.
    pub fn restart_empty(&self) {
        self.start_again();
    }

    /// Kills the server (SIGKILL) and waits for it to be gone, without restarting it:
    /// connections to its port are refused until [`Server::start_again`]. Does nothing when it
    /// is stopped already.
    pub fn stop(&self) {
        let mut child = self.lock();
        self.kill(&mut child);
    }

    /// Starts the server again on the same port, with what it persisted in its directory (an
    /// RDB file written by `SAVE`, or the AOF of a server started with `--appendonly yes`;
    /// without either, empty), returning once it answers. A server still running is killed
    /// first, so this is [`Server::restart_empty`] then.
    ///
    /// # Panics
    /// If the server does not start within 30 seconds (retrying while another process holds
    /// the port).
    pub fn start_again(&self) {
        let mut child = self.lock();
        self.kill(&mut child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match launch(&self.dir, self.port, self.ca.is_some(), &self.extra) {
                Ok(started) => {
                    *child = Some(started);
                    return;
                }
                Err(failure) if failure.port_in_use && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(failure) => panic!(
                    "redis-server did not start again on port {}: {}",
                    self.port, failure.message
                ),
            }
        }
    }

    /// Freezes the server (`SIGSTOP`, or `SIGCONT` when `frozen` is false): it keeps its data
    /// and its clients' connections but answers nothing, as a hung or partitioned server.
    ///
    /// # Panics
    /// If it is not running or `kill` fails.
    pub fn freeze(&self, frozen: bool) {
        let child = self.lock();
        let pid = child.as_ref().expect("a running redis-server").id();
        let signal = if frozen { "-STOP" } else { "-CONT" };
        let status = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {pid} failed");
    }

    fn lock(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Kills and reaps the process, if any. The pid file goes before the reaping, so the
    /// watchdog never kills a reused pid.
    fn kill(&self, child: &mut Option<Child>) {
        if let Some(mut process) = child.take() {
            let _ = process.kill();
            let _ = std::fs::remove_file(self.dir.join(PID_FILE));
            let _ = process.wait();
        }
    }
}

impl Drop for Server {
    /// A private server is killed and its directory removed; shared ones live in statics,
    /// which are never dropped (the watchdog cleans them up).
    fn drop(&mut self) {
        if self.private {
            let mut child = self.lock();
            self.kill(&mut child);
            drop(child);
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The test process's plain server, started on first call.
///
/// # Panics
/// If `redis-server` is missing (the message says how to install it) or the server does not
/// start.
pub fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| start(false, false, &[]))
}

/// The test process's TLS-only server (no plain port; clients need not present a certificate),
/// started on first call. Its certificate is valid for `127.0.0.1` and `localhost`.
///
/// # Panics
/// As [`server`].
pub fn tls_server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| start(true, false, &[]))
}

/// A fresh plain server of the caller's own, for tests that kill or restart it. Dropping it
/// kills it and removes its directory.
///
/// # Panics
/// As [`server`].
pub fn private_server() -> Server {
    private_server_with(&[])
}

/// A fresh plain server of the caller's own started with `args` after the defaults (which they
/// override: `--appendonly yes`, `--replicaof 127.0.0.1 <port>`, `--cluster-enabled yes`),
/// kept for its restarts. Dropping it kills it and removes its directory.
///
/// # Panics
/// As [`server`].
pub fn private_server_with(args: &[&str]) -> Server {
    start(false, true, args)
}

/// A key prefix of one test's own, `t<n>_<hint>` (the hint lowercased, other than ASCII letters
/// and digits replaced by `_`, cut at 40 characters), so tests sharing a server never see each
/// other's keys.
pub fn fresh_prefix(hint: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let clean: String = hint
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    format!("t{}_{clean}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The file, in the server's directory, holding the running server's pid for the watchdog.
const PID_FILE: &str = "redis.pid";

/// The server's log file, in its directory.
const LOG_FILE: &str = "server.log";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn start(tls: bool, private: bool, args: &[&str]) -> Server {
    let extra: Vec<String> = args.iter().map(|&arg| arg.to_owned()).collect();
    if !Path::new(REDIS_SERVER).exists() {
        panic!(
            "Redis is not installed (no {REDIS_SERVER}): `apt-get install redis-server`, or run \
             scripts/test.sh, which installs it"
        );
    }
    let dir = tempfile::Builder::new()
        .prefix(&format!("exitvoice-redis-{}-", std::process::id()))
        .tempdir()
        .expect("server directory")
        .keep();
    let ca = tls.then(|| write_certificates(&dir));
    // Watched from the start, so the directory goes even if the server never comes up.
    watch(&dir);
    let mut attempt = 1;
    loop {
        let port = free_port();
        match launch(&dir, port, tls, &extra) {
            Ok(child) => {
                return Server {
                    port,
                    dir,
                    ca,
                    private,
                    child: Mutex::new(Some(child)),
                    extra,
                }
            }
            Err(failure) if failure.port_in_use && attempt < PORT_ATTEMPTS => attempt += 1,
            Err(failure) => {
                let _ = std::fs::remove_dir_all(&dir);
                panic!("redis-server did not start: {}", failure.message);
            }
        }
    }
}

/// Why a server did not come up.
struct Failure {
    /// Another process holds the port.
    port_in_use: bool,
    /// What went wrong, with the server's log.
    message: String,
}

/// Starts a server in `dir` on `port` with `extra` arguments and waits until it answers
/// (plain: `PING` gets `+PONG`; TLS: it logs that it is ready and the port accepts
/// connections).
fn launch(dir: &Path, port: u16, tls: bool, extra: &[String]) -> Result<Child, Failure> {
    let log = dir.join(LOG_FILE);
    // A fresh log per start, so readiness is this process's.
    File::create(&log).map_err(|e| Failure {
        port_in_use: false,
        message: format!("cannot create {}: {e}", log.display()),
    })?;
    let mut command = Command::new(REDIS_SERVER);
    command.args(["--bind", "127.0.0.1", "--protected-mode", "no"]);
    if tls {
        command
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .arg("--tls-cert-file")
            .arg(dir.join("server.pem"))
            .arg("--tls-key-file")
            .arg(dir.join("server.key"))
            .arg("--tls-ca-cert-file")
            .arg(dir.join("ca.pem"))
            .args(["--tls-auth-clients", "no"]);
    } else {
        command.args(["--port", &port.to_string()]);
    }
    command
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(&log)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = command.spawn().map_err(|e| Failure {
        port_in_use: false,
        message: format!("cannot run {REDIS_SERVER}: {e}"),
    })?;
    if let Err(e) = std::fs::write(dir.join(PID_FILE), child.id().to_string()) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Failure {
            port_in_use: false,
            message: format!("cannot write its pid file: {e}"),
        });
    }
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let exited = child.try_wait().ok().flatten();
        if exited.is_none() && answers(port, tls, &log) {
            return Ok(child);
        }
        if exited.is_some() || Instant::now() >= deadline {
            let _ = child.kill();
            let _ = std::fs::remove_file(dir.join(PID_FILE));
            let status = child.wait();
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(Failure {
                port_in_use: log.contains("Address already in use"),
                message: match exited {
                    Some(status) => format!("it exited ({status}); its log:\n{log}"),
                    None => format!(
                        "no answer on port {port} within {START_TIMEOUT:?} (then {status:?}); \
                         its log:\n{log}"
                    ),
                },
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether the server on `port` is up.
fn answers(port: u16, tls: bool, log: &Path) -> bool {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    if tls {
        return std::fs::read_to_string(log).is_ok_and(|l| l.contains(READY_LINE))
            && TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok();
    }
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut reply = [0; 7];
    stream.read_exact(&mut reply).is_ok() && reply == *b"+PONG\r\n"
}

/// Makes a CA and a server certificate it signs, valid for `127.0.0.1` (IP SAN) and
/// `localhost`; writes `ca.pem`, `server.pem` and `server.key` into `dir` and returns the CA's
/// path.
fn write_certificates(dir: &Path) -> PathBuf {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "exitvoice redistest CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().expect("server key");
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("server certificate parameters");
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let cert = params.signed_by(&key, &issuer).expect("server certificate");

    let ca = dir.join("ca.pem");
    std::fs::write(&ca, ca_cert.pem()).expect("write ca.pem");
    std::fs::write(dir.join("server.pem"), cert.pem()).expect("write server.pem");
    std::fs::write(dir.join("server.key"), key.serialize_pem()).expect("write server.key");
    ca
}

/// Kills the server whose pid is in `dir` and removes `dir` once this process has ended,
/// however it ends; gives up early when `dir` is gone (a private server dropped).
#[allow(
    clippy::zombie_processes,
    reason = "the watchdog outlives this process by design: nothing here could wait for it"
)]
fn watch(dir: &Path) {
    let script = format!(
        "while kill -0 {pid} 2>/dev/null && [ -d '{dir}' ]; do sleep 0.5; done; \
         if [ -d '{dir}' ]; then \
           p=$(cat '{dir}/{PID_FILE}' 2>/dev/null) && kill -9 \"$p\" 2>/dev/null; \
           rm -rf '{dir}'; \
         fi",
        pid = std::process::id(),
        dir = dir.display()
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server's watchdog");
}

/// A Redis Cluster of `primaries` primaries with one replica each, on loopback (Debian's
/// `redis-server` in cluster mode, joined by `redis-cli --cluster create`), started and ready
/// (`cluster_state:ok` on every node). Dropping it kills its nodes.
pub struct Cluster {
    /// Its nodes, primaries first as `redis-cli` was given them.
    pub nodes: Vec<Server>,
}

/// How long a cluster node may be unreachable before its replica takes over, ms.
pub const CLUSTER_NODE_TIMEOUT_MS: u32 = 1000;

impl Cluster {
    /// Starts and joins `primaries` × 2 nodes.
    ///
    /// # Panics
    /// If a node does not start or the cluster does not form within 30 seconds.
    pub fn start(primaries: usize) -> Self {
        let timeout = CLUSTER_NODE_TIMEOUT_MS.to_string();
        let nodes: Vec<Server> = (0..primaries * 2)
            .map(|_| {
                private_server_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    &timeout,
                ])
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            created.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&created.stdout)
        );
        let cluster = Self { nodes };
        cluster.wait_ok();
        cluster
    }

    /// `redis+cluster://127.0.0.1:<port>,…/`: every node.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        format!("redis+cluster://{}/", hosts.join(","))
    }

    /// The primary that holds the slot of hash tag `tag` now, and its replica.
    ///
    /// # Panics
    /// If the cluster does not say.
    pub fn shard_of(&self, tag: &str) -> (&Server, &Server) {
        let alive = self.alive().next().expect("a live node");
        let slot: u16 = cli(alive, &["CLUSTER", "KEYSLOT", tag])
            .trim()
            .parse()
            .expect("a slot");
        let nodes = cli(alive, &["CLUSTER", "NODES"]);
        let lines: Vec<Vec<&str>> = nodes.lines().map(|l| l.split(' ').collect()).collect();
        let primary = lines
            .iter()
            .find(|fields| {
                fields.get(2).is_some_and(|flags| flags.contains("master"))
                    && !fields.get(2).is_some_and(|flags| flags.contains("fail"))
                    && fields.iter().skip(8).any(|range| holds(range, slot))
            })
            .expect("a primary for the slot");
        let replica = lines
            .iter()
            .find(|fields| fields.get(3) == Some(&primary[0]))
            .expect("a replica of the primary");
        (self.by_address(primary[1]), self.by_address(replica[1]))
    }

    /// Waits until every running node says `cluster_state:ok`.
    ///
    /// # Panics
    /// After 30 seconds.
    pub fn wait_ok(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while !self
            .alive()
            .all(|node| cli(node, &["CLUSTER", "INFO"]).contains("cluster_state:ok"))
        {
            assert!(Instant::now() < deadline, "the cluster did not form");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn alive(&self) -> impl Iterator<Item = &Server> {
        self.nodes.iter().filter(|node| node.lock().is_some())
    }

    fn by_address(&self, address: &str) -> &Server {
        let port: u16 = address
            .split('@')
            .next()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .expect("a node's address");
        self.nodes
            .iter()
            .find(|node| node.port() == port)
            .expect("a node of this cluster")
    }
}

/// Whether `range` (`5461-10922` or `42`, as `CLUSTER NODES` lists them) holds `slot`.
fn holds(range: &str, slot: u16) -> bool {
    let mut ends = range.split('-').map(str::parse::<u16>);
    match (ends.next(), ends.next()) {
        (Some(Ok(first)), None) => first == slot,
        (Some(Ok(first)), Some(Ok(last))) => (first..=last).contains(&slot),
        _ => false,
    }
}

/// What `redis-cli` printed for `args` on `server` (empty when it failed).
fn cli(server: &Server, args: &[&str]) -> String {
    Command::new("redis-cli")
        .args(["-p", &server.port().to_string()])
        .args(args)
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
        .unwrap_or_default()
}

/// A Redis Sentinel on loopback (Debian's `redis-server --sentinel`) watching one primary as
/// `name`, quorum 1, that calls it down after [`SENTINEL_DOWN_AFTER_MS`] and promotes a
/// replica then. Dropping it kills it and removes its directory.
pub struct Sentinel {
    port: u16,
    dir: PathBuf,
    child: Child,
}

/// How long a sentinel waits before it calls an unanswering primary down, ms.
pub const SENTINEL_DOWN_AFTER_MS: u32 = 500;

impl Sentinel {
    /// Starts a sentinel watching `primary` as `name`.
    ///
    /// # Panics
    /// If it does not start within 30 seconds.
    pub fn start(primary: &Server, name: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(&format!("exitvoice-sentinel-{}-", std::process::id()))
            .tempdir()
            .expect("sentinel directory")
            .keep();
        watch(&dir);
        let port = free_port();
        let config = dir.join("sentinel.conf");
        std::fs::write(
            &config,
            format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {dir}\n\
                 logfile {dir}/{LOG_FILE}\n\
                 sentinel monitor {name} 127.0.0.1 {primary} 1\n\
                 sentinel down-after-milliseconds {name} {SENTINEL_DOWN_AFTER_MS}\n\
                 sentinel failover-timeout {name} 5000\n",
                dir = dir.display(),
                primary = primary.port(),
            ),
        )
        .expect("write sentinel.conf");
        let child = Command::new(REDIS_SERVER)
            .arg(&config)
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run redis-server --sentinel");
        std::fs::write(dir.join(PID_FILE), child.id().to_string()).expect("its pid file");
        let deadline = Instant::now() + START_TIMEOUT;
        while !answers(port, false, &dir.join(LOG_FILE)) {
            assert!(Instant::now() < deadline, "the sentinel did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { port, dir, child }
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of the primary it names for `name` now.
    pub fn primary_port(&self, name: &str) -> Option<u16> {
        let output = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(["SENTINEL", "get-master-addr-by-name", name])
            .output()
            .ok()?;
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .nth(1)?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = std::fs::remove_file(self.dir.join(PID_FILE));
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
