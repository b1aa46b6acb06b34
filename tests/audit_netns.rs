//! Exits on other real stacks. Each exit is a tinyproxy in a network namespace of the
//! test's own, with its own TCP sysctls; the echo server and the auditor run in a third one,
//! which each exit reaches over a veth pair. Every address lives inside these namespaces, and
//! the test removes them (and the processes in them) when it ends.
//!
//! The expected values are the kernels' settings: the stock namespace's own `sysctl` readings,
//! and the other's as the test set them (`ip_default_ttl=128`, no timestamps, no SACK, no
//! window scaling). The labels must carry each stack's TTL and options in their p0f signature
//! and tell the two apart. The echo names each stack's operating system with Debian's p0f
//! database (`--p0f-db`), checked against `p0f -r` on a capture of the same SYNs, and a
//! preflight that expects Linux passes only the exits whose stack p0f calls Linux. Needs root
//! (`ip netns`, dumpcap), as the test command runs.

mod support;
mod syn_support;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::netns::{in_ns, ip, Namespaces};
use syn_support::Capture;

/// The echo server's address, on the core namespace's loopback.
const ECHO_IP: &str = "10.99.0.1";
/// Debian's p0f signature database (package p0f).
const P0F_DB: &str = "/etc/p0f/p0f.fp";

/// `sysctl -n KEY` in `ns`.
fn sysctl(ns: &str, key: &str) -> String {
    let out = in_ns(ns, "sysctl")
        .args(["-n", key])
        .output()
        .expect("sysctl");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// tinyproxy in `ns` on `listen`:8888, allowing the core namespace's addresses.
fn tinyproxy(spaces: &mut Namespaces, ns: &str, listen: &str, dir: &Path) {
    let conf = dir.join(format!("{ns}.conf"));
    std::fs::write(
        &conf,
        format!(
            "User nobody\nGroup nogroup\nPort 8888\nListen {listen}\nTimeout 600\n\
             MaxClients 50\nAllow 10.99.0.0/16\nDisableViaHeader Yes\n"
        ),
    )
    .unwrap();
    let mut command = in_ns(ns, "tinyproxy");
    command
        .arg("-d")
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    spaces.spawn(command);
    // Up once it accepts on its address (seen from inside its namespace).
    let started = Instant::now();
    while !in_ns(ns, "bash")
        .args(["-c", &format!("exec 3<>/dev/tcp/{listen}/8888")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "tinyproxy in {ns}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The fields of an exit's p0f signature (`ver:ittl:olen:mss:wsize,scale:olayout:quirks:pclass`).
fn p0f(label: &Value) -> Vec<String> {
    label["stack"]["p0f"]
        .as_str()
        .unwrap_or_else(|| panic!("no stack: {label}"))
        .split(':')
        .map(str::to_owned)
        .collect()
}

#[test]
fn exits_on_other_kernels_settings_get_their_own_stack() {
    let work = tempfile::tempdir().unwrap();
    // tinyproxy drops to `nobody`, which must read its configuration.
    std::fs::set_permissions(
        work.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let tag = format!("ev{}", std::process::id() % 100_000);
    let mut spaces = Namespaces::new();
    let core = spaces.add(format!("{tag}o"));
    ip(&[
        "-n",
        &core,
        "addr",
        "add",
        &format!("{ECHO_IP}/32"),
        "dev",
        "lo",
    ]);
    let stock = spaces.add(format!("{tag}a"));
    let tuned = spaces.add(format!("{tag}b"));
    spaces.link(&core, &stock, ("10.99.1.1", "10.99.1.2"), ECHO_IP);
    spaces.link(&core, &tuned, ("10.99.2.1", "10.99.2.2"), ECHO_IP);
    let set = in_ns(&tuned, "sysctl")
        .args([
            "-q",
            "-w",
            "net.ipv4.ip_default_ttl=128",
            "net.ipv4.tcp_timestamps=0",
            "net.ipv4.tcp_sack=0",
            "net.ipv4.tcp_window_scaling=0",
        ])
        .status()
        .unwrap();
    assert!(set.success(), "sysctl in {tuned}");
    tinyproxy(&mut spaces, &stock, "10.99.1.2", work.path());
    tinyproxy(&mut spaces, &tuned, "10.99.2.2", work.path());
    let (port, pin) = spaces.echo(&core, ECHO_IP, work.path(), &["--p0f-db", P0F_DB]);
    // The SYNs each exit sends the echo, as they cross into the core namespace.
    let captures = [&stock, &tuned]
        .map(|exit| Capture::start_on(Some(core.as_str()), &format!("{exit}c"), &[port]));

    let exits = work.path().join("exits.toml");
    std::fs::write(
        &exits,
        format!(
            "[echo]\nurl = \"https://{ECHO_IP}:{port}\"\nspki_sha256 = \"{pin}\"\n\n\
             [[exits]]\nname = \"stock\"\nurl = \"http://10.99.1.2:8888\"\n\n\
             [[exits]]\nname = \"tuned\"\nurl = \"http://10.99.2.2:8888\"\n"
        ),
    )
    .unwrap();
    let labels_path = work.path().join("labels.json");
    let audit = |extra: &[&str]| {
        in_ns(&core, env!("CARGO_BIN_EXE_exitvoice"))
            .arg("audit")
            .arg("--exits")
            .arg(&exits)
            .arg("--db")
            .arg(work.path().join("audit.db"))
            .arg("--labels-out")
            .arg(&labels_path)
            .args(["--once", "--samples", "2", "--no-quic", "--spacing", "50ms"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = audit(&[]);
    assert!(
        out.status.success(),
        "audit: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let [stock_capture, tuned_capture] = captures.map(Capture::stop);
    let labels: Value = serde_json::from_slice(&std::fs::read(&labels_path).unwrap()).unwrap();
    support::assert_valid_labels(&labels);
    let exit = |name: &str| support::exit_label(&labels, name).clone();
    let (stock_label, tuned_label) = (exit("stock"), exit("tuned"));

    // The stock kernel: its own default TTL, and the options its sysctls turn on.
    let stock_sig = p0f(&stock_label);
    assert_eq!(
        stock_sig[1],
        format!("{}+0", sysctl(&stock, "net.ipv4.ip_default_ttl")),
        "{stock_label}"
    );
    let options: Vec<&str> = stock_sig[5].split(',').collect();
    for (key, option) in [
        ("net.ipv4.tcp_sack", "sok"),
        ("net.ipv4.tcp_timestamps", "ts"),
        ("net.ipv4.tcp_window_scaling", "ws"),
    ] {
        assert_eq!(
            options.contains(&option),
            sysctl(&stock, key) != "0",
            "{key} and the option {option}: {stock_sig:?}"
        );
    }
    // The tuned one: TTL 128, and an MSS alone (no SACK, timestamps or window scale).
    let tuned_sig = p0f(&tuned_label);
    assert_eq!(tuned_sig[1], "128+0", "{tuned_label}");
    assert_eq!(tuned_sig[5], "mss", "{tuned_label}");
    assert!(
        tuned_sig[4].ends_with(",0"),
        "no window scale: {tuned_sig:?}"
    );
    // Two stacks, two voices; each exit keeps its own.
    assert_ne!(stock_label["stack"]["voice"], tuned_label["stack"]["voice"]);
    for label in [&stock_label, &tuned_label] {
        assert_eq!(label["flags"]["stack_changed"], false, "{label}");
    }
    let by_stack = labels["pool"]["by_stack"].as_object().unwrap();
    assert_eq!(by_stack.len(), 2, "{by_stack:?}");

    // The operating system each stack shows: the one `p0f -r` names for the same SYNs (one
    // name per exit: every SYN of a stack is alike).
    let p0f_os = |file: &Path| {
        let mut names: Vec<Option<String>> =
            syn_support::p0f_os_names(file).into_values().collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 1, "one stack, one name: {names:?}");
        names.remove(0)
    };
    let stock_os = p0f_os(&stock_capture.file);
    let tuned_os = p0f_os(&tuned_capture.file);
    assert!(stock_os.is_some(), "p0f knows the stock Linux stack");
    assert_eq!(
        stock_label["stack"]["os"].as_str(),
        stock_os.as_deref(),
        "{stock_label}"
    );
    assert_eq!(
        tuned_label["stack"]["os"].as_str(),
        tuned_os.as_deref(),
        "{tuned_label}"
    );

    // A preflight that expects Linux: the stock stack passes; the tuned one fails, named.
    let preflight = audit(&["--preflight", "--min-pass", "0", "--expect-os", "linux"]);
    let table = String::from_utf8_lossy(&preflight.stdout).into_owned();
    let row = |name: &str| {
        table
            .lines()
            .find(|line| {
                let mut words = line.split_whitespace();
                words.next() == Some(name) && matches!(words.next(), Some("pass" | "FAIL"))
            })
            .unwrap_or_else(|| panic!("no row for {name}:\n{table}"))
            .to_owned()
    };
    assert!(!row("stock").contains("expected linux"), "{table}");
    let tuned_linux = tuned_os
        .as_deref()
        .is_some_and(|os| os.to_ascii_lowercase().contains("linux"));
    assert_eq!(
        row("tuned").contains("expected linux"),
        !tuned_linux,
        "{table}"
    );
}
