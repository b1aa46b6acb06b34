//! `exitvoice inspect`, run as the real binary on public captures and their parts.
//!
//! Expected values: the Akamai HTTP/2 fingerprint that tshark 4.0.17 decodes from the two FoxIO
//! captures that carry TLS keys, and JA3/JA4 from the FoxIO expectations
//! (`protocol/tests/data/ja4/SOURCE-pcap.md`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

const EXE: &str = env!("CARGO_BIN_EXE_exitvoice");
const AKAMAI: &str = "1:65536;2:0;3:1000;4:6291456;6:262144|15663105|0|m,a,s,p";
/// md5 of [`AKAMAI`], as the manifest lists it.
const AKAMAI_HASH: &str = "a345a694846ad9f6c97bcc3c75adbe26";

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("protocol/tests/data/ja4/pcap")
        .join(name)
}

fn inspect(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(EXE)
        .arg("inspect")
        .args(args)
        .output()
        .expect("the binary runs")
}

fn inspect_ok(args: &[&std::ffi::OsStr]) -> Value {
    let out = inspect(args);
    assert!(
        out.status.success(),
        "inspect failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// The one connection of `capture` whose client bytes were decrypted.
fn decrypted_connection(capture: &str) -> Value {
    let out = inspect_ok(&[data(capture).as_os_str()]);
    let conns = out.as_array().expect("an array of connections");
    let decrypted: Vec<&Value> = conns
        .iter()
        .filter(|c| c["client_data"] == "decrypted")
        .collect();
    assert_eq!(decrypted.len(), 1, "{capture}: one decrypted connection");
    decrypted[0].clone()
}

#[test]
fn youtube_capture_with_keys_gives_chromes_akamai_fingerprint() {
    let conn = decrypted_connection("http2-with-cookies.pcapng");
    assert_eq!(conn["http2"]["akamai_fingerprint"], AKAMAI);
    assert_eq!(conn["http2"]["akamai_fingerprint_hash"], AKAMAI_HASH);
    assert_eq!(conn["tls"]["ja4"], "t13d1516h2_8daaf6152771_e5627efa2ab1");
    assert_eq!(conn["tls"]["ja3_hash"], "30362dc08b66392ffc0fd6d6e9e77ed9");
    assert_eq!(conn["alpn"]["spoken"], "h2");
    assert_eq!(
        conn["alpn"]["negotiated"], "h2",
        "read from the EncryptedExtensions"
    );
    assert_eq!(conn["alpn"]["inferred"], false);
    assert_eq!(conn["server"], "142.250.187.206:443");
    for field in [
        "ja3", "ja3n", "ja4_r", "ja4_o", "ja4_ro", "voice_id", "order_id",
    ] {
        assert!(conn["tls"][field].is_string(), "tls.{field}");
    }
    assert!(conn["http2"]["voice_id"].is_string());
}

#[test]
fn cloudflare_capture_with_keys_gives_chromes_akamai_fingerprint() {
    let conn = decrypted_connection("chrome-cloudflare-quic-with-secrets.pcapng");
    assert_eq!(conn["http2"]["akamai_fingerprint"], AKAMAI);
    assert_eq!(conn["tls"]["ja4"], "t13d1516h2_8daaf6152771_e5627efa2ab1");
    assert_eq!(conn["tls"]["ja3_hash"], "cd08e31494f9531f560d64c695473da9");
}

#[test]
fn hello_and_prefix_files_are_one_connection() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let capture = data("http2-with-cookies.pcapng");
    inspect_ok(&[
        "--extract".as_ref(),
        dir.path().as_os_str(),
        capture.as_os_str(),
    ]);
    let hello = dir.path().join("http2-with-cookies.pcapng-0-hello.bin");
    let prefix = dir.path().join("http2-with-cookies.pcapng-0-client.bin");
    let conn = inspect_ok(&[hello.as_os_str(), prefix.as_os_str()]);
    assert!(conn.is_object(), "one connection, not an array");
    assert_eq!(conn["http2"]["akamai_fingerprint"], AKAMAI);
    assert_eq!(conn["tls"]["ja4"], "t13d1516h2_8daaf6152771_e5627efa2ab1");
    assert_eq!(
        conn["alpn"]["offered"],
        serde_json::json!(["h2", "http/1.1"])
    );
    // Each file alone: only its own layer.
    let tls_only = inspect_ok(&[hello.as_os_str()]);
    assert_eq!(tls_only["tls"]["ja4"], conn["tls"]["ja4"]);
    assert!(tls_only["http2"].is_null());
    let h2_only = inspect_ok(&[prefix.as_os_str()]);
    assert_eq!(h2_only["http2"]["akamai_fingerprint"], AKAMAI);
    assert!(h2_only["tls"].is_null());
}

/// The first expectation line of the FoxIO suite: a bare ClientHello message as hex.
fn first_expected() -> Value {
    let text = std::fs::read_to_string(data("expected-clienthellos.jsonl")).expect("expectations");
    serde_json::from_str(text.lines().next().expect("a line")).expect("JSON")
}

#[test]
fn hex_and_raw_hello_inputs_from_a_file_and_stdin() {
    let expected = first_expected();
    let message_hex = expected["client_hello_hex"].as_str().expect("hex");
    let dir = tempfile::tempdir().expect("a temp dir");
    // Hex with line breaks and spaces, from a file.
    let spaced: String = message_hex
        .as_bytes()
        .chunks(32)
        .map(|c| format!("{} \n", String::from_utf8_lossy(c)))
        .collect();
    let hex_file = dir.path().join("hello.hex");
    std::fs::write(&hex_file, spaced).expect("write");
    let out = inspect_ok(&[hex_file.as_os_str()]);
    assert_eq!(out["tls"]["ja4"], expected["ja4_spec"]);
    assert_eq!(out["tls"]["ja3_hash"], expected["ja3"]);
    // The same message in a TLS record, raw bytes, on standard input.
    let message = hex_decode(message_hex);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend_from_slice(&u16::try_from(message.len()).expect("short").to_be_bytes());
    record.extend_from_slice(&message);
    let mut child = Command::new(EXE)
        .args(["inspect", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), &record).expect("write");
    let out = child.wait_with_output().expect("exit");
    assert!(out.status.success());
    let out: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(out["tls"]["ja4"], expected["ja4_spec"]);
}

fn hex_decode(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digit"))
        .collect()
}

#[test]
fn bad_inputs_fail_with_a_message_and_no_panic() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let expected = first_expected();
    let message = hex_decode(expected["client_hello_hex"].as_str().expect("hex"));
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let random: Vec<u8> = (0..64 * 1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0] | 0x80
        })
        .collect();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("random", random),
        ("truncated-hello", message[..message.len() / 2].to_vec()),
        (
            "alert-record",
            vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28],
        ),
        ("odd-hex", b"0102030".to_vec()),
        (
            "bad-pcapng",
            vec![0x0a, 0x0d, 0x0d, 0x0a, 0xff, 0xff, 0xff, 0xff],
        ),
    ];
    for (name, bytes) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).expect("write");
        let out = inspect(&[path.as_os_str()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.starts_with("exitvoice: "), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    }
    let out = inspect(&[dir.path().join("missing").as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn browser_captures_are_bucket_a() {
    for capture in [
        "http2-with-cookies.pcapng",
        "chrome-cloudflare-quic-with-secrets.pcapng",
    ] {
        let conn = decrypted_connection(capture);
        assert_eq!(
            conn["bucket"], "A",
            "{capture}: Chrome's HTTP/2 is browser-shaped"
        );
    }
}

/// The cleartext curl request of `http1-with-cookies.pcapng`: request line and header order as
/// tshark dissects them (`tshark-http1-with-cookies-request.txt`).
#[test]
fn cleartext_http1_capture_gives_the_request_head() {
    let line = std::fs::read_to_string(data("tshark-http1-with-cookies-request.txt"))
        .expect("tshark output in the repo");
    let mut fields = line.trim_end().split('|');
    let (method, target, version, headers) = (
        fields.next().expect("method"),
        fields.next().expect("target"),
        fields.next().expect("version"),
        fields.next().expect("header lines"),
    );
    let want_order: Vec<&str> = headers
        .split("\\r\\n,")
        .map(|h| h.split(':').next().expect("a name"))
        .collect();
    let out = inspect_ok(&[data("http1-with-cookies.pcapng").as_os_str()]);
    let conns = out.as_array().expect("an array");
    assert_eq!(conns.len(), 1);
    let conn = &conns[0];
    assert_eq!(conn["client_data"], "cleartext");
    assert!(conn["tls"].is_null());
    assert_eq!(
        conn["http1"]["request_line"],
        format!("{method} {target} {version}")
    );
    assert_eq!(conn["http1"]["header_order"], serde_json::json!(want_order));
    assert!(conn["http1"]["voice_id"]
        .as_str()
        .is_some_and(|v| v.starts_with("h1v1_")));
}

#[test]
fn several_inputs_give_one_object_each() {
    let expected = first_expected();
    let dir = tempfile::tempdir().expect("a temp dir");
    let hex_file = dir.path().join("hello.hex");
    std::fs::write(
        &hex_file,
        expected["client_hello_hex"].as_str().expect("hex"),
    )
    .expect("write");
    let capture = data("badcurveball.pcap");
    let out = inspect_ok(&[hex_file.as_os_str(), capture.as_os_str()]);
    let all = out.as_array().expect("an array");
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["input"], hex_file.to_string_lossy().as_ref());
    assert_eq!(all[0]["tls"]["ja4"], expected["ja4_spec"]);
    let conns = all[1]["connections"]
        .as_array()
        .expect("the capture's connections");
    assert_eq!(conns.len(), 1);
    assert_eq!(
        conns[0]["tls"]["ja4"],
        "t13d1615h2_46e7e9700bed_45f260be83e2"
    );
}

/// `--keylog` decrypts a capture without embedded keys (the curl recording of
/// `protocol/tests/data/pcap/SOURCE.md`): every request line is the one tshark decodes.
#[test]
fn keylog_flag_decrypts_a_recording() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol/tests/data/pcap");
    let capture = dir.join("curl-openssl-six-suites.pcapng");
    let keys = dir.join("curl-openssl-six-suites.keys");
    let tshark = std::fs::read_to_string(dir.join("tshark-requests.txt")).expect("tshark output");
    let mut want: Vec<String> = tshark
        .lines()
        .map(|l| {
            let request = l.split('\t').nth(2).expect("a request");
            let mut parts = request.split('|');
            let (method, target, version) = (
                parts.next().expect("method"),
                parts.next().expect("target"),
                parts.next().expect("version"),
            );
            format!("{method} {target} {version}")
        })
        .collect();
    want.sort();
    let without = inspect_ok(&[capture.as_os_str()]);
    assert!(without
        .as_array()
        .expect("connections")
        .iter()
        .all(|c| c["http1"].is_null()));
    let out = inspect_ok(&["--keylog".as_ref(), keys.as_os_str(), capture.as_os_str()]);
    let mut got: Vec<String> = out
        .as_array()
        .expect("connections")
        .iter()
        .map(|c| {
            c["http1"]["request_line"]
                .as_str()
                .expect("a request line")
                .to_owned()
        })
        .collect();
    got.sort();
    assert_eq!(got, want);
}

/// `inspect` finds QUIC client Initials in UDP and reports the JA4 `q…` FoxIO's Rust tool
/// publishes for them (`ja4__insta@quic-tls-handshake.pcapng.snap`, copied in
/// `expected-quic.jsonl`), with the Initial's layout and the transport parameters in wire order.
#[test]
fn quic_initials_in_a_capture_give_foxios_quic_ja4() {
    let out = inspect_ok(&[data("quic-tls-handshake.pcapng").as_os_str()]);
    let conns = out.as_array().expect("an array of connections");
    let quic: Vec<&Value> = conns.iter().filter(|c| c["transport"] == "quic").collect();
    assert_eq!(quic.len(), 1, "one QUIC client");
    let conn = quic[0];
    assert_eq!(conn["tls"]["ja4"], "q13d0310h3_55b375c5d22e_cd85d2d88918");
    assert_eq!(conn["tls"]["sni"], "www.google.com");
    assert_eq!(conn["client"], "192.168.1.168:59102");
    assert_eq!(conn["server"], "142.251.163.147:443");
    assert_eq!(conn["quic"]["version"], "0x00000001");
    assert_eq!(conn["quic"]["client_hello_complete"], true);
    let params = conn["quic"]["transport_parameters"]
        .as_array()
        .expect("extension 0x39 decoded");
    // What the extension carries in wire order: the ids JA4's extension list does not show.
    let ids: Vec<u64> = params.iter().filter_map(|p| p["id"].as_u64()).collect();
    assert_eq!(ids.len(), params.len(), "every id is a number");
    assert!(ids.contains(&0x01) && ids.contains(&0x0f));
    assert_eq!(params.iter().filter(|p| p["grease"] == true).count(), 1);
    // Chrome 107-116's values in the FoxIO pcaps (docs/quic.md, "Reference values").
    let value = |id: u64| {
        params
            .iter()
            .find(|p| p["id"] == id)
            .map(|p| p["value"].clone())
    };
    assert_eq!(value(0x01), Some(json!(30_000)));
    assert_eq!(value(0x03), Some(json!(1472)));
    assert_eq!(value(0x04), Some(json!(15_728_640)));
    assert_eq!(value(0x09), Some(json!(103)));
    assert_eq!(value(0x20), Some(json!(65_536)));
    assert_eq!(value(0x4752), Some(json!("00000001")));
    assert_eq!(value(0x3128), Some(json!(hex_encode(b"RVCM"))));
    // The frame layout of that Initial as tshark reads it: `PADDING PING PADDING PING PING
    // PADDING C C C C C C PADDING C …` (PADDING runs collapsed).
    let frames: Vec<u64> = conn["quic"]["initial_packets"][0]["frames"]
        .as_array()
        .expect("frame types")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(frames[..14], [0, 1, 0, 1, 1, 0, 6, 6, 6, 6, 6, 6, 0, 6]);
}

fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Each TCP connection says its transport too, and a TCP-only capture has no QUIC entry.
#[test]
fn tcp_connections_are_marked_tcp() {
    let out = inspect_ok(&[data("badcurveball.pcap").as_os_str()]);
    let conns = out.as_array().expect("an array");
    assert_eq!(conns.len(), 1);
    assert_eq!(conns[0]["transport"], "tcp");
}

/// Nanoseconds of a `frame.time_epoch` as tshark prints it (`1795969273.051264752`).
fn epoch_ns(text: &str) -> u64 {
    let (secs, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits = format!("{frac:0<9}");
    secs.parse::<u64>().expect("seconds") * 1_000_000_000
        + digits[..9].parse::<u64>().expect("fraction")
}

/// The capture's times give each connection's round trips: from the SYN-ACK to the client's
/// next segment (TCP), and from the server's last handshake segment to the client's next
/// payload (the TLS flight), exactly as tshark's frame times show them.
#[test]
fn capture_times_give_the_round_trips_tshark_shows() {
    let capture = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures/curl-h2/capture.pcapng");
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&capture)
        .args(["-Y", "tcp.stream == 0", "-T", "fields", "-E", "separator=,"])
        .args([
            "-e",
            "frame.time_epoch",
            "-e",
            "tcp.srcport",
            "-e",
            "tcp.flags.syn",
        ])
        .args(["-e", "tcp.flags.ack", "-e", "tcp.len"])
        .output()
        .expect("tshark runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<(u64, String, bool, bool, u64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            let flag = |s: &str| s == "1" || s == "True";
            (
                epoch_ns(f[0]),
                f[1].to_owned(),
                flag(f[2]),
                flag(f[3]),
                f[4].parse().expect("tcp.len"),
            )
        })
        .collect();
    let client = rows.iter().find(|r| r.2 && !r.3).expect("a SYN").1.clone();
    let syn_ack = rows.iter().position(|r| r.2 && r.3).expect("a SYN-ACK");
    let ack = rows[syn_ack + 1..]
        .iter()
        .find(|r| r.1 == client)
        .expect("the ACK");
    let tcp_us = (ack.0 - rows[syn_ack].0) / 1000;
    // Payload rows: the ClientHello, the server's flight, then the client's answer.
    let payload: Vec<&(u64, String, bool, bool, u64)> = rows.iter().filter(|r| r.4 > 0).collect();
    let flight_end = payload
        .iter()
        .position(|r| r.1 != client)
        .and_then(|start| {
            payload[start..]
                .iter()
                .position(|r| r.1 == client)
                .map(|n| start + n)
        })
        .expect("a client answer after the server's flight");
    let flight_us = (payload[flight_end].0 - payload[flight_end - 1].0) / 1000;

    let conns = inspect_ok(&[capture.as_os_str()]);
    let first = conns
        .as_array()
        .and_then(|c| c.iter().find(|c| c["first_frame"] == 1))
        .expect("the first connection");
    let latency = &first["latency"];
    assert_eq!(latency["tcp_min_rtt_us"], json!(tcp_us), "{latency}");
    assert_eq!(latency["tls_rtt_us"], json!(flight_us), "{latency}");
    assert!(
        latency.get("tcp_rttvar_us").is_none(),
        "one sample, no variation: {latency}"
    );
    assert_eq!(
        latency["gap_us"],
        json!(flight_us.saturating_sub(tcp_us)),
        "{latency}"
    );
    assert!(latency["verdict"].is_string(), "{latency}");
}
