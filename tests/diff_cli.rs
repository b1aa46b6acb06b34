//! `exitvoice diff` over the real captures in `captures/`: GREASE and Chrome's extension-order
//! permutation are no change, and a change is told field by field. Expected values come from
//! each capture's `capture.json` (tshark's JA3 string and HTTP/2 dissector), not from our code.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn capture(client: &str, file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("captures")
        .join(client)
        .join(file)
}

/// `hello,prefix` of one recorded connection.
fn connection(client: &str, conn: &str) -> String {
    format!(
        "{},{}",
        capture(client, &format!("{conn}.hello.bin")).display(),
        capture(client, &format!("{conn}.prefix.bin")).display()
    )
}

/// The reference facts of `conn1` of `client`.
fn expected(client: &str) -> Value {
    let text = std::fs::read(capture(client, "capture.json")).unwrap();
    let json: Value = serde_json::from_slice(&text).unwrap();
    json["connections"][0]["expected"].clone()
}

fn diff(a: &str, b: &str, json: bool) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_exitvoice"));
    command.arg("diff").arg(a).arg(b);
    if json {
        command.arg("--json");
    }
    let output = command.output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The `n`th part of a JA3 string as `0x`-hex codes (JA3 leaves GREASE out).
fn ja3_codes(ja3: &str, n: usize) -> Vec<String> {
    ja3.split(',')
        .nth(n)
        .unwrap()
        .split('-')
        .filter(|c| !c.is_empty())
        .map(|c| format!("0x{:04x}", c.parse::<u16>().unwrap()))
        .collect()
}

#[test]
fn two_connections_of_one_chromium_are_the_same_voice() {
    let chromium = [
        connection("chromium", "conn1"),
        connection("chromium", "conn2"),
    ];
    // The recorded extension orders differ (Chrome permutes them on every connection).
    let one = expected("chromium")["ja3_string"]["value"].clone();
    let json: Value =
        serde_json::from_slice(&std::fs::read(capture("chromium", "capture.json")).unwrap())
            .unwrap();
    let two = json["connections"][1]["expected"]["ja3_string"]["value"].clone();
    assert_ne!(
        ja3_codes(one.as_str().unwrap(), 2),
        ja3_codes(two.as_str().unwrap(), 2)
    );
    let (code, stdout, stderr) = diff(&chromium[0], &chromium[1], false);
    assert_eq!(
        (code, stdout.as_str()),
        (0, "no voice field differs\n"),
        "{stderr}"
    );
}

#[test]
fn chromium_and_firefox_differ_field_by_field() {
    let (code, stdout, stderr) = diff(
        &connection("chromium", "conn1"),
        &connection("firefox-esr", "conn1"),
        true,
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    let changes: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    let change = |layer: &str, field: &str| -> &Value {
        changes
            .iter()
            .find(|c| c["layer"] == layer && c["field"] == field)
            .unwrap_or_else(|| panic!("no {layer} {field} change: {stdout}"))
    };
    let chromium = expected("chromium");
    let firefox = expected("firefox-esr");
    let ja3 = |e: &Value| e["ja3_string"]["value"].as_str().unwrap().to_owned();
    let ciphers = change("tls", "cipher_suites");
    assert_eq!(ciphers["before"], ja3_codes(&ja3(&chromium), 1).join(","));
    assert_eq!(ciphers["after"], ja3_codes(&ja3(&firefox), 1).join(","));
    assert_eq!(ciphers["reordered"], true, "{ciphers}");

    // The extension sets, as sets, without the ones that vary with the hello (padding 21,
    // session_ticket 35, pre_shared_key 41, early_data 42).
    let volatile = ["0x0015", "0x0023", "0x0029", "0x002a"];
    let set = |e: &Value| -> Vec<String> {
        let mut codes: Vec<String> = ja3_codes(&ja3(e), 2)
            .into_iter()
            .filter(|c| !volatile.contains(&c.as_str()))
            .collect();
        codes.sort();
        codes
    };
    let (before, after) = (set(&chromium), set(&firefox));
    let extensions = change("tls", "extensions");
    let only = |a: &[String], b: &[String]| -> Vec<String> {
        a.iter().filter(|c| !b.contains(c)).cloned().collect()
    };
    assert_eq!(
        extensions["added"],
        serde_json::json!(only(&after, &before))
    );
    assert_eq!(
        extensions["removed"],
        serde_json::json!(only(&before, &after))
    );

    let settings = |e: &Value| -> String {
        e["h2_settings"]["value"]
            .as_array()
            .unwrap()
            .iter()
            .map(|pair| format!("{}:{}", pair[0], pair[1]))
            .collect::<Vec<_>>()
            .join(",")
    };
    let h2 = change("http2", "settings");
    assert_eq!(h2["before"], settings(&chromium));
    assert_eq!(h2["after"], settings(&firefox));
    let window = change("http2", "window_update");
    assert_eq!(
        window["before"],
        chromium["h2_window_update"]["value"].to_string()
    );
    assert_eq!(
        window["after"],
        firefox["h2_window_update"]["value"].to_string()
    );
    let pseudo = change("http2", "pseudo_header_order");
    let joined = |v: &Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect::<Vec<_>>()
            .join(",")
    };
    assert_eq!(
        pseudo["before"],
        joined(&chromium["h2_pseudo_header_order"]["value"])
    );
    assert_eq!(
        pseudo["after"],
        joined(&firefox["h2_pseudo_header_order"]["value"])
    );
    assert_eq!(pseudo["reordered"], true);
    let headers = change("http2", "header_order");
    assert_eq!(
        headers["after"],
        joined(&firefox["h2_header_order"]["value"])
    );

    // The table says the same, readably.
    let (code, table, _) = diff(
        &connection("chromium", "conn1"),
        &connection("firefox-esr", "conn1"),
        false,
    );
    assert_eq!(code, 1);
    assert!(
        table.contains("http2  window_update            changed"),
        "{table}"
    );
    assert!(
        table.contains(&format!("after:  {}", settings(&firefox))),
        "{table}"
    );
}

#[test]
fn a_capture_file_is_its_first_connection() {
    let (code, stdout, stderr) = diff(
        &capture("firefox-esr", "capture.pcapng")
            .display()
            .to_string(),
        &capture("firefox-esr", "conn1.hello.bin")
            .display()
            .to_string(),
        true,
    );
    // The capture has the HTTP/2 layer (decrypted with its embedded secrets); the hello alone
    // has none: only HTTP fields differ, no TLS field.
    assert_eq!(code, 1, "{stdout}{stderr}");
    let changes: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert!(changes.iter().all(|c| c["layer"] != "tls"), "{stdout}");
    assert!(changes.iter().any(|c| c["field"] == "settings"), "{stdout}");
}

#[test]
fn trouble_exits_2() {
    let (code, _, stderr) = diff("no-such-token", &connection("chromium", "conn1"), false);
    assert_eq!(code, 2);
    assert!(stderr.contains("no-such-token"), "{stderr}");
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(bad.path(), b"\x00\x01garbage").unwrap();
    let (code, _, _) = diff(
        &bad.path().display().to_string(),
        &connection("chromium", "conn1"),
        false,
    );
    assert_eq!(code, 2);
}

/// FoxIO's JA4 captures: `protocol/tests/data/ja4/pcap/` (licence and source there).
fn foxio(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("protocol/tests/data/ja4/pcap")
        .join(file)
        .display()
        .to_string()
}

/// The cipher count of JA4_a (`t13d1516h2…`: characters 4–5), from FoxIO's published JA4 of
/// `pcap` in `list`.
fn foxio_cipher_count(list: &str, pcap: &str) -> usize {
    let text = std::fs::read_to_string(foxio(list)).unwrap();
    let record: Value = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|r| r["pcap"] == pcap)
        .unwrap_or_else(|| panic!("{pcap} in {list}"));
    let ja4 = record
        .get("ja4")
        .or_else(|| record.get("ja4_spec"))
        .and_then(Value::as_str)
        .unwrap();
    ja4[4..6].parse().unwrap()
}

/// A capture with only QUIC is its first QUIC client: Chrome's hello over QUIC against its
/// hello over TCP in another capture (whose first connection is TCP) differ in the cipher
/// suites (TLS 1.3's only, over QUIC), the extensions (`quic_transport_parameters`, 0x0039) and
/// the ALPN offer (`h3`).
#[test]
fn a_quic_only_capture_is_its_first_quic_client() {
    let quic = "quic-tls-handshake.pcapng";
    let tcp = "chrome-cloudflare-quic-with-secrets.pcapng";
    let (code, stdout, stderr) = diff(&foxio(tcp), &foxio(quic), true);
    assert_eq!(code, 1, "{stdout}{stderr}");
    let changes: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    let field = |name: &str| {
        changes
            .iter()
            .find(|c| c["layer"] == "tls" && c["field"] == name)
            .unwrap_or_else(|| panic!("no {name} change: {stdout}"))
    };
    let count = |v: &Value| v.as_str().unwrap().split(',').count();
    let suites = field("cipher_suites");
    // GREASE is not a suite of JA4's count, and not one of the view either.
    assert_eq!(
        count(&suites["before"]),
        foxio_cipher_count("expected-clienthellos.jsonl", tcp)
    );
    assert_eq!(
        count(&suites["after"]),
        foxio_cipher_count("expected-quic.jsonl", quic)
    );
    let extensions = field("extensions");
    assert!(
        extensions["added"]
            .as_array()
            .unwrap()
            .contains(&"0x0039".into()),
        "{stdout}"
    );
    let alpn = field("alpn");
    assert_eq!(alpn["after"], "h3", "{stdout}");

    // The QUIC client against itself: no change.
    let (code, stdout, _) = diff(&foxio(quic), &foxio(quic), false);
    assert_eq!((code, stdout.as_str()), (0, "no voice field differs\n"));
}
