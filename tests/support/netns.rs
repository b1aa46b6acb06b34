//! Network namespaces of a test's own (`ip netns`), for exits and servers with their own
//! kernel settings: each is deleted, with every process left in it, when the test ends. Every
//! address a test gives lives inside these namespaces. Needs root, as the test command runs.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Runs `ip ARGS`; panics with its stderr when it fails.
pub fn ip(args: &[&str]) {
    let output = Command::new("ip")
        .args(args)
        .output()
        .expect("ip (iproute2)");
    assert!(
        output.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `ip netns exec NS PROGRAM`.
pub fn in_ns(ns: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new("ip");
    command.args(["netns", "exec", ns]).arg(program);
    command
}

/// The namespaces of one test run: deleted, with every process in them, on drop.
pub struct Namespaces {
    names: Vec<String>,
    children: Vec<Child>,
}

impl Namespaces {
    pub fn new() -> Self {
        Self {
            names: Vec::new(),
            children: Vec::new(),
        }
    }

    /// A new namespace with its loopback up.
    pub fn add(&mut self, name: String) -> String {
        ip(&["netns", "add", &name]);
        self.names.push(name.clone());
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        name
    }

    /// A veth pair from `core` (`core_ip`/24) to `exit` (`exit_ip`/24), and the exit's route to
    /// `service` (an address on the core's loopback) through it.
    pub fn link(&self, core: &str, exit: &str, (core_ip, exit_ip): (&str, &str), service: &str) {
        let (core_end, exit_end) = (format!("{exit}c"), format!("{exit}x"));
        ip(&[
            "link", "add", &core_end, "netns", core, "type", "veth", "peer", "name", &exit_end,
            "netns", exit,
        ]);
        for (ns, end, address) in [(core, &core_end, core_ip), (exit, &exit_end, exit_ip)] {
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{address}/24"),
                "dev",
                end,
            ]);
            ip(&["-n", ns, "link", "set", end, "up"]);
        }
        ip(&[
            "-n",
            exit,
            "route",
            "add",
            &format!("{service}/32"),
            "via",
            core_ip,
        ]);
    }

    /// `exitvoice serve` in `ns` on `address` (port chosen by the kernel) with `extra` flags,
    /// its database and log in `dir`: its port and certificate pin.
    pub fn echo(&mut self, ns: &str, address: &str, dir: &Path, extra: &[&str]) -> (u16, String) {
        let mut command = in_ns(ns, env!("CARGO_BIN_EXE_exitvoice"));
        command
            .current_dir(dir)
            .args(["serve", "--listen", &format!("{address}:0")])
            .args(extra)
            .arg("--db")
            .arg(dir.join("echo.db"))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("serve.log")).expect("log file"));
        let child = self.spawn(command);
        let stdout = child.stdout.take().expect("stdout");
        let (mut port, mut pin) = (None, None);
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(addr) = line.split("listening on https://").nth(1) {
                let addr: std::net::SocketAddr = addr.trim().parse().expect("socket address");
                port = Some(addr.port());
            }
            if let Some(rest) = line.split("certificate pin ").nth(1) {
                pin = rest.split_whitespace().next().map(str::to_owned);
                break;
            }
        }
        let log = || std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
        (
            port.unwrap_or_else(|| panic!("echo port: {}", log())),
            pin.unwrap_or_else(|| panic!("echo pin: {}", log())),
        )
    }

    /// Runs `command` (an [`in_ns`] one), killed when the namespaces go.
    pub fn spawn(&mut self, mut command: Command) -> &mut Child {
        let child = command.spawn().expect("spawn in a namespace");
        self.children.push(child);
        self.children.last_mut().expect("just pushed")
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for name in &self.names {
            // Whatever else still runs inside goes too, then the namespace (and its veth ends).
            if let Ok(out) = Command::new("ip").args(["netns", "pids", name]).output() {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-9", pid]).status();
                }
            }
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}
