//! The broker as a forward proxy (`--proxy-listen`), with real clients: curl over HTTP
//! `CONNECT` and SOCKS5 and Chromium (through a listener with a fixed lease, as a browser sends
//! no proxy credentials) reach an echo server through simulated exits (`bench/exitsim`) with
//! the voices they have through the exit itself; a task's tunnels ride one lease; every bad
//! input is answered with what is wrong, leases nothing and shows no exit credential; a lease
//! that ends closes its tunnels within a second, an idle tunnel is closed, and the bytes of a
//! tunnel come out as they went in. A user name's `gap` key leases only an exit whose label
//! measured a round-trip gap within it.

mod support;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use support::proxy_client::{basic, closed_within, connect, tunnel};
use support::proxy_world::{World, EXITS, PASSWORD, TOKEN};
use support::tcp_echo;

/// The echo's JSON of `/api/all` fetched by curl with `args` (a proxy, or none).
fn curl_echo(url: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new("curl")
        .args(["-sk", "--http2", "--max-time", "20"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl (scripts/install-test-deps.sh)");
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("an echo")
}

/// What must be the same whichever way the client came: its TLS and HTTP/2 voices.
fn voice(echo: &serde_json::Value) -> [String; 3] {
    [
        echo["tls"]["ja4"].as_str().expect("ja4").to_owned(),
        echo["tls"]["ja3"].to_string(),
        echo["http2"]["akamai_fingerprint"]
            .as_str()
            .expect("akamai")
            .to_owned(),
    ]
}

/// The echo Chromium shows for `url` (the JSON it renders into a `<pre>`), through `proxy`.
fn chromium_echo(url: &str, proxy: Option<SocketAddr>) -> serde_json::Value {
    let profile = tempfile::tempdir().unwrap();
    let mut command = Command::new("chromium");
    command
        .args(exitvoice_auditor::probe::chromium::HEADLESS_FLAGS)
        .args(["--disable-quic", "--ignore-certificate-errors"])
        .arg(format!("--user-data-dir={}", profile.path().display()));
    if let Some(proxy) = proxy {
        command
            .arg(format!("--proxy-server=http://{proxy}"))
            .arg("--proxy-bypass-list=<-loopback>");
    }
    let out = command
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("chromium (scripts/install-test-deps.sh)");
    let dom = String::from_utf8_lossy(&out.stdout);
    let text = dom
        .split_once("<pre")
        .and_then(|(_, rest)| rest.split_once('>'))
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .map(|(json, _)| {
            json.replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
        })
        .unwrap_or_else(|| {
            let log = String::from_utf8_lossy(&out.stderr);
            panic!("chromium showed no echo: {dom}\n{log}")
        });
    serde_json::from_str(&text).expect("the echo's JSON")
}

/// Sends `request` on a new connection to `proxy` and reads the answer until the broker
/// closes it (or 5 s pass).
fn exchange(proxy: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(proxy).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn real_clients_keep_their_voices_through_the_proxy_and_a_task_rides_one_lease() {
    let world = World::start(&["--task-idle", "3s"]);
    let url = world.echo_url("/api/all");
    let exit = format!("http://exit-0:{PASSWORD}@{}", world.sim.http);
    let direct = voice(&curl_echo(&url, &["-x", &exit]));

    let proxy = world.proxy();
    let through = curl_echo(
        &url,
        &[
            "-x",
            &format!("http://class-anonymous-task-t1:{TOKEN}@{proxy}"),
        ],
    );
    assert_eq!(
        voice(&through),
        direct,
        "curl through CONNECT: the same voice"
    );
    let socks = curl_echo(
        &url,
        &[
            "-x",
            &format!("socks5h://class-anonymous-task-t2:{TOKEN}@{proxy}"),
        ],
    );
    assert_eq!(voice(&socks), direct, "curl through SOCKS5: the same voice");

    // The task's next tunnel, within --task-idle, rides the same lease: no grant.
    let served = world.served();
    let again = curl_echo(
        &url,
        &[
            "-x",
            &format!("http://class-anonymous-task-t1:{TOKEN}@{proxy}"),
        ],
    );
    assert_eq!(voice(&again), direct);
    assert_eq!(
        world.served(),
        served,
        "task t1's second tunnel joined its lease"
    );
    let other = curl_echo(
        &url,
        &[
            "-x",
            &format!("http://class-anonymous-task-t3:{TOKEN}@{proxy}"),
        ],
    );
    assert_eq!(voice(&other), direct);
    assert_eq!(world.served(), served + 1, "another task, another lease");

    // Chromium sends no proxy credentials: the listener's fixed lease serves it. Its voice is
    // the one it has through a bare CONNECT relay (an exit without credentials): Chromium
    // speaks alike through any proxy, and not quite as it does without one.
    let bare = world.bare_connect_proxy();
    let chromium_direct = chromium_echo(&url, Some(bare));
    let chromium_through = chromium_echo(&url, Some(world.broker.proxies[1]));
    assert_eq!(
        chromium_through["tls"]["ja4"], chromium_direct["tls"]["ja4"],
        "Chromium's ja4"
    );
    assert_eq!(
        chromium_through["http2"]["akamai_fingerprint"],
        chromium_direct["http2"]["akamai_fingerprint"]
    );
    let metrics = world.metrics();
    assert!(
        metrics
            .contains("exitvoice_broker_tunnels_opened_total{class=\"anonymous\",joined=\"true\"}"),
        "{metrics}"
    );
}

/// `task-near-gap-15`: the task's tunnel rides the one exit whose label measured a gap within
/// 15 ms, never the one over it or the one never measured; while it is held, another task
/// that asks for the same limit is refused as when nothing is free.
#[test]
fn a_user_name_with_a_gap_limit_rides_an_exit_measured_within_it() {
    let world = World::start_labelled(
        &[],
        &["--task-idle", "30s"],
        &[
            ("sim-0", Some(30_000)),
            ("sim-1", Some(5_000)),
            ("sim-2", None),
        ],
    );
    let proxy = world.proxy();
    let url = world.echo_url("/api/all");
    let exit = format!("http://exit-0:{PASSWORD}@{}", world.sim.http);
    let direct = voice(&curl_echo(&url, &["-x", &exit]));
    let through = curl_echo(
        &url,
        &[
            "-x",
            &format!("http://class-anonymous-task-near-gap-15:{TOKEN}@{proxy}"),
        ],
    );
    assert_eq!(
        voice(&through),
        direct,
        "the echo answered through the exit"
    );
    let held: Vec<(String, String)> = world.api("/v1/exits")["exits"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|exit| {
            let name = exit["exit"].as_str().unwrap().to_owned();
            exit["holders"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |holder| (name.clone(), holder["class"].as_str().unwrap().to_owned()))
        })
        .collect();
    assert_eq!(held, [("sim-1".to_owned(), "anonymous".to_owned())]);
    let target = format!("127.0.0.1:{}", world.echo.port);
    let refused = exchange(
        proxy,
        &connect("class-anonymous-task-other-gap-15-wait-0", TOKEN, &target),
    );
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(
        refused.contains("within a 15 ms gap"),
        "the refusal names the limit: {refused}"
    );
    assert_eq!(world.live(), 1, "the refused task leased nothing");
}

#[test]
fn bad_inputs_are_answered_and_lease_nothing_and_no_exit_credential_leaks() {
    let world = World::start(&["--proxy-handshake", "1s", "--proxy-wait", "300ms"]);
    let proxy = world.proxy();
    let target = format!("127.0.0.1:{}", world.echo.port);
    let served = world.served();
    let mut answers = Vec::new();
    let mut expect = |request: Vec<u8>, status: &str, says: &str| {
        let answer = exchange(proxy, &request);
        assert!(answer.starts_with(status), "{status}: {answer}");
        assert!(answer.contains(says), "{says}: {answer}");
        answers.push(answer);
    };
    let without = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    expect(
        without.into_bytes(),
        "HTTP/1.1 407",
        "Proxy-Authenticate: Basic",
    );
    let wrong = format!(
        "CONNECT {target} HTTP/1.1\r\nProxy-Authorization: Basic {}\r\n\r\n",
        basic("class-anonymous", "not-the-token-at-all")
    );
    expect(wrong.into_bytes(), "HTTP/1.1 407", "not the broker's token");
    for (user, says) in [
        ("class-anonymous-tsak-1", "unknown key \"tsak\""),
        ("class-anonymus", "is not identity, anonymous or stateless"),
        ("task-1", "must name a class"),
        ("class-anonymous-country-deu", "not two letters"),
        (
            "class-anonymous-gap-15ms",
            "gap: \"15ms\" is not a whole number of ms",
        ),
        (
            "class-anonymous-gap-%2D1",
            "gap: \"-1\" is not a whole number of ms",
        ),
        ("class-anonymous-gap-60001", "from 0 to 60000"),
        ("class-anonymous-wait-999999999", "wait_ms is at most"),
    ] {
        expect(connect(user, TOKEN, &target), "HTTP/1.1 407", says);
    }
    expect(
        b"CONNECT nowhere HTTP/1.1\r\n\r\n".to_vec(),
        "HTTP/1.1 400",
        "host:port",
    );
    expect(
        b"GET /x HTTP/1.1\r\n\r\n".to_vec(),
        "HTTP/1.1 400",
        "absolute http:// URL",
    );
    let flood: String = (0..100).map(|i| format!("X-{i}: y\r\n")).collect();
    let flood = format!("CONNECT {target} HTTP/1.1\r\n{flood}\r\n");
    expect(flood.into_bytes(), "HTTP/1.1 431", "too large");

    // A client that says nothing is closed at the handshake's deadline.
    let mut silent = TcpStream::connect(proxy).unwrap();
    let closed = closed_within(&mut silent, Duration::from_secs(5)).expect("closed");
    assert!(closed < Duration::from_secs(3), "closed after {closed:?}");

    // SOCKS5: credentials refused by the RFC 1929 status; BIND is not supported.
    let mut socks = TcpStream::connect(proxy).unwrap();
    socks
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let user = b"class-anonymous-tsak-1";
    let mut hello = vec![5, 1, 2, 1, u8::try_from(user.len()).unwrap()];
    hello.extend_from_slice(user);
    hello.push(u8::try_from(TOKEN.len()).unwrap());
    hello.extend_from_slice(TOKEN.as_bytes());
    socks.write_all(&hello).unwrap();
    let mut reply = [0; 4];
    socks.read_exact(&mut reply).unwrap();
    assert_eq!(
        reply,
        [5, 2, 1, 1],
        "username/password chosen, then refused"
    );
    assert_eq!(socks.read(&mut [0; 8]).unwrap_or(0), 0, "and closed");

    assert_eq!(world.served(), served, "no bad input leased anything");

    // The exit cannot reach the target: 502 naming the class, and the lease ends.
    let (_socket, closed_port) = support::closed_port();
    let dead = format!("127.0.0.1:{closed_port}");
    let answer = exchange(proxy, &connect("class-anonymous", TOKEN, &dead));
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(
        answer.contains("X-Exitvoice-Exit-Error: proxy_refused"),
        "{answer}"
    );
    answers.push(answer);

    // Every exit held by a tunnel: the next request waits, then 503 with Retry-After.
    let echo_port = tcp_echo::on(&world.runtime);
    let held: Vec<TcpStream> = (0..EXITS)
        .map(|i| {
            let user = format!("class-anonymous-task-hold{i}");
            tunnel(proxy, &user, TOKEN, &format!("127.0.0.1:{echo_port}"))
        })
        .collect();
    let answer = exchange(proxy, &connect("class-anonymous-task-late", TOKEN, &target));
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("Retry-After: "), "{answer}");
    answers.push(answer);
    drop(held);

    let log = world.broker.log();
    let metrics = world.metrics();
    for (what, text) in [("log", &log), ("metrics", &metrics)]
        .into_iter()
        .chain(answers.iter().map(|a| ("answer", a)))
    {
        assert!(
            !text.contains(PASSWORD),
            "the exit's password in the {what}"
        );
        assert!(!text.contains(TOKEN), "the token in the {what}");
    }
    assert!(
        metrics.contains("exitvoice_broker_tunnels_refused_total{reason=\"credentials\"}"),
        "{metrics}"
    );
}

#[test]
fn no_tunnel_outlives_its_lease_or_its_idle_limit_and_bytes_pass_untouched() {
    let world = World::start(&["--tunnel-idle", "2s", "--task-idle", "1s"]);
    let proxy = world.proxy();
    let echo_port = tcp_echo::on(&world.runtime);
    let target = format!("127.0.0.1:{echo_port}");

    // A megabyte of random bytes comes back as it went.
    let mut stream = tunnel(proxy, "class-anonymous-task-bytes", TOKEN, &target);
    let sent: Vec<u8> = (0..1_048_576_u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let writer = {
        let mut stream = stream.try_clone().unwrap();
        let sent = sent.clone();
        std::thread::spawn(move || stream.write_all(&sent).unwrap())
    };
    let mut back = vec![0; sent.len()];
    stream.read_exact(&mut back).unwrap();
    writer.join().unwrap();
    assert!(back == sent, "the bytes came back changed");

    // The task's outcome ends its lease: the tunnel is closed within a second.
    let reported = Instant::now();
    let (code, answer) = support::broker::lease(
        &world.broker.url,
        TOKEN,
        &["report", "bytes", "--outcome", "403"],
    );
    assert_eq!(code, 0, "exitvoice lease report: {answer}");
    assert_eq!(answer["released"], true);
    let closed = closed_within(&mut stream, Duration::from_secs(3)).expect("closed");
    assert!(
        closed < Duration::from_secs(1),
        "closed {:?} after the lease ended",
        reported.elapsed()
    );
    assert_eq!(
        world.report("bytes", "403"),
        "404",
        "the task holds no lease now"
    );

    // A tunnel that moves nothing is closed at --tunnel-idle, and its lease ends with it.
    let mut idle = tunnel(proxy, "class-anonymous", TOKEN, &target);
    let opened = Instant::now();
    assert_eq!(world.live(), 1);
    let closed = closed_within(&mut idle, Duration::from_secs(5)).expect("idle closed");
    assert!(
        closed >= Duration::from_millis(1900) && closed < Duration::from_secs(3),
        "idle tunnel closed after {:?}",
        opened.elapsed()
    );
    // A lease without a task ends with its tunnel; a task's, --task-idle after its last one.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(world.live(), 0, "the idle tunnel's lease ended with it");
    let task = tunnel(proxy, "class-anonymous-task-t9", TOKEN, &target);
    drop(task);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        world.live(),
        1,
        "a task's lease stays after its last tunnel"
    );
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(world.live(), 0, "and ends --task-idle later");
    let metrics = world.metrics();
    for reason in ["lease_ended", "idle"] {
        assert!(
            metrics.contains(&format!(
                "exitvoice_broker_tunnels_closed_total{{reason=\"{reason}\"}}"
            )),
            "{reason}: {metrics}"
        );
    }
}

#[test]
fn tls_to_the_proxy_and_plain_http_origins() {
    let world = World::start(&["--tls"]);
    let url = world.echo_url("/api/all");
    let exit = format!("http://exit-0:{PASSWORD}@{}", world.sim.http);
    let direct = voice(&curl_echo(&url, &["-x", &exit]));
    let proxy = world.proxy();
    let through = curl_echo(
        &url,
        &[
            "--proxy-insecure",
            "-x",
            &format!(
                "https://class-anonymous-task-tls:{TOKEN}@127.0.0.1:{}",
                proxy.port()
            ),
        ],
    );
    assert_eq!(voice(&through), direct, "curl through TLS to the proxy");

    // Absolute-form: the origin gets the request in origin-form, without the proxy's fields.
    let origin = world.http_origin();
    let out = Command::new("curl")
        .args(["-s", "--max-time", "10", "-x"])
        .arg(format!("http://class-stateless:{TOKEN}@{proxy}"))
        .arg(format!("http://127.0.0.1:{origin}/a/b?c=1"))
        .output()
        .unwrap();
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(seen.starts_with("GET /a/b?c=1 HTTP/1.1\r\n"), "{seen}");
    assert!(
        seen.contains(&format!("Host: 127.0.0.1:{origin}")),
        "{seen}"
    );
    assert!(!seen.to_ascii_lowercase().contains("proxy-"), "{seen}");
    assert!(!seen.contains(TOKEN), "{seen}");
}
