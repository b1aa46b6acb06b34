//! The round-trip gap as the echo measures it, through real proxies with a hidden leg of known
//! length: a delaying relay (`support::delay_relay`, `D` ms each way) between the client and
//! squid or dante. The echo's TCP round trip is then the proxy's (loopback); the TLS flight and
//! the HTTP/2 PING cross the relay, so the gap must be close to `2·D`.
//!
//! And the other way round: a direct client far away is not proxied. curl, httpx and headless
//! Chromium reach the echo in another network namespace over a slow path inside the kernel's
//! TCP (`support::slow_path`, `D` ms each way through TUN devices; nothing terminates TCP on
//! it), so the echo's TCP round trip and the application's are both `2·D` and the gap stays
//! under the `possible` threshold: verdict `direct`.
//!
//! Needs root and the packages squid, apache2-utils, dante-server, haproxy, curl, chromium, and
//! the test venv with `hyperframe`, `hpack` and `httpx` (scripts/install-test-deps.sh).

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};

use support::browser;
use support::delay_relay::DelayRelay;
use support::netns::in_ns;
use support::slow_path::{SlowPath, SERVER_IP};
use support::{EchoServer, Proxy, PASSWORD_ENCODED, SOCKS_USER, USER};

/// `curl --http2` for `/api/all` on `echo`, through `proxy` when given: its `latency` object.
fn curl_latency(echo: &EchoServer, proxy: Option<String>) -> serde_json::Value {
    let mut command = Command::new("curl");
    command.args([
        "-sS",
        "--http2",
        "--max-time",
        "20",
        "-k",
        "--pinnedpubkey",
        &echo.pin,
    ]);
    if let Some(proxy) = &proxy {
        command.args(["-x", proxy]);
    }
    let output = command
        .arg(format!("https://localhost:{}/api/all", echo.port))
        .output()
        .expect("run curl");
    latency_of(&output, &format!("curl via {proxy:?}"))
}

/// The `latency` object of the `/api/all` answer `output` printed, spoken over HTTP/2.
fn latency_of(output: &Output, what: &str) -> serde_json::Value {
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let echo: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{what}: echo JSON: {e}"));
    assert_eq!(echo["alpn"]["spoken"], "h2", "{what}: {echo}");
    echo["latency"].clone()
}

fn micros(latency: &serde_json::Value, field: &str) -> u64 {
    latency[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no integer {field}: {latency}"))
}

/// Asserts a gap of `2·delay_ms`, within 20 % and 2 ms.
fn assert_gap(latency: &serde_json::Value, delay_ms: u64, what: &str) {
    let expected = 2 * delay_ms * 1000;
    let gap = micros(latency, "gap_us");
    let slack = expected / 5 + 2_000;
    assert!(
        gap.abs_diff(expected) <= slack,
        "{what}: gap {gap} us, expected {expected} ± {slack}: {latency}"
    );
    // The proxy is on loopback: the echo's TCP round trip stays far below the hidden leg.
    assert!(
        micros(latency, "tcp_min_rtt_us") < 5_000,
        "{what}: {latency}"
    );
    assert!(
        micros(latency, "h2_ping_rtt_us") >= expected,
        "{what}: {latency}"
    );
    assert!(
        micros(latency, "tls_rtt_us") >= expected,
        "{what}: {latency}"
    );
}

#[test]
fn a_hidden_leg_behind_squid_and_dante_shows_as_the_gap() {
    let echo = EchoServer::start();
    let squid = Proxy::squid();
    let dante = Proxy::dante();

    // Direct, and through each proxy without a hidden leg: no verdict that says proxied.
    let direct = curl_latency(&echo, None);
    let via_squid = format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}", squid.port);
    let via_dante = format!(
        "socks5h://{SOCKS_USER}:{PASSWORD_ENCODED}@127.0.0.1:{}",
        dante.port
    );
    for (what, latency) in [
        ("direct", direct),
        ("squid", curl_latency(&echo, Some(via_squid))),
        ("dante", curl_latency(&echo, Some(via_dante))),
    ] {
        assert_eq!(latency["verdict"], "direct", "{what}: {latency}");
        assert!(micros(&latency, "gap_us") < 10_000, "{what}: {latency}");
    }

    for delay_ms in [10, 40, 120] {
        let squid_relay = DelayRelay::start(squid.port, delay_ms);
        let dante_relay = DelayRelay::start(dante.port, delay_ms);
        let through = [
            (
                "squid",
                format!(
                    "http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}",
                    squid_relay.port
                ),
            ),
            (
                "dante",
                format!(
                    "socks5h://{SOCKS_USER}:{PASSWORD_ENCODED}@127.0.0.1:{}",
                    dante_relay.port
                ),
            ),
        ];
        for (proxy, url) in through {
            let what = format!("{proxy} behind {delay_ms} ms");
            // Two connections: each holds the whole leg, the smaller gap is the leg (a busy
            // machine only ever adds to one).
            let both = [
                curl_latency(&echo, Some(url.clone())),
                curl_latency(&echo, Some(url)),
            ];
            for latency in &both {
                assert!(
                    micros(latency, "gap_us") + 2_000 >= 2 * delay_ms * 1000,
                    "{what}: {latency}"
                );
                let verdict = latency["verdict"].as_str().unwrap_or_default();
                if delay_ms >= 40 {
                    assert_eq!(verdict, "likely", "{what}: {latency}");
                } else {
                    assert!(
                        matches!(verdict, "possible" | "likely"),
                        "{what}: {latency}"
                    );
                }
            }
            let smaller = both
                .iter()
                .min_by_key(|latency| micros(latency, "gap_us"))
                .expect("two");
            assert_gap(smaller, delay_ms, &what);
        }
    }
}

/// The test venv's Python (hyperframe, hpack).
fn python() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/venv/bin/python")
}

/// An HTTP/2 client that answers the server's SETTINGS but never its PING (RFC 9113 section 6.7
/// says it must): it asks for `/api/all` and prints the answer's body.
const SILENT_CLIENT: &str = r#"
import socket, ssl, sys
from hyperframe.frame import Frame, SettingsFrame, HeadersFrame, DataFrame, PingFrame
import hpack
port = int(sys.argv[1])
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["h2"])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
headers = HeadersFrame(1, hpack.Encoder().encode(
    [(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/api/all")]))
headers.flags.add("END_HEADERS"); headers.flags.add("END_STREAM")
s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + SettingsFrame(0).serialize() + headers.serialize())
buf, body, pings = b"", b"", 0
while True:
    while len(buf) < 9:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("closed")
        buf += chunk
    frame, length = Frame.parse_frame_header(memoryview(buf[:9]))
    while len(buf) < 9 + length:
        buf += s.recv(65536)
    frame.parse_body(memoryview(buf[9:9 + length]))
    buf = buf[9 + length:]
    if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
        ack = SettingsFrame(0); ack.flags.add("ACK"); s.sendall(ack.serialize())
    elif isinstance(frame, PingFrame):
        pings += 1
    elif isinstance(frame, DataFrame) and frame.stream_id == 1:
        body += frame.data
        if "END_STREAM" in frame.flags:
            break
sys.stderr.write("pings %d\n" % pings)
print(body.decode())
"#;

#[test]
fn what_cannot_be_measured_is_absent_with_its_reason() {
    let echo = EchoServer::start();
    let output = Command::new(python())
        .args(["-c", SILENT_CLIENT, &echo.port.to_string()])
        .output()
        .expect("run the silent client");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("pings 1"),
        "the echo sent one PING: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).expect("echo JSON");
    let latency = &answer["latency"];
    assert_eq!(latency["verdict"], "unknown", "{latency}");
    assert!(
        latency["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("PING"),
        "{latency}"
    );
    assert!(latency.get("h2_ping_rtt_us").is_none(), "{latency}");
    assert!(latency["h2_ping_samples_us"].is_null(), "{latency}");
    assert!(micros(latency, "tls_rtt_us") > 0, "{latency}");

    // Relayed by a load balancer with a PROXY header: the kernel's round trip is the
    // balancer's, not the client's, so there is none, and no verdict.
    let relayed = EchoServer::start_with(&["--proxy-protocol-from", "127.0.0.1/32"]);
    let balancer = Proxy::start("haproxy-pp", &["send-proxy-v2", &relayed.port.to_string()]);
    let output = Command::new("curl")
        .args(["-sS", "--http2", "-k", "--connect-to"])
        .arg(format!(
            "localhost:{}:127.0.0.1:{}",
            relayed.port, balancer.port
        ))
        .arg(format!("https://localhost:{}/api/all", relayed.port))
        .output()
        .expect("run curl");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).expect("echo JSON");
    let latency = &answer["latency"];
    assert_eq!(latency["verdict"], "unknown", "{latency}");
    assert!(
        latency["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("load balancer"),
        "{latency}"
    );
    for absent in ["tcp_rtt_us", "tcp_min_rtt_us", "gap_us", "gap_ratio"] {
        assert!(latency.get(absent).is_none(), "{absent}: {latency}");
    }
    assert!(micros(latency, "h2_ping_rtt_us") > 0, "{latency}");
}

/// One way of the slow path in [`direct_clients_over_a_slow_path_show_no_gap`], ms.
const SLOW_MS: u64 = 40;

/// An HTTP/2 client of the Python world (httpx over h2, whose stack answers PINGs): GETs
/// `sys.argv[1]` without checking the certificate and prints the body.
const HTTPX_CLIENT: &str = r#"
import sys, httpx
with httpx.Client(http2=True, verify=False, timeout=20) as client:
    print(client.get(sys.argv[1]).text)
"#;

/// A round trip over a path `delay_ms` long each way, µs (`2·delay_ms`), and how far a measure
/// of it may stray (20 % and 2 ms).
fn path_window(delay_ms: u64) -> (u64, u64) {
    let expected = 2 * delay_ms * 1000;
    (expected, expected / 5 + 2_000)
}

/// Asserts `field` is one round trip of a path `delay_ms` long each way ([`path_window`]).
fn assert_path_rtt(latency: &serde_json::Value, field: &str, delay_ms: u64, what: &str) {
    let (expected, slack) = path_window(delay_ms);
    let measured = micros(latency, field);
    assert!(
        measured.abs_diff(expected) <= slack,
        "{what}: {field} {measured} us, expected {expected} ± {slack}: {latency}"
    );
}

/// Asserts what a direct client `delay_ms` away (each way) gives: the kernel's round trip and
/// the HTTP/2 PING's both the path's, the TLS flight at least that, and so no gap that says
/// proxied.
fn assert_direct_over(latency: &serde_json::Value, delay_ms: u64, what: &str) {
    assert_path_rtt(latency, "tcp_min_rtt_us", delay_ms, what);
    assert_path_rtt(latency, "h2_ping_rtt_us", delay_ms, what);
    // The client's Finished answers the server's last flight: never sooner than the path.
    let tls = micros(latency, "tls_rtt_us");
    assert!(tls + 2_000 >= 2 * delay_ms * 1000, "{what}: {latency}");
    let gap = micros(latency, "gap_us");
    assert!(
        gap < u64::from(exitvoice_schema::round_trip::POSSIBLE_GAP_US),
        "{what}: gap {gap} us: {latency}"
    );
    assert_eq!(latency["verdict"], "direct", "{what}: {latency}");
}

/// curl in namespace `ns`, over h2, to the echo at `url` pinned to `pin`.
fn curl_in(ns: &str, pin: &str, url: &str) -> Output {
    in_ns(ns, "curl")
        .args([
            "-sS",
            "--http2",
            "--max-time",
            "20",
            "-k",
            "--pinnedpubkey",
            pin,
            url,
        ])
        .output()
        .expect("run curl")
}

#[test]
fn direct_clients_over_a_slow_path_show_no_gap() {
    let mut path = SlowPath::new(SLOW_MS);
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, pin) = path.spaces.echo(&path.server, SERVER_IP, dir.path(), &[]);
    let url = format!("https://{SERVER_IP}:{port}/api/all");

    let curl = curl_in(&path.client, &pin, &url);
    let latency = latency_of(&curl, "curl");
    assert_direct_over(&latency, SLOW_MS, "curl");
    // curl and httpx finish the handshake with little work of their own: their TLS flight is
    // the path's round trip too.
    assert_path_rtt(&latency, "tls_rtt_us", SLOW_MS, "curl");

    let httpx = in_ns(&path.client, python())
        .args(["-c", HTTPX_CLIENT, &url])
        .output()
        .expect("run httpx");
    let latency = latency_of(&httpx, "httpx");
    assert_direct_over(&latency, SLOW_MS, "httpx");
    assert_path_rtt(&latency, "tls_rtt_us", SLOW_MS, "httpx");

    // Chromium shows a JSON answer as the text of a `<pre>`. Its TLS flight also holds its
    // certificate checks (tens of ms on a busy machine), which its PING answer leaves out.
    let dom = browser::load_in(&path.client, &url).dom;
    let json = dom
        .split_once("<pre")
        .and_then(|(_, rest)| rest.split_once('>'))
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .map(|(json, _)| browser::unescape(json))
        .unwrap_or_else(|| panic!("chromium: no JSON in {dom}"));
    let echo: serde_json::Value = serde_json::from_str(&json).expect("chromium: echo JSON");
    assert_eq!(echo["alpn"]["spoken"], "h2", "chromium: {echo}");
    assert_direct_over(&echo["latency"], SLOW_MS, "chromium");
}

/// The most a client's own handshake work may add to the TLS flight here, µs.
const CLIENT_FLIGHT_WORK_US: u64 = 15_000;

/// The same direct client on a shorter and a longer path: the round trips follow the path and
/// the gap stays under the `possible` threshold, whatever the distance.
#[test]
fn a_direct_clients_gap_does_not_grow_with_its_distance() {
    for delay_ms in [10, 120] {
        let mut path = SlowPath::new(delay_ms);
        let dir = tempfile::tempdir().expect("tempdir");
        let (port, pin) = path.spaces.echo(&path.server, SERVER_IP, dir.path(), &[]);
        let url = format!("https://{SERVER_IP}:{port}/api/all");
        let curl = curl_in(&path.client, &pin, &url);
        let what = format!("curl over {delay_ms} ms");
        let latency = latency_of(&curl, &what);
        assert_direct_over(&latency, delay_ms, &what);
        // The TLS flight follows the path too. It also holds the client's own work on the
        // server's flight (verifying the certificate, deriving keys), which a loaded machine
        // stretches by milliseconds: bounded above by the path's slack plus that.
        let (path_us, slack) = path_window(delay_ms);
        let most = path_us + slack + CLIENT_FLIGHT_WORK_US;
        let tls = micros(&latency, "tls_rtt_us");
        assert!(
            tls <= most,
            "{what}: tls_rtt_us {tls} us over {most}: {latency}"
        );
    }
}
