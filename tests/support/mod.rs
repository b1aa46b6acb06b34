//! Shared helpers of the auditor's end-to-end tests: real proxies on loopback, started by
//! `tests/proxies/proxy.sh` in their own temporary directory and stopped (by PID) on drop.
#![allow(dead_code)]

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

/// A free loopback TCP port (bound once, then released).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
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
    /// Starts `kind` (`squid`, `tinyproxy`, `dante`, `mitmproxy`, `haproxy`) with extra args.
    pub fn start(kind: &'static str, args: &[&str]) -> Self {
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
        assert!(
            output.status.success(),
            "{kind} did not start: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        Self {
            port,
            name: kind,
            dir,
        }
    }

    /// squid with Basic auth [`USER`]:[`PASSWORD`].
    pub fn squid() -> Self {
        Self::start("squid", &[USER, PASSWORD])
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

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("stop")
            .arg(self.dir.path())
            .arg(self.name)
            .status();
    }
}
