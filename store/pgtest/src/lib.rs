//! A throwaway PostgreSQL cluster for tests: Debian's server binaries (`initdb`, `pg_ctl`; the
//! test command installs the `postgresql` package), run as an unprivileged user (`postgres`
//! when the tests run as root, which `initdb` refuses) in a temporary directory, listening on
//! loopback on a free port. One cluster per test process, started on first use; a watchdog
//! stops it and removes its directory when the process ends. Each test gets a database of its
//! own, so tests run in parallel without seeing each other's rows.
//!
//! Connections from loopback need the password (`scram-sha-256`), so the URLs the tests use
//! carry one, as a fleet's would.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// The role the tests connect as.
const USER: &str = "exitvoice";

/// A running cluster.
pub struct Cluster {
    port: u16,
    password: String,
    socket_dir: PathBuf,
    bin: PathBuf,
    /// A cluster of one test's own ([`private_cluster`], [`Cluster::standby`]) is stopped
    /// (`-m immediate`) on drop; the shared one by its watchdog.
    private: bool,
}

impl Cluster {
    /// The loopback port the cluster listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The password of the role in [`Cluster::url`].
    pub fn password(&self) -> &str {
        &self.password
    }

    /// `postgres://exitvoice:<password>@127.0.0.1:<port>/<database>`.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://{USER}:{}@127.0.0.1:{}/{database}",
            self.password, self.port
        )
    }

    /// Creates an empty database named after `hint` (made unique) and returns its URL.
    ///
    /// # Panics
    /// If `createdb` fails.
    pub fn fresh_database(&self, hint: &str) -> String {
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
        let name = format!("t{}_{clean}", NEXT.fetch_add(1, Ordering::Relaxed));
        let status = Command::new(self.bin.join("createdb"))
            .args(["-h"])
            .arg(&self.socket_dir)
            .args(["-p", &self.port.to_string(), "-U", USER, &name])
            .status()
            .expect("run createdb");
        assert!(status.success(), "createdb {name} failed: {status}");
        self.url(&name)
    }

    /// Stops the server (`pg_ctl stop -m fast`: its connections are closed, new ones refused),
    /// keeping its data, until [`Cluster::start_again`]. Every test of the process loses the
    /// server meanwhile, so a test doing it must not run beside others that use it.
    ///
    /// # Panics
    /// If `pg_ctl stop` fails.
    pub fn stop(&self) {
        let stopped = as_server_user(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.socket_dir.join("data"))
            .args(["-m", "fast", "-w", "stop"])
            .stdout(Stdio::null())
            .output()
            .expect("run pg_ctl stop");
        assert!(
            stopped.status.success(),
            "pg_ctl stop failed: {}",
            String::from_utf8_lossy(&stopped.stderr)
        );
    }

    /// Starts the stopped server again on the same port, with its data.
    ///
    /// # Panics
    /// If it does not start.
    pub fn start_again(&self) {
        pg_ctl_start(&self.bin, &self.socket_dir, self.port);
    }

    /// Stops the server as a crash would (`pg_ctl stop -m immediate`: no checkpoint, its
    /// processes gone at once).
    ///
    /// # Panics
    /// If `pg_ctl stop` fails.
    pub fn crash(&self) {
        self.pg_ctl(&["-m", "immediate", "-w", "stop"]);
    }

    /// Promotes a standby to a primary (`pg_ctl promote`), returning once it accepts writes.
    ///
    /// # Panics
    /// If `pg_ctl promote` fails.
    pub fn promote(&self) {
        self.pg_ctl(&["-w", "promote"]);
    }

    /// A streaming standby of this cluster (asynchronous, as PostgreSQL's replication is by
    /// default), its base backup taken and its WAL streamed through loopback port `via` (the
    /// primary's own port, or a relay the test can cut), on a free port of its own. Stopped
    /// on drop.
    ///
    /// # Panics
    /// If the backup fails or the standby does not start.
    pub fn standby(&self, via: u16) -> Cluster {
        let dir = new_dir();
        let backup = as_server_user(&self.bin.join("pg_basebackup"))
            .arg("-D")
            .arg(dir.join("data"))
            .args([
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
                "-h",
                "127.0.0.1",
                "-U",
                USER,
            ])
            .args(["-p", &via.to_string()])
            .env("PGPASSWORD", &self.password)
            .output()
            .expect("run pg_basebackup");
        assert!(
            backup.status.success(),
            "pg_basebackup failed: {}",
            String::from_utf8_lossy(&backup.stderr)
        );
        let port = free_port();
        pg_ctl_start(&self.bin, &dir, port);
        watch(&self.bin, &dir.join("data"), &dir);
        Cluster {
            port,
            password: self.password.clone(),
            socket_dir: dir,
            bin: self.bin.clone(),
            private: true,
        }
    }

    /// Runs `pg_ctl -D <data> args…` as the server's user.
    fn pg_ctl(&self, args: &[&str]) {
        let done = as_server_user(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.socket_dir.join("data"))
            .args(args)
            .stdout(Stdio::null())
            .output()
            .expect("run pg_ctl");
        assert!(
            done.status.success(),
            "pg_ctl {args:?} failed: {}",
            String::from_utf8_lossy(&done.stderr)
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.private {
            let _ = as_server_user(&self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(self.socket_dir.join("data"))
                .args(["-m", "immediate", "stop"])
                .output();
            let _ = std::fs::remove_dir_all(&self.socket_dir);
        }
    }
}

/// A cluster of the caller's own, which WAL can be streamed from ([`Cluster::standby`]).
/// Dropping it stops it.
///
/// # Panics
/// As [`cluster`].
pub fn private_cluster() -> Cluster {
    start(true)
}

/// The test process's cluster, started on first call.
///
/// # Panics
/// If the PostgreSQL server binaries are missing or the cluster does not start; the message
/// says how to install them.
pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| start(false))
}

/// A fresh database on the test process's cluster: shorthand for
/// `cluster().fresh_database(hint)`.
pub fn fresh_database(hint: &str) -> String {
    cluster().fresh_database(hint)
}

/// The newest installed server's binaries (`/usr/lib/postgresql/<major>/bin`).
fn server_bin() -> PathBuf {
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.path())))
        .filter(|(_, p)| p.join("bin/initdb").exists())
        .max_by_key(|(major, _)| *major);
    match newest {
        Some((_, path)) => path.join("bin"),
        None => panic!(
            "PostgreSQL's server is not installed (no /usr/lib/postgresql/*/bin/initdb): \
             `apt-get install postgresql`, or run scripts/test.sh, which installs it"
        ),
    }
}

/// Whether this process runs as root, as tests in containers and CI often do.
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// `program args…`, as the unprivileged `postgres` user when running as root.
fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A new directory for a cluster, the server's user's.
fn new_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "exitvoice-pg-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).expect("cluster directory");
    if is_root() {
        let status = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status()
            .expect("run chown");
        assert!(status.success(), "chown of {} failed", dir.display());
    }
    dir
}

fn start(private: bool) -> Cluster {
    let bin = server_bin();
    let dir = new_dir();
    let data = dir.join("data");
    let password = format!("pw-{:016x}", rand::random::<u64>());
    std::fs::write(dir.join("pwfile"), &password).expect("password file");
    // Local (socket) connections are trusted, for createdb; TCP needs the password.
    let initdb = as_server_user(&bin.join("initdb"))
        .arg("-D")
        .arg(&data)
        .args([
            "-U",
            USER,
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
        ])
        .arg(format!("--pwfile={}", dir.join("pwfile").display()))
        .args(["-E", "UTF8", "--no-sync"])
        .stdout(Stdio::null())
        .output()
        .expect("run initdb");
    assert!(
        initdb.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&initdb.stderr)
    );
    let port = free_port();
    pg_ctl_start(&bin, &dir, port);
    watch(&bin, &data, &dir);
    Cluster {
        port,
        password,
        socket_dir: dir,
        bin,
        private,
    }
}

/// Starts the cluster in `dir` (its data in `dir/data`) on `port`, and waits until it answers.
fn pg_ctl_start(bin: &Path, dir: &Path, port: u16) {
    // Throwaway: no fsync; room for many test connections.
    let options = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off \
         -c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
        dir.display()
    );
    let started = as_server_user(&bin.join("pg_ctl"))
        .arg("-D")
        .arg(dir.join("data"))
        .arg("-l")
        .arg(dir.join("server.log"))
        .args(["-o", &options, "-w", "-t", "60", "start"])
        .stdout(Stdio::null())
        .output()
        .expect("run pg_ctl start");
    assert!(
        started.status.success(),
        "pg_ctl start failed: {}\n{}",
        String::from_utf8_lossy(&started.stderr),
        std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
    );
}

/// Stops the cluster and removes its directory once this process has ended, however it ends.
#[allow(
    clippy::zombie_processes,
    reason = "the watchdog outlives this process by design: nothing here could wait for it"
)]
fn watch(bin: &Path, data: &Path, dir: &Path) {
    let pg_ctl = bin.join("pg_ctl");
    let stop = if is_root() {
        format!(
            "runuser -u postgres -- '{}' -D '{}' -m immediate stop",
            pg_ctl.display(),
            data.display()
        )
    } else {
        format!(
            "'{}' -D '{}' -m immediate stop",
            pg_ctl.display(),
            data.display()
        )
    };
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; {stop} >/dev/null 2>&1; rm -rf '{dir}'",
        pid = std::process::id(),
        dir = dir.display()
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the cluster's watchdog");
}
