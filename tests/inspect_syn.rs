//! `exitvoice inspect` on the SYNs of other operating systems, from public captures (the FoxIO
//! JA4 captures in `protocol/tests/data/ja4/pcap/`, see its SOURCE-pcap.md): the macOS SYN of
//! `macos_tcp_flags.pcap`, the Windows-shaped SYNs of `latest.pcapng` and `tls3.pcapng`, and an
//! IPv6 SYN of `ipv6.pcapng`.
//!
//! Expected values are read from the same files by independent tools at test time: `p0f -r`'s
//! `raw_sig` (Debian's p0f 3.09b) and tshark's dissection. Needs p0f and tshark
//! (scripts/install-test-deps.sh).

mod syn_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use syn_support::{p0f_os_names, p0f_signatures, tshark_syns};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("protocol/tests/data/ja4/pcap")
        .join(name)
}

/// `exitvoice inspect FILE`'s connections.
fn inspect(file: &Path) -> Vec<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .arg("inspect")
        .arg(file)
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{output:?}");
    let value: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    value.as_array().cloned().expect("an array of connections")
}

/// The client port of a connection's `client` (`ip:port` or `[ip]:port`).
fn client_port(connection: &Value) -> u16 {
    connection["client"]
        .as_str()
        .and_then(|client| client.rsplit(':').next())
        .and_then(|port| port.parse().ok())
        .expect("a client address")
}

#[test]
fn syns_of_other_stacks_read_as_p0f_and_tshark_read_them() {
    for (file, ip_version) in [
        ("macos_tcp_flags.pcap", 4),
        ("latest.pcapng", 4),
        ("tls3.pcapng", 4),
        ("ipv6.pcapng", 6),
    ] {
        let path = data(file);
        let p0f = p0f_signatures(&path);
        let tshark = tshark_syns(&path);
        let connections = inspect(&path);
        let mut compared = 0;
        for connection in &connections {
            let tcp = &connection["tcp"];
            if tcp.is_null() {
                // A connection whose SYN is not in the capture says so.
                assert_eq!(connection["tcp_absent"]["reason"], "not_captured", "{file}");
                continue;
            }
            let port = client_port(connection);
            let signature = p0f
                .get(&port)
                .unwrap_or_else(|| panic!("{file}: p0f saw the SYN from {port}: {p0f:?}"));
            assert_eq!(tcp["p0f"], signature.as_str(), "{file}: port {port}");
            let syn = tshark
                .iter()
                .find(|syn| syn.src_port == port)
                .unwrap_or_else(|| panic!("{file}: tshark saw the SYN from {port}"));
            assert_eq!(tcp["ip_version"], ip_version, "{file}");
            assert_eq!(tcp["ttl"], syn.ttl, "{file}: {tcp}");
            assert_eq!(tcp["df"], syn.df, "{file}: {tcp}");
            assert_eq!(tcp["window"], syn.window, "{file}: {tcp}");
            assert_eq!(tcp["mss"], json!(syn.mss), "{file}: {tcp}");
            assert_eq!(
                tcp["window_scale"],
                json!(syn.window_scale),
                "{file}: {tcp}"
            );
            assert_eq!(tcp["options"], json!(syn.option_kinds), "{file}: {tcp}");
            compared += 1;
        }
        assert!(compared > 0, "{file}: no SYN compared in {connections:?}");
    }
}

/// The stacks the captures come from have voices of their own: the Windows-shaped SYNs of two
/// captures share one, the macOS SYN has another (what tells them apart is what p0f's
/// signatures say differs: window form, scale and option layout).
#[test]
fn windows_and_macos_syns_have_different_voices() {
    let voices = |file: &str| -> Vec<String> {
        inspect(&data(file))
            .iter()
            .filter_map(|c| c["tcp"]["voice_id"].as_str().map(str::to_owned))
            .collect()
    };
    let windows: Vec<String> = [voices("latest.pcapng"), voices("tls3.pcapng")].concat();
    let macos = voices("macos_tcp_flags.pcap");
    assert!(!windows.is_empty() && !macos.is_empty());
    assert!(
        windows.iter().all(|voice| voice == &windows[0]),
        "{windows:?}"
    );
    assert!(macos.iter().all(|voice| voice != &windows[0]), "{macos:?}");
}

/// `exitvoice diff` between a Windows-shaped and the macOS capture names the TCP fields that
/// differ, with the values p0f's signatures of the two SYNs hold (`wsize,scale` and `olayout`).
#[test]
fn diff_names_the_tcp_fields_p0f_sees_differ() {
    let (windows, macos) = (data("latest.pcapng"), data("macos_tcp_flags.pcap"));
    let output = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .args(["diff", "--json"])
        .arg(&windows)
        .arg(&macos)
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let changes: Vec<Value> = serde_json::from_slice(&output.stdout).expect("JSON");
    let tcp = |field: &str| {
        changes
            .iter()
            .find(|c| c["layer"] == "tcp" && c["field"] == field)
            .cloned()
            .unwrap_or_else(|| panic!("a tcp {field} change in {changes:?}"))
    };
    // The first connection of each capture, as diff takes it, and p0f's signature of its SYN.
    let signature = |file: &Path| {
        let port = client_port(&inspect(file)[0]);
        p0f_signatures(file).remove(&port).expect("p0f saw the SYN")
    };
    let (before, after) = (signature(&windows), signature(&macos));
    let field = |sig: &str, i: usize| sig.split(':').nth(i).unwrap_or_default().to_owned();
    let window = |sig: &str| {
        field(sig, 4)
            .split(',')
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let scale = |sig: &str| {
        field(sig, 4)
            .split(',')
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(tcp("window")["before"], window(&before));
    assert_eq!(tcp("window")["after"], window(&after));
    assert_eq!(tcp("window_scale")["before"], scale(&before));
    assert_eq!(tcp("window_scale")["after"], scale(&after));
    assert_eq!(tcp("options")["before"], field(&before, 5));
    assert_eq!(tcp("options")["after"], field(&after, 5));
}

/// With Debian's p0f database (`--p0f-db /etc/p0f/p0f.fp`), each SYN's `tcp.os` is the OS
/// `p0f -r` names with the same database (`null` where p0f says `???`).
#[test]
fn os_names_from_the_p0f_database_are_p0f_s() {
    for file in [
        "macos_tcp_flags.pcap",
        "latest.pcapng",
        "tls3.pcapng",
        "ipv6.pcapng",
    ] {
        let path = data(file);
        let names = p0f_os_names(&path);
        let output = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
            .args(["inspect", "--p0f-db", "/etc/p0f/p0f.fp"])
            .arg(&path)
            .output()
            .expect("the binary runs");
        assert!(output.status.success(), "{output:?}");
        let connections: Vec<Value> = serde_json::from_slice(&output.stdout).expect("JSON");
        let mut named = 0;
        for connection in connections.iter().filter(|c| !c["tcp"].is_null()) {
            let port = client_port(connection);
            let want = names
                .get(&port)
                .unwrap_or_else(|| panic!("{file}: p0f saw {port}"));
            assert_eq!(connection["tcp"]["os"], json!(want), "{file}: port {port}");
            named += usize::from(want.is_some());
        }
        if file != "ipv6.pcapng" {
            assert!(named > 0, "{file}: p0f named no OS: {names:?}");
        }
    }
}
