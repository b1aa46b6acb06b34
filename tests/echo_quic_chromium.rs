//! Headless Chromium over HTTP/3 to `exitvoice serve`, with two independent records of what it
//! sent to compare the echo with: its own net log (`--log-net-log`: the SETTINGS, headers and
//! transport parameters it says it sent) and tshark decrypting a loopback capture with
//! Chromium's key log (the control stream's SETTINGS in wire order).
//!
//! Chromium's QUIC ignores `--ignore-certificate-errors` (the handshake fails with
//! CERTIFICATE_VERIFY_FAILED); it accepts the echo's self-signed certificate by its SPKI pin
//! (`--ignore-certificate-errors-spki-list`), as the auditor's Chromium persona does. The
//! headless flags are the auditor's (QUIC allowed). Needs chromium and tshark
//! (scripts/install-test-deps.sh) and root for the capture on `lo`.

mod echo_support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use echo_support::EchoServer;
use serde_json::Value;

/// The JSON Chromium shows in its DOM (`<pre>…</pre>`, HTML-escaped).
fn json_of_dom(dom: &str) -> Value {
    let start = dom
        .find("<pre")
        .and_then(|i| dom[i..].find('>').map(|j| i + j + 1));
    let end = dom.rfind("</pre>");
    let (Some(start), Some(end)) = (start, end) else {
        panic!("no <pre> in Chromium's DOM: {dom}");
    };
    let text = dom[start..end]
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The `params` of every net-log event named `name`, in log order.
fn net_log_events<'a>(log: &'a Value, name: &str) -> Vec<&'a Value> {
    let id = log["constants"]["logEventTypes"][name].as_u64();
    log["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"].as_u64() == id)
        .map(|e| &e["params"])
        .collect()
}

/// A setting value as Chromium's net log writes it: a signed 32-bit integer, so a GREASE
/// setting's random 32-bit value of 2^31 or more comes out negative (two's complement).
fn logged_u64(value: &Value) -> u64 {
    let logged = value
        .as_i64()
        .unwrap_or_else(|| panic!("not a number: {value}"));
    match u32::try_from(logged) {
        Ok(v) => u64::from(v),
        Err(_) => u64::from(i32::try_from(logged).expect("32-bit") as u32),
    }
}

/// Setting names as Chromium's net log writes them.
fn setting_id(name: &str) -> u64 {
    match name {
        "SETTINGS_QPACK_MAX_TABLE_CAPACITY" => 0x01,
        "SETTINGS_MAX_FIELD_SECTION_SIZE" => 0x06,
        "SETTINGS_QPACK_BLOCKED_STREAMS" => 0x07,
        "SETTINGS_ENABLE_CONNECT_PROTOCOL" => 0x08,
        "SETTINGS_H3_DATAGRAM" => 0x33,
        other => other
            .strip_prefix("UNSUPPORTED_SETTINGS_TYPE(")
            .and_then(|s| s.strip_suffix(')'))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("unknown setting name {other}")),
    }
}

#[test]
fn chromium_over_h3_is_echoed_as_its_net_log_and_tshark_say() {
    let server = EchoServer::start(&[]);
    let port = server.port;
    let dir = tempfile::tempdir().expect("tempdir");
    let (pcap, keys, net_log) = (
        dir.path().join("h3.pcapng"),
        dir.path().join("keys.log"),
        dir.path().join("net.json"),
    );

    let mut tshark = Command::new("tshark")
        .args(["-i", "lo", "-f", &format!("udp port {port}"), "-w"])
        .arg(&pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tshark (scripts/install-test-deps.sh)");
    let stderr = tshark.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    loop {
        let line = lines.next().expect("tshark started").expect("line");
        if line.contains("Capturing on") {
            break;
        }
    }
    std::thread::spawn(move || lines.for_each(drop));

    let pin = server.pin.trim_start_matches("sha256//");
    let profile = tempfile::tempdir().expect("profile");
    let output = Command::new("chromium")
        .args(exitvoice_auditor::probe::chromium::HEADLESS_FLAGS)
        .arg("--enable-quic")
        .arg(format!("--origin-to-force-quic-on=127.0.0.1:{port}"))
        .arg(format!("--ignore-certificate-errors-spki-list={pin}"))
        .arg(format!("--ssl-key-log-file={}", keys.display()))
        .arg(format!("--log-net-log={}", net_log.display()))
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(server.url("/api/all"))
        .output()
        .expect("run chromium");
    assert!(output.status.success(), "chromium failed");
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill")
        .args(["-INT", &tshark.id().to_string()])
        .status();
    let _ = tshark.wait();

    let echo = json_of_dom(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(echo["alpn"]["spoken"], "h3", "{echo}");
    let http3 = &echo["http3"];
    let echoed: Vec<(u64, u64)> = http3["settings"]
        .as_array()
        .unwrap_or_else(|| panic!("settings: {http3}"))
        .iter()
        .map(|s| {
            (
                s["id"].as_u64().expect("id"),
                s["value"].as_u64().expect("value"),
            )
        })
        .collect();

    // 1. tshark: the SETTINGS of Chromium's control stream, decrypted, in wire order.
    let fields = Command::new("tshark")
        .arg("-r")
        .arg(&pcap)
        .arg("-o")
        .arg(format!("tls.keylog_file:{}", keys.display()))
        .args(["-Y", &format!("udp.dstport == {port} && http3.settings.id")])
        .args([
            "-T",
            "fields",
            "-e",
            "http3.settings.id",
            "-e",
            "http3.settings.value",
        ])
        .output()
        .expect("tshark -r");
    let text = String::from_utf8_lossy(&fields.stdout);
    let line = text
        .lines()
        .next()
        .unwrap_or_else(|| panic!("tshark decoded no SETTINGS"));
    let (ids, values) = line.split_once('\t').expect("two fields");
    let from_tshark: Vec<(u64, u64)> = ids
        .split(',')
        .zip(values.split(','))
        .map(|(id, value)| (id.parse().expect("id"), value.parse().expect("value")))
        .collect();
    assert_eq!(
        echoed, from_tshark,
        "SETTINGS in wire order, as tshark decodes them"
    );

    // The Initials' layout as tshark reads the same capture: the CRYPTO offsets of the first
    // connection's client Initials in wire order, PADDING frames in them, bytes after them.
    let initials = Command::new("tshark")
        .arg("-r")
        .arg(&pcap)
        .args([
            "-Y",
            &format!("udp.dstport == {port} && quic.long.packet_type == 0 && quic.crypto.offset"),
        ])
        .args([
            "-T",
            "fields",
            "-e",
            "quic.dcid",
            "-e",
            "quic.crypto.offset",
        ])
        .args(["-e", "quic.frame_type", "-e", "quic.coalesced_padding_data"])
        .output()
        .expect("tshark -r");
    let text = String::from_utf8_lossy(&initials.stdout);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    let first_dcid = rows
        .first()
        .map(|r| r[0])
        .expect("client Initials with CRYPTO");
    let first: Vec<&Vec<&str>> = rows.iter().filter(|r| r[0] == first_dcid).collect();
    let offsets: Vec<u64> = first
        .iter()
        .flat_map(|r| r[1].split(','))
        .map(|o| o.parse().expect("offset"))
        .collect();
    let order = if offsets.windows(2).all(|w| w[0] < w[1]) {
        "in_order"
    } else if offsets.windows(2).all(|w| w[0] > w[1]) {
        "reversed"
    } else {
        "shuffled"
    };
    let inside = first.iter().any(|r| r[2].split(',').any(|t| t == "0"));
    let after = first
        .iter()
        .any(|r| r.get(3).is_some_and(|d| !d.is_empty()));
    let padding = match (inside, after) {
        (true, false) => "in_packet",
        (false, true) => "after_packet",
        (true, true) => "both",
        (false, false) => "none",
    };
    let quic = &echo["quic"];
    assert_eq!(quic["crypto_order"], order, "CRYPTO offsets {offsets:?}");
    assert_eq!(quic["padding_where"], padding, "tshark: {text}");

    // 2. Chromium's net log: the same settings (its JSON sorts them by name, so as a set).
    let log: Value =
        serde_json::from_slice(&std::fs::read(&net_log).expect("net log")).expect("JSON");
    let sent = net_log_events(&log, "HTTP3_SETTINGS_SENT");
    let from_log: BTreeMap<u64, u64> = sent[0]
        .as_object()
        .expect("settings")
        .iter()
        .map(|(name, value)| (setting_id(name), logged_u64(value)))
        .collect();
    assert_eq!(echoed.iter().copied().collect::<BTreeMap<_, _>>(), from_log);

    // The first request's field order: the headers Chromium logged for /api/all.
    let headers: Vec<String> = net_log_events(&log, "HTTP3_HEADERS_SENT")
        .into_iter()
        .find(|p| {
            p["headers"]
                .as_array()
                .is_some_and(|h| h.iter().any(|h| h == ":path: /api/all"))
        })
        .expect("headers of /api/all")["headers"]
        .as_array()
        .expect("list")
        .iter()
        .map(|h| {
            let h = h.as_str().expect("header");
            // Pseudo-headers start with ':', so split after the name's own colon.
            let at = h[1..].find(": ").map(|i| i + 1).expect("name: value");
            h[..at].to_owned()
        })
        .collect();
    let pseudo: Vec<&str> = headers
        .iter()
        .map(String::as_str)
        .filter(|h| h.starts_with(':'))
        .collect();
    let regular: Vec<&str> = headers
        .iter()
        .map(String::as_str)
        .filter(|h| !h.starts_with(':'))
        .collect();
    assert_eq!(
        pseudo,
        [":method", ":authority", ":scheme", ":path"],
        "m,a,s,p"
    );
    assert_eq!(http3["pseudo_header_order"], serde_json::json!(pseudo));
    assert_eq!(http3["header_order"], serde_json::json!(regular));
    assert!(http3["h3_text"]
        .as_str()
        .is_some_and(|t| t.ends_with("|m,a,s,p")));

    // Transport parameters: each integer Chromium logged, by name.
    let logged = net_log_events(&log, "QUIC_SESSION_TRANSPORT_PARAMETERS_SENT")[0]
        ["quic_transport_parameters"]
        .as_str()
        .expect("parameters text")
        .to_owned();
    let words: Vec<&str> = logged.split_whitespace().collect();
    let echoed_parameters: BTreeMap<&str, &Value> = echo["quic"]["transport_parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter_map(|p| Some((p["name"].as_str()?, &p["value"])))
        .collect();
    let mut compared = 0;
    for pair in words.windows(2) {
        // Integer parameters only (Chromium writes a connection id by its length).
        let echoed = echoed_parameters.get(pair[0]).filter(|v| v.is_u64());
        let (Some(echoed), Ok(value)) = (echoed, pair[1].parse::<u64>()) else {
            continue;
        };
        assert_eq!(echoed.as_u64(), Some(value), "{}", pair[0]);
        compared += 1;
    }
    assert!(compared >= 8, "{compared} parameters compared in {logged}");
    let ja4 = echo["tls"]["ja4"].as_str().expect("ja4");
    assert!(ja4.starts_with("q13") && ja4[8..10] == *"h3", "{ja4}");
    assert_eq!(echo["quic"]["client_hello_complete"], true);
}
