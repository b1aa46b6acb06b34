//! `exitvoice broker` as the broker tests run it: on a free loopback port, its state and the
//! labels in `database`, killed (SIGKILL) when dropped.

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running broker instance.
pub struct Broker {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// Its forward proxies' addresses (`--proxy-listen`), in the order given.
    pub proxies: Vec<std::net::SocketAddr>,
    child: Child,
    /// Its stderr (the log).
    log: tempfile::NamedTempFile,
}

impl Broker {
    /// Starts a broker on `exits` and `database` (a path or a URL) with `token` and `extra` flags,
    /// and waits for its address.
    pub fn start(exits: &Path, database: &str, token: &str, extra: &[&str]) -> Self {
        let log = tempfile::NamedTempFile::new().expect("a log file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
            .args(["broker", "--listen", "127.0.0.1:0"])
            .args(extra)
            .arg("--exits")
            .arg(exits)
            .env("EXITVOICE_DATABASE_URL", database)
            .env("EXITVOICE_BROKER_TOKEN", token)
            .stdout(Stdio::piped())
            .stderr(log.reopen().expect("the log file"))
            .spawn()
            .expect("spawn exitvoice broker");
        let stdout = child.stdout.take().expect("stdout");
        // The certificate's pin and the proxies' addresses come first, then the API's.
        let mut proxies = Vec::new();
        let line = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .inspect(|line| {
                if let Some(rest) = line.split("forward proxy on ").nth(1) {
                    let address = rest.split_whitespace().next().unwrap_or_default();
                    proxies.push(address.parse().expect("a proxy address"));
                }
            })
            .find(|line| line.contains("listening on "))
            .unwrap_or_default();
        let url = line
            .split("listening on ")
            .nth(1)
            .and_then(|rest| rest.strip_suffix("/v1/leases"))
            .unwrap_or_else(|| panic!("the broker said no address"))
            .to_owned();
        Self {
            url,
            proxies,
            child,
            log,
        }
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Sends it SIGHUP: it reads its exits file again.
    pub fn hangup(&self) {
        self.signal("-HUP");
    }

    /// Sends it SIGSTOP: the process stands still, its sockets open, until [`Self::resume`].
    pub fn stop(&self) {
        self.signal("-STOP");
    }

    /// Sends it SIGCONT.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} failed");
    }

    /// Kills it with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL the broker");
        let _ = self.child.wait();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `exitvoice audit` of `exits` into `database`, quick (2 samples an exit, no QUIC), with
/// `schedule` (`--once`, or `--every` and a period).
fn audit_command(exits: &Path, database: &str, schedule: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_exitvoice"));
    command
        .arg("audit")
        .args(schedule)
        .args(["--samples", "2", "--spacing", "50ms", "--jitter", "0ms"])
        .arg("--no-quic")
        .arg("--exits")
        .arg(exits)
        .env("EXITVOICE_DATABASE_URL", database);
    command
}

/// An auditor that runs every period until dropped (then SIGKILL).
pub struct Auditor(Child);

impl Auditor {
    /// Starts `exitvoice audit --every period` on `exits` and `database`.
    pub fn start(exits: &Path, database: &str, period: &str) -> Self {
        let child = audit_command(exits, database, &["--every", period])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn exitvoice audit");
        Self(child)
    }
}

impl Drop for Auditor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A quick real audit of `exits` into `database`: the labels a broker on that database obeys.
pub fn audit(exits: &Path, database: &str) {
    audit_with(exits, database, &[]);
}

/// [`audit`] with `extra` flags (`--geoip FILE`).
pub fn audit_with(exits: &Path, database: &str, extra: &[&str]) {
    let output = audit_command(exits, database, &["--once"])
        .args(extra)
        .output()
        .expect("run exitvoice audit");
    assert!(
        output.status.success(),
        "audit: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Publishes in `database` (a SQLite file) a copy of its newest labels snapshot in which each
/// exit named in `gaps` has that round-trip gap, µs (`latency.round_trip.gap_min_us` and
/// `excess_gap_us`; `None`: no `round_trip`, as for an exit whose echo never measured one).
/// A real audit cannot put a chosen gap on a loopback exit; the rest of each label stays the
/// audit's.
pub fn set_gaps(database: &str, gaps: &[(&str, Option<u32>)]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let store = exitvoice_store::Store::open(Path::new(database))
            .await
            .expect("open the labels database");
        let mut doc = store
            .latest_labels()
            .await
            .expect("read the labels")
            .expect("an audit wrote labels");
        for (name, gap) in gaps {
            let label = doc
                .exits
                .iter_mut()
                .find(|label| label.name == *name)
                .unwrap_or_else(|| panic!("no label of {name}"));
            label.latency.round_trip = gap.map(|us| exitvoice_schema::RoundTripLabel {
                samples: 3,
                gap_min_us: us,
                gap_p50_us: us,
                excess_gap_us: us,
                reason: format!("set by the test: {us} µs"),
                ..Default::default()
            });
        }
        store.insert_labels(&doc).await.expect("store the labels");
    });
}

/// `exitvoice lease ARGS…` against `broker` with `token`: its exit code and the JSON it printed
/// (`null` when it printed none).
pub fn lease(broker: &str, token: &str, args: &[&str]) -> (i32, serde_json::Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .args(["lease", "--broker", broker])
        .args(args)
        .env("EXITVOICE_BROKER_TOKEN", token)
        .output()
        .expect("run exitvoice lease");
    let answer = serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null);
    (output.status.code().unwrap_or(-1), answer)
}
