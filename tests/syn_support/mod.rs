//! Shared by the SYN tests: a loopback capture taken by dumpcap while the test's own clients
//! connect, and the independent readings of its SYNs: tshark's fields and `p0f -r`'s
//! `raw_sig`. Needs dumpcap, tshark and p0f (scripts/install-test-deps.sh) and the right to
//! capture on `lo` (root, as the test command runs).
#![allow(dead_code)] // Each test file uses its own part of this module.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// dumpcap writing the SYNs to and from `ports` on `lo` into a pcapng file.
pub struct Capture {
    child: Child,
    /// The capture file.
    pub file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Capture {
    /// Starts dumpcap on `lo` for TCP to or from `ports`, and waits until it captures.
    pub fn start(ports: &[u16]) -> Self {
        Self::start_on(None, "lo", ports)
    }

    /// [`Capture::start`] on `interface`, in network namespace `netns` when given.
    pub fn start_on(netns: Option<&str>, interface: &str, ports: &[u16]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("syn.pcapng");
        let filter = ports
            .iter()
            .map(|port| format!("tcp port {port}"))
            .collect::<Vec<_>>()
            .join(" or ");
        let mut command = match netns {
            Some(ns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", ns, "dumpcap"]);
                command
            }
            None => Command::new("dumpcap"),
        };
        let mut child = command
            .args(["-q", "-i", interface, "-f", &filter, "-w"])
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dumpcap is installed (scripts/install-test-deps.sh)");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(20))
                .expect("dumpcap said it is capturing");
            if line.starts_with("Capturing on") {
                break;
            }
        }
        // dumpcap says so as it opens the interface, a moment before its filter is in place.
        std::thread::sleep(Duration::from_secs(1));
        Self {
            child,
            file,
            _dir: dir,
        }
    }

    /// Stops dumpcap (SIGTERM, so it writes its last block) and returns the file.
    pub fn stop(mut self) -> CaptureFile {
        // Give the last SYNs time to reach the ring buffer before the signal.
        std::thread::sleep(Duration::from_millis(500));
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let _ = self.child.wait();
        CaptureFile {
            file: self.file.clone(),
            _capture: self,
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A finished capture.
pub struct CaptureFile {
    /// The pcapng file.
    pub file: PathBuf,
    _capture: Capture,
}

/// tshark's reading of one SYN.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TsharkSyn {
    /// `tcp.srcport`.
    pub src_port: u16,
    /// `ip.ttl`, or `ipv6.hlim`.
    pub ttl: u8,
    /// `ip.flags.df` (false for IPv6).
    pub df: bool,
    /// `tcp.window_size_value`.
    pub window: u16,
    /// `tcp.options.mss_val`.
    pub mss: Option<u16>,
    /// `tcp.options.wscale.shift`.
    pub window_scale: Option<u8>,
    /// `tcp.option_kind`, every option in order, up to the first end-of-options (tshark
    /// dissects each zero byte of the padding after it as one more: RFC 9293 section 3.2 makes
    /// them padding, and p0f counts them as `eol+n`).
    pub option_kinds: Vec<u8>,
}

/// Every client SYN (SYN set, ACK clear) in `file`, as tshark dissects it.
pub fn tshark_syns(file: &Path) -> Vec<TsharkSyn> {
    let fields = [
        "tcp.srcport",
        "ip.ttl",
        "ipv6.hlim",
        "ip.flags.df",
        "tcp.window_size_value",
        "tcp.options.mss_val",
        "tcp.options.wscale.shift",
        "tcp.option_kind",
    ];
    let mut command = Command::new("tshark");
    command.args(["-r"]).arg(file).args([
        "-Y",
        "tcp.flags.syn == 1 && tcp.flags.ack == 0",
        "-T",
        "fields",
        "-E",
        "separator=;",
        "-E",
        "aggregator=,",
    ]);
    for field in fields {
        command.args(["-e", field]);
    }
    let output = command.output().expect("tshark is installed");
    assert!(output.status.success(), "tshark: {output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let cells: Vec<&str> = line.split(';').collect();
            let cell = |i: usize| cells.get(i).copied().unwrap_or_default();
            let number = |text: &str| text.parse::<u32>().ok();
            TsharkSyn {
                src_port: number(cell(0))
                    .and_then(|n| u16::try_from(n).ok())
                    .unwrap_or(0),
                ttl: number(cell(1))
                    .or_else(|| number(cell(2)))
                    .and_then(|n| u8::try_from(n).ok())
                    .unwrap_or(0),
                df: matches!(cell(3), "1" | "True" | "true"),
                window: number(cell(4))
                    .and_then(|n| u16::try_from(n).ok())
                    .unwrap_or(0),
                mss: number(cell(5)).and_then(|n| u16::try_from(n).ok()),
                window_scale: number(cell(6)).and_then(|n| u8::try_from(n).ok()),
                option_kinds: up_to_eol(cell(7).split(',').filter_map(|kind| kind.parse().ok())),
            }
        })
        .collect()
}

/// The kinds up to and with the first end-of-options (kind 0).
fn up_to_eol(kinds: impl Iterator<Item = u8>) -> Vec<u8> {
    let mut out = Vec::new();
    for kind in kinds {
        out.push(kind);
        if kind == 0 {
            break;
        }
    }
    out
}

/// `p0f -r file`'s `raw_sig` of every client SYN, by the client's port.
pub fn p0f_signatures(file: &Path) -> HashMap<u16, String> {
    p0f_field(file, "raw_sig")
}

/// `p0f -r file`'s `os` of every client SYN, by the client's port (`None` for p0f's `???`).
pub fn p0f_os_names(file: &Path) -> HashMap<u16, Option<String>> {
    p0f_field(file, "os")
        .into_iter()
        .map(|(port, os)| (port, (os != "???").then_some(os)))
        .collect()
}

/// One field of p0f's report of every client SYN in `file`, by the client's port.
fn p0f_field(file: &Path, field: &str) -> HashMap<u16, String> {
    let output = Command::new("p0f")
        .arg("-r")
        .arg(file)
        .output()
        .expect("p0f is installed (scripts/install-test-deps.sh)");
    assert!(output.status.success(), "p0f: {output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    let mut signatures = HashMap::new();
    let mut port = None;
    for line in text.lines() {
        // `.-[ 127.0.0.1/54321 -> 127.0.0.1/8443 (syn) ]-` opens a SYN's block.
        if let Some(header) = line.strip_prefix(".-[ ") {
            port = header
                .ends_with("(syn) ]-")
                .then(|| header.split(" -> ").next())
                .flatten()
                .and_then(|client| client.rsplit('/').next())
                .and_then(|port| port.parse::<u16>().ok());
        }
        // `| os       = Linux 3.11 and newer`: the name padded to nine columns.
        let value = line
            .strip_prefix("| ")
            .and_then(|rest| rest.split_once(" = "))
            .filter(|(name, _)| name.trim_end() == field);
        if let (Some(client), Some((_, value))) = (port, value) {
            signatures.insert(client, value.to_owned());
        }
    }
    signatures
}
