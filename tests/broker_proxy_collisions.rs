//! No self-collision at the exits through the broker's proxy port, whatever the clients pool.
//! Three `exitvoice broker` instances with `--proxy-listen` share one store (a throwaway
//! PostgreSQL, then one Redis). 32 worker processes of plain `requests`, each keeping one
//! Session for its whole run (every finished task leaves its tunnel open in the pool), and two
//! Scrapy crawls (whose downloader pools tunnels per proxy credentials) reach an origin through
//! them, each task's proxy user name naming the task. The exits (`bench/exitsim`: 8 plain exits
//! and a gateway of 4 sticky sessions) count their own tunnels to the origin open at once, per
//! exit and per gateway session id: the figure that counts, not the broker's.
//!
//! Mid-run one instance is killed (SIGKILL), and the exit under a tunnel the test holds open is
//! turned `quarantine` by a real audit (its proxy password broken in the auditor's exits
//! file): that tunnel, and every worker's tunnel on that exit, must close within a second of
//! the brokers learning the label. The same workers pointed straight at the exits, in the same
//! run, collide: else the run proves nothing.

mod support;

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use exitvoice_exitsim::Simulator;
use support::broker::Broker;
use support::{proxy_client, simulated, tcp_echo, workers};

const PLAIN_EXITS: usize = 8;
const GATEWAY_SLOTS: usize = 4;
const WORKERS: usize = 32;
const CRAWLS: usize = 2;
const TASKS: &str = "4";
const REQUESTS: &str = "3";
const HOLD_MS: &str = "100";
const PASSWORD: &str = "proxy-collide-pw";
const TOKEN: &str = "proxy-collision-token-0123456789";
/// How often the brokers read the labels: a quarantine takes effect within this.
const LABELS_REFRESH: Duration = Duration::from_millis(500);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python(venv: &str) -> PathBuf {
    let python = root().join(".tools").join(venv).join("bin/python");
    assert!(python.exists(), "run scripts/install-test-deps.sh ({venv})");
    python
}

/// The exits file: the simulator's plain exits and, as exit number `PLAIN_EXITS`, a gateway
/// whose user name carries the session id; the exit named `broken` (if any) with a wrong
/// password.
fn exits_file(
    path: &Path,
    sim: &Simulator,
    echo: &support::EchoServer,
    broken: Option<&str>,
) -> PathBuf {
    simulated::exits_file(path, "", PLAIN_EXITS, sim, PASSWORD, echo);
    let mut text = std::fs::read_to_string(path).unwrap();
    text.push_str(&format!(
        "\n[[exits]]\nname = \"gw\"\nurl = \"http://exit-{PLAIN_EXITS}-sessid-{{session}}:{PASSWORD}@{}\"\nsessions = {GATEWAY_SLOTS}\nsticky = \"10m\"\n",
        sim.http
    ));
    if let Some(broken) = broken {
        let blocks: Vec<String> = text
            .split("\n[[exits]]\n")
            .map(|block| {
                if block.starts_with(&format!("name = \"{broken}\"\n")) {
                    block.replace(&format!(":{PASSWORD}@"), ":not-the-password@")
                } else {
                    block.to_owned()
                }
            })
            .collect();
        text = blocks.join("\n[[exits]]\n");
        assert!(text.contains("not-the-password"), "no exit {broken}");
    }
    std::fs::write(path, text).unwrap();
    path.to_owned()
}

/// The simulator's number of the exit named `name`.
fn exit_number(name: &str) -> usize {
    match name.strip_prefix("sim-") {
        Some(n) => n.parse().unwrap(),
        None => PLAIN_EXITS,
    }
}

fn sum(summaries: &[serde_json::Value], key: &str) -> u64 {
    summaries.iter().filter_map(|s| s[key].as_u64()).sum()
}

/// The most tunnels open at once on one plain exit, and on one gateway session id.
fn collisions(sim: &Simulator) -> (u64, u32) {
    let snapshot = sim.snapshot(true);
    let plain = snapshot
        .per_exit
        .unwrap()
        .iter()
        .take(PLAIN_EXITS)
        .map(|[_, max]| *max)
        .max()
        .unwrap_or(0);
    (plain, snapshot.max_in_flight_per_session)
}

/// A `requests` worker (`tests/tools/proxy_worker.py`) with `how` (its proxies).
fn worker(name: &str, how: &[String], ca: &Path, target: &str) -> Child {
    Command::new(python("venv"))
        .arg(root().join("tests/tools/proxy_worker.py"))
        .args(how)
        .args(["--token", TOKEN, "--worker", name, "--tasks", TASKS])
        .args(["--requests", REQUESTS, "--hold-ms", HOLD_MS, "--ca"])
        .arg(ca)
        .arg(target)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a worker")
}

/// A tunnel the test holds open through a broker, busy (a byte out and back every 100 ms),
/// and when it closed.
struct Held {
    exit: String,
    closed: Arc<std::sync::Mutex<Option<Instant>>>,
    stop: Arc<AtomicBool>,
}

impl Held {
    fn open(runtime: &tokio::runtime::Runtime, broker: &Broker) -> Self {
        let port = tcp_echo::on(runtime);
        let mut stream = proxy_client::tunnel(
            broker.proxies[0],
            "class-anonymous-task-held-holder-held",
            TOKEN,
            &format!("127.0.0.1:{port}"),
        );
        let exits = curl_json(&format!("{}/v1/exits", broker.url));
        let exit = exits["exits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|exit| {
                exit["holders"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|h| h["holder"] == "held")
            })
            .and_then(|exit| exit["exit"].as_str())
            .unwrap_or_else(|| panic!("the held tunnel's lease is on no exit: {exits}"))
            .to_owned();
        let closed = Arc::new(std::sync::Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        std::thread::spawn({
            let (closed, stop) = (closed.clone(), stop.clone());
            move || {
                let mut byte = [0; 1];
                while !stop.load(Ordering::Relaxed) {
                    let ok =
                        stream.write_all(b"x").is_ok() && matches!(stream.read(&mut byte), Ok(1));
                    if !ok {
                        *closed.lock().unwrap() = Some(Instant::now());
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        });
        Self { exit, closed, stop }
    }

    fn closed(&self) -> Option<Instant> {
        *self.closed.lock().unwrap()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn curl_json(url: &str) -> serde_json::Value {
    let out = Command::new("curl")
        .args(["-sf", "-H", &format!("Authorization: Bearer {TOKEN}")])
        .arg(url)
        .output()
        .unwrap();
    assert!(out.status.success(), "GET {url}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn three_proxies_on_postgresql_keep_every_exit_to_one_holder() {
    proxies_keep_every_exit_to_one_holder(&[]);
}

#[test]
fn three_proxies_on_redis_keep_every_exit_to_one_holder() {
    let redis = exitvoice_redistest::server();
    let pool = exitvoice_redistest::fresh_prefix("broker_proxy_collisions");
    proxies_keep_every_exit_to_one_holder(&["--store", &redis.url(), "--redis-pool", &pool]);
}

fn proxies_keep_every_exit_to_one_holder(store: &[&str]) {
    // One run at a time: each is 34 worker processes and three brokers on two cores.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let origin = simulated::unlimited_echo(None);
    let echo = simulated::unlimited_echo(None);
    let ca = origin.dir.path().join("echo.db.cert.pem");
    let target = format!("https://localhost:{}/api/clean", origin.port);
    let database = exitvoice_pgtest::fresh_database("broker_proxy_collisions");
    let work = tempfile::tempdir().unwrap();

    let sim = simulated::simulator(&runtime, PLAIN_EXITS + 1, PASSWORD, false);
    sim.count_holders_to(origin.port);
    let exits = exits_file(&work.path().join("exits.toml"), &sim, &echo, None);
    support::broker::audit(&exits, &database);
    let refresh = format!("{}ms", LABELS_REFRESH.as_millis());
    let mut brokers: Vec<Broker> = (0..3)
        .map(|i| {
            let name = format!("b{i}");
            let mut flags = vec!["--labels-refresh", &refresh, "--instance", &name];
            flags.extend(["--proxy-listen", "127.0.0.1:0"]);
            flags.extend(["--tunnel-idle", "1s", "--task-idle", "3s"]);
            flags.extend(store);
            Broker::start(&exits, &database, TOKEN, &flags)
        })
        .collect();
    let proxies: Vec<String> = brokers.iter().map(|b| b.proxies[0].to_string()).collect();

    let held = Held::open(&runtime, &brokers[1]);
    let mut children: Vec<Child> = (0..WORKERS)
        .map(|w| {
            // Each worker starts with another instance; the others are its fall-backs.
            let how: Vec<String> = (0..proxies.len())
                .flat_map(|i| {
                    [
                        "--proxy".to_owned(),
                        proxies[(w + i) % proxies.len()].clone(),
                    ]
                })
                .collect();
            worker(&format!("w{w}"), &how, &ca, &target)
        })
        .collect();
    // The crawls go through the instances that stay: Scrapy does not retry elsewhere.
    children.extend((0..CRAWLS).map(|c| {
        Command::new(python("venv-scrapy"))
            .arg(root().join("tests/tools/proxy_crawl.py"))
            .args(["--proxy", &proxies[1], "--proxy", &proxies[2]])
            .args(["--token", TOKEN, "--crawl", &format!("crawl{c}")])
            .args(["--tasks", TASKS, "--requests", REQUESTS])
            .arg(&target)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn a Scrapy crawl")
    }));

    std::thread::sleep(Duration::from_millis(1500));
    brokers[0].kill();
    let quarantined = exit_number(&held.exit);
    let broken = exits_file(
        &work.path().join("broken.toml"),
        &sim,
        &echo,
        Some(&held.exit),
    );
    support::broker::audit(&broken, &database);
    let labelled = Instant::now();
    // Every tunnel on the quarantined exit, the test's and the workers', closes.
    let deadline = labelled + LABELS_REFRESH + Duration::from_secs(3);
    let mut emptied = None;
    while Instant::now() < deadline {
        if held.closed().is_some() && sim.in_flight(quarantined) == Some(0) {
            emptied = Some(Instant::now());
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let held_closed = held.closed().expect("the held tunnel was closed");
    let emptied = emptied.expect("the quarantined exit's tunnels were closed");
    let opened_on_it = |sim: &Simulator| sim.snapshot(true).per_exit.unwrap()[quarantined][0];
    let opened_then = opened_on_it(&sim);

    let summaries = workers::summaries(children, Duration::from_secs(300));
    let revoked: f64 = brokers[1..]
        .iter()
        .map(|broker| {
            let metrics = metrics(broker);
            metrics
                .lines()
                .find_map(|line| {
                    line.strip_prefix("exitvoice_broker_leases_revoked_total ")?
                        .trim()
                        .parse::<f64>()
                        .ok()
                })
                .unwrap_or(0.0)
        })
        .sum();
    for broker in &brokers[1..] {
        let metrics = metrics(broker);
        let closed: Vec<&str> = metrics
            .lines()
            .filter(|line| line.starts_with("exitvoice_broker_tunnels_closed_total{"))
            .collect();
        println!("{closed:?}");
    }
    let (ok, unavailable, failed) = (
        sum(&summaries, "ok"),
        sum(&summaries, "unavailable"),
        sum(&summaries, "failed"),
    );
    let (plain, per_session) = collisions(&sim);
    let snapshot = sim.snapshot(false);
    println!(
        "brokers: {ok} ok, {unavailable} unavailable, {failed} failed, {} tunnels to the \
         origin; most at once: {plain} per exit, {per_session} per session; {} quarantined: \
         held tunnel closed {} ms and the exit emptied {} ms after the audit, {revoked} \
         leases revoked",
        snapshot.tunnels - snapshot.uncounted,
        held.exit,
        held_closed.saturating_duration_since(labelled).as_millis(),
        emptied.saturating_duration_since(labelled).as_millis(),
    );
    assert!(
        held_closed.saturating_duration_since(labelled) < LABELS_REFRESH + Duration::from_secs(1),
        "the held tunnel outlived its revoked lease"
    );
    assert!(
        emptied.saturating_duration_since(labelled) < LABELS_REFRESH + Duration::from_secs(1),
        "the quarantined exit kept tunnels past a second"
    );
    assert!(revoked >= 1.0, "the held lease was revoked");
    assert_eq!(
        opened_on_it(&sim),
        opened_then,
        "a tunnel went out through the quarantined exit"
    );
    let tasks = (WORKERS + CRAWLS) as u64 * TASKS.parse::<u64>().unwrap();
    assert!(ok >= tasks / 2, "{ok} of {tasks} tasks done: {summaries:?}");
    assert_eq!(plain, 1, "a plain exit had two holders at once");
    assert!(per_session >= 1, "the gateway's sessions were used");
    assert_eq!(per_session, 1, "a gateway session had two holders at once");
    drop(held);
    drop(brokers);
    the_same_workers_without_the_broker_collide(&runtime, &origin);
}

fn metrics(broker: &Broker) -> String {
    let out = Command::new("curl")
        .args(["-sf", "-H", &format!("Authorization: Bearer {TOKEN}")])
        .arg(format!("{}/metrics", broker.url))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The control, in the same run: the same workers on fresh exits, each task on an exit or a
/// gateway session picked at random, must collide at the exits.
fn the_same_workers_without_the_broker_collide(
    runtime: &tokio::runtime::Runtime,
    origin: &support::EchoServer,
) {
    let ca = origin.dir.path().join("echo.db.cert.pem");
    let target = format!("https://localhost:{}/api/clean", origin.port);
    let work = tempfile::tempdir().unwrap();
    let control = simulated::simulator(runtime, PLAIN_EXITS + 1, PASSWORD, false);
    control.count_holders_to(origin.port);
    let mut direct: Vec<String> = (0..PLAIN_EXITS)
        .map(|n| format!("http://exit-{n}:{PASSWORD}@{}", control.http))
        .collect();
    direct.extend((1..=GATEWAY_SLOTS).map(|slot| {
        format!(
            "http://exit-{PLAIN_EXITS}-sessid-fixed{slot}:{PASSWORD}@{}",
            control.http
        )
    }));
    let list = work.path().join("direct.json");
    std::fs::write(&list, serde_json::to_string(&direct).unwrap()).unwrap();
    let how = ["--direct".to_owned(), list.to_string_lossy().into_owned()];
    let children = (0..WORKERS)
        .map(|w| worker(&format!("w{w}"), &how, &ca, &target))
        .collect();
    let ok = sum(
        &workers::summaries(children, Duration::from_secs(300)),
        "ok",
    );
    let (plain, per_session) = collisions(&control);
    println!(
        "without the broker: {ok} ok; most at once: {plain} per exit, {per_session} per session"
    );
    assert!(
        plain > 1 || per_session > 1,
        "the control must collide, or this test proves nothing"
    );
}

/// A target that keeps every byte it receives, from any connection: its port and the bytes.
fn counting_target(runtime: &tokio::runtime::Runtime) -> (u16, Arc<std::sync::Mutex<Vec<u8>>>) {
    use tokio::io::AsyncReadExt as _;
    let received = Arc::new(std::sync::Mutex::new(Vec::new()));
    let port = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = received.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let received = received.clone();
                tokio::spawn(async move {
                    let mut buf = [0; 4096];
                    while let Ok(n) = socket.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        received.lock().unwrap().extend_from_slice(&buf[..n]);
                    }
                });
            }
        });
        port
    });
    (port, received)
}

/// Waits up to 5 s for `bytes` among what the target received.
fn arrives(received: &std::sync::Mutex<Vec<u8>>, bytes: &[u8]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if received
            .lock()
            .unwrap()
            .windows(bytes.len())
            .any(|w| w == bytes)
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A broker instance stopped (SIGSTOP) while its tunnel rides the only exit: the lease runs
/// out in the store and another instance grants the exit to the next task. Resumed, the
/// stopped instance writes nothing more to the exit (what the client sent it meanwhile never
/// reaches the target behind the exit) and closes its tunnel.
#[test]
fn a_stopped_instance_resumes_into_closed_tunnels() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let echo = simulated::unlimited_echo(None);
    let database = exitvoice_pgtest::fresh_database("broker_proxy_stopped");
    let work = tempfile::tempdir().unwrap();
    let sim = simulated::simulator(&runtime, 1, PASSWORD, false);
    let exits = simulated::exits_file(
        &work.path().join("exits.toml"),
        "",
        1,
        &sim,
        PASSWORD,
        &echo,
    );
    support::broker::audit(&exits, &database);
    let start = |name: &str| {
        let flags = ["--proxy-listen", "127.0.0.1:0", "--instance", name];
        let idle = ["--task-idle", "2s", "--tunnel-idle", "1m"];
        Broker::start(&exits, &database, TOKEN, &[&flags[..], &idle[..]].concat())
    };
    let (first, second) = (start("b0"), start("b1"));
    let (port, received) = counting_target(&runtime);
    let target = format!("127.0.0.1:{port}");

    let mut held = proxy_client::tunnel(
        first.proxies[0],
        "class-anonymous-task-stopped",
        TOKEN,
        &target,
    );
    held.write_all(b"before").unwrap();
    assert!(arrives(&received, b"before"), "the tunnel carried nothing");
    first.stop();
    // The task's lease runs out in the store (--task-idle after its last renewal); the other
    // instance, asked to wait, then grants the only exit to the next task.
    let mut next = proxy_client::tunnel(
        second.proxies[0],
        "class-anonymous-task-next-wait-15000",
        TOKEN,
        &target,
    );
    // Sent to the stopped instance: its kernel takes the bytes, the process cannot.
    held.write_all(b"AFTER-THE-LEASE").unwrap();
    next.write_all(b"next-holder").unwrap();
    assert!(
        arrives(&received, b"next-holder"),
        "the next holder's tunnel"
    );
    first.resume();
    let closed = proxy_client::closed_within(&mut held, Duration::from_secs(3));
    std::thread::sleep(Duration::from_millis(500));
    let got = String::from_utf8_lossy(&received.lock().unwrap()).into_owned();
    println!("the target received {got:?}; the stopped instance's tunnel closed {closed:?} after it resumed");
    assert!(
        !got.contains("AFTER-THE-LEASE"),
        "bytes reached the exit through a lease that had run out: {got:?}"
    );
    assert!(
        closed.is_some(),
        "the resumed instance kept the tunnel of a lease that had run out"
    );
}
