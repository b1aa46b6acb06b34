//! `exitvoice serve`'s UDP listener against independent QUIC clients on loopback: aioquic (its
//! own SETTINGS, header list and transport parameters, read from its objects at run time, are
//! the expected values), hostile datagrams and an Initial flood, the amplification limit before
//! address validation, and `alt-svc` on TCP. Needs `.tools/venv` with aioquic
//! (scripts/install-test-deps.sh).

mod echo_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use echo_support::{curl, EchoServer};
use exitvoice_schema::ObservationQuery;
use serde_json::Value;
use tokio::net::UdpSocket;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    let python = root().join(".tools/venv/bin/python");
    assert!(
        python.exists(),
        "run scripts/install-test-deps.sh (needs .tools/venv with aioquic)"
    );
    python
}

/// Runs tests/clients/py_aioquic.py: GET each path on one connection, trusting the server's
/// generated certificate; `None` when it failed.
fn aioquic(server: &EchoServer, paths: &[&str]) -> Option<Value> {
    aioquic_trusting(server, &server.cert_pem(), paths)
}

/// [`aioquic`], trusting `ca`.
fn aioquic_trusting(server: &EchoServer, ca: &std::path::Path, paths: &[&str]) -> Option<Value> {
    let output = Command::new(python())
        .arg(root().join("tests/clients/py_aioquic.py"))
        .args(["127.0.0.1", &server.port.to_string(), "localhost"])
        .arg(ca)
        .args(paths)
        .output()
        .expect("run py_aioquic.py");
    if !output.status.success() {
        eprintln!("aioquic: {}", String::from_utf8_lossy(&output.stderr));
        return None;
    }
    serde_json::from_slice(&output.stdout).ok()
}

/// First flights of `count` fresh aioquic connections, each a list of datagrams.
fn first_flights(count: usize) -> Vec<Vec<Vec<u8>>> {
    let output = Command::new(python())
        .arg(root().join("tests/clients/py_quic_initial.py"))
        .args(["localhost", &count.to_string()])
        .output()
        .expect("run py_quic_initial.py");
    assert!(output.status.success(), "py_quic_initial.py failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            line.split(',')
                .map(|d| hex::decode(d).expect("hex"))
                .collect()
        })
        .collect()
}

fn answer<'a>(run: &'a Value, path: &str) -> &'a Value {
    run["answers"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["path"] == path))
        .unwrap_or_else(|| panic!("no answer for {path}: {run}"))
}

#[tokio::test]
async fn aioquic_gets_its_own_settings_headers_and_parameters_back_and_is_stored() {
    let server = EchoServer::start(&[]);
    let run = aioquic(&server, &["/api/all", "/api/clean", "/probe/tok-aioquic.1"])
        .expect("aioquic completes its requests");
    let all = answer(&run, "/api/all");
    assert_eq!(all["status"], 200, "{all}");
    let echo = &all["body"];
    assert_eq!(echo["alpn"]["spoken"], "h3", "{echo}");
    assert_eq!(echo["alpn"]["negotiated"], "h3");
    assert_eq!(echo["alpn"]["offered"], serde_json::json!(["h3"]));
    // QUIC's own round trip, end to end: measured, but no transport below it to find a gap.
    let latency = &echo["latency"];
    let quic_rtt = latency["quic_rtt_us"].as_u64().expect("quic_rtt_us");
    assert!(quic_rtt > 0 && quic_rtt < 1_000_000, "{latency}");
    assert_eq!(latency["verdict"], "unknown", "{latency}");
    assert!(
        latency["reason"]
            .as_str()
            .is_some_and(|r| r.contains("QUIC")),
        "{latency}"
    );
    assert!(latency.get("gap_us").is_none() && latency.get("tcp_rtt_us").is_none());

    // HTTP/3 SETTINGS: what aioquic says it sent, in the order it encoded them.
    let sent: Vec<(u64, u64)> = run["h3_settings"]
        .as_array()
        .expect("settings")
        .iter()
        .map(|p| (p[0].as_u64().expect("id"), p[1].as_u64().expect("value")))
        .collect();
    let echoed: Vec<(u64, u64)> = echo["http3"]["settings"]
        .as_array()
        .unwrap_or_else(|| panic!("http3.settings: {echo}"))
        .iter()
        .map(|s| {
            (
                s["id"].as_u64().expect("id"),
                s["value"].as_u64().expect("value"),
            )
        })
        .collect();
    assert!(!sent.is_empty());
    assert_eq!(echoed, sent);

    // Field order: the header list aioquic sent, pseudo-headers and the rest apart.
    let headers: Vec<&str> = run["headers_sent"]
        .as_array()
        .expect("headers")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let pseudo: Vec<&str> = headers
        .iter()
        .copied()
        .filter(|h| h.starts_with(':'))
        .collect();
    let regular: Vec<&str> = headers
        .iter()
        .copied()
        .filter(|h| !h.starts_with(':'))
        .collect();
    assert_eq!(
        echo["http3"]["pseudo_header_order"],
        serde_json::json!(pseudo)
    );
    assert_eq!(echo["http3"]["header_order"], serde_json::json!(regular));
    // pingly's h3_text, from aioquic's own values.
    let mut sorted = sent.clone();
    sorted.sort_by_key(|&(id, _)| (id >= 0x21 && (id - 0x21) % 0x1f == 0, id));
    let settings_text: Vec<String> = sorted
        .iter()
        .map(|&(id, value)| {
            if id >= 0x21 && (id - 0x21) % 0x1f == 0 {
                "GREASE".to_owned()
            } else {
                format!("{id}:{value}")
            }
        })
        .collect();
    let letters: Vec<String> = pseudo.iter().map(|p| p[1..2].to_owned()).collect();
    assert_eq!(
        echo["http3"]["h3_text"],
        format!("{}|{}", settings_text.join(";"), letters.join(","))
    );
    assert!(echo["http3"]["voice_id"]
        .as_str()
        .is_some_and(|v| v.starts_with("h3v1_")));

    // Transport parameters: the ids in the order aioquic wrote them, and each integer value
    // aioquic's own parser reads from the same bytes.
    let quic = &echo["quic"];
    let ids: Vec<u64> = quic["transport_parameters"]
        .as_array()
        .unwrap_or_else(|| panic!("quic.transport_parameters: {quic}"))
        .iter()
        .map(|p| p["id"].as_u64().expect("id"))
        .collect();
    let expected_ids: Vec<u64> = run["transport_parameters"]["ids_in_order"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|v| v.as_u64().expect("id"))
        .collect();
    assert_eq!(ids, expected_ids);
    let by_name: BTreeMap<&str, &Value> = quic["transport_parameters"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|p| Some((p["name"].as_str()?, &p["value"])))
        .collect();
    let integers = run["transport_parameters"]["integers"]
        .as_object()
        .expect("integers");
    let mut compared = 0;
    for (name, value) in integers {
        if let Some(echoed) = by_name.get(name.as_str()) {
            assert_eq!(*echoed, value, "transport parameter {name}");
            compared += 1;
        }
    }
    assert!(compared >= 6, "only {compared} integer parameters compared");
    assert_eq!(quic["version"], "0x00000001");
    assert_eq!(quic["client_hello_complete"], true);
    assert!(quic["datagram_sizes"]
        .as_array()
        .expect("sizes")
        .iter()
        .all(|s| s.as_u64() >= Some(1200)));
    assert!(quic["voice_id"]
        .as_str()
        .is_some_and(|v| v.starts_with("quicv2_")));

    // The ClientHello went through the TCP analysis: JA4 with `q`, ALPN h3.
    let ja4 = echo["tls"]["ja4"].as_str().expect("ja4");
    assert!(ja4.starts_with("q13d") && ja4[8..10] == *"h3", "{ja4}");

    let clean = &answer(&run, "/api/clean")["body"];
    assert_eq!(clean["spoken"], "h3");
    assert_eq!(clean["ja4"], ja4);
    assert_eq!(clean["http3_voice_id"], echo["http3"]["voice_id"]);
    assert_eq!(clean["quic_voice_id"], quic["voice_id"]);
    let probe = &answer(&run, "/probe/tok-aioquic.1")["body"];
    assert_eq!(probe["token"], "tok-aioquic.1");
    assert_eq!(probe["request"]["index"], 3);

    // Stored: the probe's request under its token, with its connection's voices.
    let store = exitvoice_store::Store::open(&server.db())
        .await
        .expect("open the server's database");
    let deadline = Instant::now() + Duration::from_secs(10);
    let stored = loop {
        let stored = store
            .quic_requests(&ObservationQuery {
                token: Some("tok-aioquic.1".to_owned()),
                limit: 10,
                raw: true,
                ..ObservationQuery::default()
            })
            .await
            .expect("list");
        if !stored.is_empty() || Instant::now() > deadline {
            break stored;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(stored.len(), 1, "the probe's request is stored");
    assert_eq!(stored[0].request.index, 3);
    assert_eq!(stored[0].request.path, "/probe/tok-aioquic.1");
    assert_eq!(
        stored[0].request.pseudo_header_order,
        pseudo.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>()
    );
    let row = stored[0].connection.as_ref().expect("its connection");
    assert_eq!(row.ja4.as_deref(), Some(ja4));
    assert_eq!(row.quic_voice_id.as_deref(), quic["voice_id"].as_str());
    assert_eq!(
        row.http3_voice_id.as_deref(),
        echo["http3"]["voice_id"].as_str()
    );
    assert!(
        row.hello.starts_with(&[0x01]),
        "the ClientHello handshake message"
    );
    let every = ObservationQuery {
        limit: 10,
        ..ObservationQuery::default()
    };
    assert_eq!(store.quic_requests(&every).await.expect("list").len(), 3);

    let health = server.healthz();
    assert!(health["quic"]["handshakes"].as_u64() >= Some(1), "{health}");
    assert!(health["quic"]["hellos"].as_u64() >= Some(1), "{health}");
    assert!(
        health["quic"]["h3_requests"].as_u64() >= Some(3),
        "{health}"
    );
}

/// `curl -sI` over TCP, the `alt-svc` header's value if any.
fn alt_svc(server: &EchoServer) -> Option<String> {
    let out = curl(&[
        "-sk",
        "-o",
        "/dev/null",
        "-D",
        "-",
        &server.url("/api/clean"),
    ]);
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("alt-svc")
            .then(|| value.trim().to_owned())
    })
}

#[test]
fn alt_svc_on_tcp_only_while_quic_is_on() {
    let server = EchoServer::start(&[]);
    assert_eq!(
        alt_svc(&server),
        Some(format!("h3=\":{}\"; ma=86400", server.port))
    );
    let off = EchoServer::start(&["--no-quic"]);
    assert_eq!(alt_svc(&off), None);
    assert!(
        aioquic(&off, &["/api/clean"]).is_none(),
        "no UDP listener with --no-quic"
    );
    assert_eq!(off.healthz()["quic"], serde_json::json!({}));
}

/// Sends `datagrams` from one fresh socket and counts what comes back within `listen`, never
/// answering: the address is never validated (RFC 9000 section 8.1).
async fn silent_client(to: SocketAddr, datagrams: &[Vec<u8>], listen: Duration) -> (usize, usize) {
    let socket = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let mut sent = 0;
    for d in datagrams {
        sent += socket.send_to(d, to).await.expect("send");
    }
    let mut received = 0;
    let deadline = tokio::time::Instant::now() + listen;
    let mut buf = vec![0; 65_536];
    while let Ok(Ok((n, _))) = tokio::time::timeout_at(deadline, socket.recv_from(&mut buf)).await {
        received += n;
    }
    (sent, received)
}

/// A self-signed certificate for `localhost` padded with names until its DER is over `min`
/// bytes; (cert.pem, key.pem) in `dir`.
fn large_certificate(dir: &std::path::Path, min: usize) -> (PathBuf, PathBuf, usize) {
    let mut names = vec!["localhost".to_owned()];
    names.extend((0..min / 24).map(|i| format!("padding-name-{i:05}.exitvoice.test")));
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(names)
        .expect("params")
        .self_signed(&key)
        .expect("certificate");
    let der_len = cert.der().len();
    let (cert_path, key_path) = (dir.join("large.pem"), dir.join("large.key"));
    std::fs::write(&cert_path, cert.pem()).expect("write cert");
    std::fs::write(&key_path, key.serialize_pem()).expect("write key");
    (cert_path, key_path, der_len)
}

#[tokio::test]
async fn never_more_than_three_times_the_bytes_of_an_unvalidated_address() {
    let flight = first_flights(1).remove(0);
    let flight_len: usize = flight.iter().map(Vec::len).sum();
    // A certificate larger than three times the client's flight: a server that ignored the
    // limit would send more than that in its first flight alone.
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key, der_len) = large_certificate(dir.path(), 4 * flight_len);
    assert!(der_len > 3 * flight_len);
    let server = EchoServer::start(&[
        "--cert",
        cert.to_str().expect("utf-8"),
        "--key",
        key.to_str().expect("utf-8"),
    ]);
    let to = SocketAddr::from(([127, 0, 0, 1], server.port));
    // Long enough for several probe timeouts: an unbounded server would also resend.
    let (sent, received) = silent_client(to, &flight, Duration::from_secs(5)).await;
    eprintln!(
        "amplification: certificate {der_len} bytes, sent {sent} bytes, received {received} bytes"
    );
    assert!(received > 0, "the server answered the Initial");
    assert!(received <= 3 * sent, "sent {sent}, received {received}");
    // The same certificate does reach a client that validates its address.
    let run = aioquic_trusting(&server, &cert, &["/api/clean"])
        .expect("aioquic with the large certificate");
    assert_eq!(answer(&run, "/api/clean")["status"], 200);
}

/// Offset of a long-header Initial's Length field (RFC 9000 section 17.2.2), for a packet with
/// a one-byte token length (aioquic sends no token).
fn length_offset(packet: &[u8]) -> usize {
    let dcid_len = usize::from(packet[5]);
    let scid_len = usize::from(packet[6 + dcid_len]);
    8 + dcid_len + scid_len
}

/// Hostile variants of a real client Initial.
fn hostile_datagrams(template: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let length_at = length_offset(template);
    let mut bad_length = template.to_vec();
    bad_length[length_at..length_at + 2].copy_from_slice(&[0x7f, 0xff]);
    let mut corrupted = template.to_vec();
    corrupted[length_at + 30] ^= 0x55;
    // A short Initial (Length 100) whose bytes do not decrypt, then garbage to 1200 bytes.
    let mut coalesced = template[..length_at].to_vec();
    coalesced.extend([0x40, 100]);
    coalesced.extend((0..1200 - coalesced.len()).map(|i| (i * 7) as u8));
    let mut grease_version = template.to_vec();
    grease_version[1..5].copy_from_slice(&[0x1a, 0x2a, 0x3a, 0x4a]);
    let mut random = vec![0xc3];
    random.extend((0..1199).map(|i| (i * 31 + 7) as u8));
    vec![
        ("truncated to 600", template[..600].to_vec()),
        ("truncated to 40", template[..40].to_vec()),
        ("one byte", template[..1].to_vec()),
        ("Length past the datagram", bad_length),
        ("corrupted payload", corrupted),
        ("coalesced garbage", coalesced),
        ("GREASE version", grease_version),
        ("random long header", random),
        ("short header", vec![0x40; 1200]),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_datagrams_and_an_initial_flood_leave_legit_clients_served() {
    const FLOOD: usize = 400;
    const LEGIT_RUNS: usize = 10;
    let server = EchoServer::start(&[]);
    let to = SocketAddr::from(([127, 0, 0, 1], server.port));
    let flights = first_flights(FLOOD);
    let hostile = hostile_datagrams(&flights[0][0]);

    // Every hostile kind from 20 source ports, then the flood: each fresh first flight from its
    // own source port, while the legitimate client runs.
    let attack = tokio::spawn(async move {
        for _ in 0..20 {
            let socket = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
            for (_, datagram) in &hostile {
                socket.send_to(datagram, to).await.expect("send");
                // Paced, so the kernel's receive buffer does not drop them.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        let started = Instant::now();
        let mut sockets = Vec::with_capacity(FLOOD);
        for flight in &flights {
            let socket = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
            for datagram in flight {
                socket.send_to(datagram, to).await.expect("send");
            }
            sockets.push(socket);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        started.elapsed()
    });
    let (mut ok, mut total) = (0, 0);
    for _ in 0..LEGIT_RUNS {
        let run = {
            let port = server.port;
            let cert = server.cert_pem();
            tokio::task::spawn_blocking(move || {
                Command::new(python())
                    .arg(root().join("tests/clients/py_aioquic.py"))
                    .args(["127.0.0.1", &port.to_string(), "localhost"])
                    .arg(cert)
                    .args(["/api/clean", "/api/all"])
                    .output()
            })
            .await
            .expect("join")
            .expect("run py_aioquic.py")
        };
        total += 2;
        if run.status.success() {
            let run: Value = serde_json::from_slice(&run.stdout).expect("json");
            ok += run["answers"]
                .as_array()
                .expect("answers")
                .iter()
                .filter(|a| a["status"] == 200)
                .count();
        }
    }
    let flood_time = attack.await.expect("attack");
    let health = server.healthz();
    eprintln!(
        "flood: {FLOOD} first flights in {flood_time:?}; legit aioquic: {ok}/{total} requests; quic {}",
        health["quic"]
    );
    assert!(ok * 10 >= total * 9, "legit success {ok}/{total}");
    assert_eq!(health["status"], "ok");
    let quic = health["quic"].as_object().expect("quic counters");
    let malformed: u64 = quic
        .iter()
        .filter(|(k, _)| k.starts_with("malformed_"))
        .filter_map(|(_, v)| v.as_u64())
        .sum();
    // 20 ports × the six kinds that start like an Initial but cannot be read, each counted by
    // what is wrong with it: a Length past the datagram's end (cut to 40 bytes, Length
    // rewritten), no decryption (corrupted, coalesced garbage), cut inside the version (one
    // byte); cut to 600 bytes, aioquic's Initial is whole but its datagram under 1200 bytes
    // (RFC 9000 section 14.1).
    assert!(malformed >= 20 * 5, "malformed counted: {quic:?}");
    assert!(quic["malformed_length"].as_u64() >= Some(40), "{quic:?}");
    assert!(quic["malformed_decrypt"].as_u64() >= Some(40), "{quic:?}");
    assert!(quic["malformed_truncated"].as_u64() >= Some(20), "{quic:?}");
    assert!(quic["initial_under_1200"].as_u64() >= Some(20), "{quic:?}");
    assert!(quic["greased_version"].as_u64() >= Some(20), "{quic:?}");
    assert!(quic["unsupported_version"].as_u64() >= Some(20), "{quic:?}");
    assert!(
        quic["attempts"].as_u64() >= Some(FLOOD as u64 / 2),
        "{quic:?}"
    );
    // The server is still serving QUIC after all of it.
    let after = aioquic(&server, &["/api/clean"]).expect("served after the flood");
    assert_eq!(answer(&after, "/api/clean")["status"], 200);
}
