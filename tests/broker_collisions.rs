//! No self-collision at the exits. Three `exitvoice broker` instances share one
//! real PostgreSQL (a throwaway cluster), then one real Redis (`--store redis://`); 32 worker processes (the README's Python worker, plain
//! `requests`) lease exits from them and use every lease for a real tunnel through simulated
//! exits (`bench/exitsim`: 8 plain exits and a gateway with 4 sticky-session slots) to an origin
//! (an echo server of its own), holding it open while they "work". The exits count their own
//! tunnels to that origin open at once, per exit and per gateway session id: that is the figure
//! that counts, not the broker's. One broker instance is killed with SIGKILL mid-run; its
//! workers go on through the others. The same workload without a broker (each worker picking a
//! proxy at random, the control) must show collisions at the same kind of exits in the same
//! run, or the test proves nothing.
//!
//! The labels the broker obeys come from real audits of the same exits on the same database: one
//! before the brokers start, then an auditor (`exitvoice audit --every 2s`) that keeps probing
//! the exits through the run, to the audit's echo server. Its probes are the exits' clients too,
//! but toward another origin (they hold no lease), so the exits count them apart.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use exitvoice_exitsim::Simulator;
use support::broker::Broker;
use support::simulated;

const PLAIN_EXITS: usize = 8;
const GATEWAY_SLOTS: usize = 4;
const WORKERS: usize = 32;
const CYCLES: usize = 5;
const HOLD_MS: &str = "60";
const PASSWORD: &str = "collide-pw";
/// An outage run: how long the store is away, how long the workers run (from their start:
/// about 8 s before the outage, the rest after), and the units each instance keeps in reserve.
const OUTAGE: Duration = Duration::from_secs(10);
const OUTAGE_RUN_SECONDS: &str = "24";
const RESERVE: &str = "2";
const TOKEN: &str = "collision-test-token-0123456789";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    let python = root().join(".tools/venv/bin/python");
    assert!(
        python.exists(),
        "run scripts/install-test-deps.sh (needs .tools/venv with requests)"
    );
    python
}

/// The exits file: the simulator's plain exits and, as exit number `PLAIN_EXITS`, a gateway
/// whose user name carries the session id.
fn exits_file(dir: &Path, sim: &Simulator, echo: &support::EchoServer) -> PathBuf {
    let path = simulated::exits_file(
        &dir.join("exits.toml"),
        "",
        PLAIN_EXITS,
        sim,
        PASSWORD,
        echo,
    );
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&format!(
        "\n[[exits]]\nname = \"gw\"\nurl = \"http://exit-{PLAIN_EXITS}-sessid-{{session}}:{PASSWORD}@{}\"\nsessions = {GATEWAY_SLOTS}\nsticky = \"10m\"\n",
        sim.http
    ));
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs the workers (`args` per worker index) to the end; their JSON summaries.
fn run_workers(
    make: impl Fn(usize) -> Command,
    while_running: impl FnOnce(),
) -> Vec<serde_json::Value> {
    let children: Vec<Child> = (0..WORKERS)
        .map(|w| {
            make(w)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn worker")
        })
        .collect();
    while_running();
    let deadline = Instant::now() + Duration::from_secs(240);
    children
        .into_iter()
        .map(|child| {
            assert!(Instant::now() < deadline, "workers took too long");
            let output = child.wait_with_output().expect("worker output");
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "worker failed: {stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("worker said {stdout}"))
        })
        .collect()
}

/// A broker's metrics page.
fn metrics(broker: &Broker) -> String {
    let metrics = Command::new("curl")
        .args(["-sf", "-H", &format!("Authorization: Bearer {TOKEN}")])
        .arg(format!("{}/metrics", broker.url))
        .output()
        .unwrap();
    String::from_utf8_lossy(&metrics.stdout).into_owned()
}

/// The id of the labels snapshot a broker obeys.
fn labels_snapshot(broker: &Broker) -> i64 {
    let metrics = metrics(broker);
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("exitvoice_broker_labels_snapshot "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no labels snapshot gauge in {metrics}"))
}

/// The most tunnels open at once on one plain exit, and on one gateway session id.
fn collisions(sim: &Simulator) -> (u64, u32, u64) {
    let snapshot = sim.snapshot(true);
    let per_exit = snapshot.per_exit.unwrap();
    let plain = per_exit
        .iter()
        .take(PLAIN_EXITS)
        .map(|[_, max]| *max)
        .max()
        .unwrap_or(0);
    (plain, snapshot.max_in_flight_per_session, snapshot.tunnels)
}

#[test]
fn three_brokers_32_workers_no_exit_ever_has_two_holders() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let origin = simulated::unlimited_echo(None);
    brokers_keep_every_exit_to_one_holder(&runtime, &origin, &[], Fault::KillOne);
}

/// The control, in the same run as the brokers': the same workload on fresh exits to `origin`,
/// each worker picking a proxy at random, must collide at the exits, or the run proves nothing.
fn the_naive_control_collides(runtime: &tokio::runtime::Runtime, origin: &support::EchoServer) {
    let ca = origin.dir.path().join("echo.db.cert.pem");
    let target = format!("https://localhost:{}/api/clean", origin.port);
    let work = tempfile::tempdir().unwrap();
    let control = simulated::simulator(runtime, PLAIN_EXITS + 1, PASSWORD, false);
    let mut proxies: Vec<String> = (0..PLAIN_EXITS)
        .map(|n| format!("http://exit-{n}:{PASSWORD}@{}", control.http))
        .collect();
    proxies.extend((1..=GATEWAY_SLOTS).map(|slot| {
        format!(
            "http://exit-{PLAIN_EXITS}-sessid-fixed{slot}:{PASSWORD}@{}",
            control.http
        )
    }));
    let list = work.path().join("proxies.json");
    std::fs::write(&list, serde_json::to_string(&proxies).unwrap()).unwrap();
    let naive = root().join("tests/tools/naive_worker.py");
    let summaries = run_workers(
        |_| {
            let mut command = Command::new(python());
            command
                .arg(&naive)
                .arg("--proxies")
                .arg(&list)
                .args([
                    "--cycles",
                    &CYCLES.to_string(),
                    "--hold-ms",
                    HOLD_MS,
                    "--ca",
                ])
                .arg(&ca)
                .arg(&target);
            command
        },
        || {},
    );
    let ok: u64 = summaries.iter().map(|s| s["ok"].as_u64().unwrap()).sum();
    let (plain, per_session, _) = collisions(&control);
    println!("control: {ok} ok; most at once: {plain} per exit, {per_session} per session");
    assert!(
        plain > 1 || per_session > 1,
        "the control must collide, or this test proves nothing"
    );
}

/// The worker the README shows is the one this test runs.
#[test]
fn the_readme_shows_the_tested_worker() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let worker = std::fs::read_to_string(root().join("broker/examples/worker.py")).unwrap();
    assert!(
        readme.contains(&format!("```python\n{worker}```")),
        "README.md's worker differs from broker/examples/worker.py"
    );
}

/// The same proof with the brokers' state in Redis (their labels still in PostgreSQL).
#[test]
fn three_brokers_on_redis_no_exit_ever_has_two_holders() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let origin = simulated::unlimited_echo(None);
    let redis = exitvoice_redistest::server();
    let pool = exitvoice_redistest::fresh_prefix("broker_collisions");
    brokers_keep_every_exit_to_one_holder(
        &runtime,
        &origin,
        &["--store", &redis.url(), "--redis-pool", &pool],
        Fault::KillOne,
    );
    // The leases were Redis's: one hash per lease under the pool's keys (Debian's redis-cli).
    let listed = Command::new("redis-cli")
        .args(["-p", &redis.port().to_string(), "--scan", "--pattern"])
        .arg(format!("exitvoice:{{{pool}}}:lease:*"))
        .output()
        .expect("run redis-cli");
    let leases = String::from_utf8_lossy(&listed.stdout).lines().count();
    assert!(
        leases >= WORKERS * CYCLES,
        "{leases} leases in Redis for {} cycles",
        WORKERS * CYCLES
    );
}

/// The Redis server killed (`kill -9`) mid-run and started again without its
/// data. The brokers start a new epoch: no grant for `--max-life` (3 s here, the longest any
/// lost lease could still run), then grants resume; no exit or session ever has two holders.
#[test]
fn a_redis_that_forgets_mid_run_never_gives_an_exit_two_holders() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let origin = simulated::unlimited_echo(None);
    let redis = exitvoice_redistest::private_server();
    brokers_keep_every_exit_to_one_holder(
        &runtime,
        &origin,
        &["--store", &redis.url(), "--max-life", "3s"],
        Fault::Forget(&redis),
    );
}

/// PostgreSQL stopped for 10 s mid-run and started again. Each instance grants
/// from its reserve meanwhile (`--reserve`), units no other instance may grant: no exit or
/// session ever has two holders, and the workers go on at half their rate or more.
#[test]
fn a_postgresql_outage_keeps_exits_to_one_holder_and_grants_going() {
    let cluster = exitvoice_pgtest::cluster();
    outage(&[], &|| cluster.stop(), &|| cluster.start_again());
}

/// The same with the brokers' state in Redis, frozen (`SIGSTOP`) for 10 s: a hung server, not
/// a refused one.
#[test]
fn a_redis_outage_keeps_exits_to_one_holder_and_grants_going() {
    let redis = exitvoice_redistest::private_server();
    outage(&["--store", &redis.url()], &|| redis.freeze(true), &|| {
        redis.freeze(false)
    });
}

/// The collision run with the brokers' store (`store` flags) away for [`OUTAGE`] mid-run.
fn outage(store: &[&str], stop: &dyn Fn(), start: &dyn Fn()) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let origin = simulated::unlimited_echo(None);
    brokers_keep_every_exit_to_one_holder(&runtime, &origin, store, Fault::Outage { stop, start });
}

/// What goes wrong mid-run.
enum Fault<'a> {
    /// One broker is killed (SIGKILL).
    KillOne,
    /// One broker is killed, and their Redis restarted empty.
    Forget(&'a exitvoice_redistest::Server),
    /// The store is away for [`OUTAGE`] (`stop`, then `start`) while every broker runs on with
    /// a reserve; the workers run for [`OUTAGE_RUN_SECONDS`].
    Outage {
        stop: &'a dyn Fn(),
        start: &'a dyn Fn(),
    },
}

/// Three brokers (with `store` flags, or none: their state beside the labels in PostgreSQL)
/// and 32 workers through simulated exits to `origin`, an auditor auditing meanwhile, and a
/// `fault` mid-run: every lease works, and no exit or session ever has two holders.
fn brokers_keep_every_exit_to_one_holder(
    runtime: &tokio::runtime::Runtime,
    origin: &support::EchoServer,
    store: &[&str],
    fault: Fault<'_>,
) {
    // One run at a time: each is 32 worker processes and three brokers on two cores.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let echo = simulated::unlimited_echo(None);
    let ca = origin.dir.path().join("echo.db.cert.pem");
    let target = format!("https://localhost:{}/api/clean", origin.port);
    let database = exitvoice_pgtest::fresh_database("broker_collisions");
    let work = tempfile::tempdir().unwrap();

    // The labels: a real audit of the very exits the workers will use.
    let sim = simulated::simulator(runtime, PLAIN_EXITS + 1, PASSWORD, false);
    sim.count_holders_to(origin.port);
    let exits = exits_file(work.path(), &sim, &echo);
    support::broker::audit(&exits, &database);

    let brokers: Vec<Broker> = (0..3)
        .map(|i| {
            let name = format!("b{i}");
            let mut flags = vec!["--labels-refresh", "1s", "--instance", &name];
            flags.extend(store);
            if matches!(fault, Fault::Outage { .. }) {
                flags.extend(["--reserve", RESERVE, "--reserve-ttl", "30s"]);
            }
            Broker::start(&exits, &database, TOKEN, &flags)
        })
        .collect();
    let urls: Vec<String> = brokers.iter().map(|b| b.url.clone()).collect();
    let first_labels = labels_snapshot(&brokers[1]);
    let auditor = support::broker::Auditor::start(&exits, &database, "2s");
    let audited = sim.snapshot(false).uncounted;
    let worker = root().join("broker/examples/worker.py");
    let mut brokers = brokers;
    let (cycles, seconds) = match fault {
        Fault::Outage { .. } => ("100000".to_owned(), OUTAGE_RUN_SECONDS),
        _ => (CYCLES.to_string(), "0"),
    };
    // Leases done (tunnels to the origin) before, during and after the outage.
    let done = || {
        let snapshot = sim.snapshot(false);
        snapshot.tunnels - snapshot.uncounted
    };
    let mut rates = None;
    let summaries = run_workers(
        |w| {
            let mut command = Command::new(python());
            command.arg(&worker);
            // Each worker starts with another instance; the others are its fall-backs.
            for i in 0..urls.len() {
                command.arg("--broker").arg(&urls[(w + i) % urls.len()]);
            }
            command
                .args(["--class", "anonymous", "--cycles", &cycles])
                .args(["--seconds", seconds, "--hold-ms", HOLD_MS])
                .args(["--wait-ms", "20000", "--holder", &format!("worker-{w}")])
                .arg("--ca")
                .arg(&ca)
                .arg(&target)
                .env("EXITVOICE_BROKER_TOKEN", TOKEN);
            command
        },
        || match fault {
            Fault::KillOne | Fault::Forget(_) => {
                std::thread::sleep(Duration::from_millis(1500));
                brokers[0].kill();
                if let Fault::Forget(redis) = fault {
                    std::thread::sleep(Duration::from_millis(300));
                    redis.restart_empty();
                }
            }
            Fault::Outage { stop, start } => {
                // The workers' processes start, then 4 s of the rate before.
                std::thread::sleep(Duration::from_secs(4));
                let before = done();
                std::thread::sleep(Duration::from_secs(4));
                let at_stop = done();
                stop();
                std::thread::sleep(OUTAGE);
                let at_start = done();
                start();
                rates = Some((
                    (at_stop - before) as f64 / 4.0,
                    (at_start - at_stop) as f64 / OUTAGE.as_secs_f64(),
                ));
            }
        },
    );
    let ok: u64 = summaries.iter().map(|s| s["ok"].as_u64().unwrap()).sum();
    let unavailable: u64 = summaries
        .iter()
        .map(|s| s["unavailable"].as_u64().unwrap())
        .sum();
    let failed: u64 = summaries
        .iter()
        .map(|s| s["failed"].as_u64().unwrap())
        .sum();
    let gateway_leases = summaries
        .iter()
        .flat_map(|s| s["exits"].as_array().unwrap().iter())
        .filter(|e| e.as_str().is_some_and(|e| e.starts_with("gw#")))
        .count();
    let (plain, per_session, tunnels) = collisions(&sim);
    let probes = sim.snapshot(false).uncounted;
    drop(auditor);
    let labels = labels_snapshot(&brokers[1]);
    println!(
        "broker: {ok} ok, {failed} failed, {unavailable} unavailable, {gateway_leases} on gateway sessions, {} tunnels; most at once: {plain} per exit, {per_session} per session; {} audit probes meanwhile, labels snapshot {first_labels} then {labels}",
        tunnels - probes,
        probes - audited
    );
    if let Some((before, during)) = rates {
        println!("leases a second: {before:.1} before the outage, {during:.1} during it");
        assert_eq!(failed, 0, "{summaries:?}");
        assert!(
            during >= before / 2.0 && before > 0.0,
            "during the outage the brokers granted {during:.1} leases a second, against \
             {before:.1} before"
        );
        for broker in &brokers {
            let metrics = metrics(broker);
            let value = |name: &str| -> f64 {
                metrics
                    .lines()
                    .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
                    .unwrap_or_else(|| panic!("no {name} in {metrics}"))
            };
            let seconds = value("exitvoice_broker_store_outage_seconds_total ");
            assert!(
                seconds > OUTAGE.as_secs_f64() / 2.0 && seconds < OUTAGE.as_secs_f64() * 2.0,
                "an outage of {seconds} s counted"
            );
            assert!(value("exitvoice_broker_leases_granted_in_outage_total ") > 0.0);
            assert_eq!(value("exitvoice_broker_store_outage "), 0.0, "it ended");
        }
    } else if let Fault::Forget(_) = fault {
        // Requests in flight when Redis went away were answered 503 (the worker waits and goes
        // on to its next cycle); every lease granted did its work.
        assert_eq!(ok + unavailable, (WORKERS * CYCLES) as u64, "{summaries:?}");
        assert_eq!(failed, 0, "{summaries:?}");
        let epoch = runtime.block_on(async {
            let url = database.parse().unwrap();
            let store = exitvoice_store::Store::connect(&url).await.unwrap();
            let lock = store.broker_epoch_lock("broker").await.unwrap();
            let epoch = lock.current();
            lock.release().await.unwrap();
            epoch
        });
        assert_eq!(epoch, Some(1), "the brokers started one new epoch");
        // Grants resume after the hold, with fences of the new epoch: above every lost one.
        let after = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
            .args(["lease", "--broker", &brokers[1].url, "acquire"])
            .args(["--class", "anonymous", "--holder", "after", "--wait", "20s"])
            .env("EXITVOICE_BROKER_TOKEN", TOKEN)
            .output()
            .unwrap();
        let lease: serde_json::Value = serde_json::from_slice(&after.stdout).unwrap_or_default();
        assert!(
            lease["fence"].as_i64().is_some_and(|fence| fence > 1 << 32),
            "no lease of the new epoch: {lease}"
        );
    } else {
        assert_eq!(
            ok,
            (WORKERS * CYCLES) as u64,
            "every lease did its work: {summaries:?}"
        );
    }
    assert_eq!(tunnels - probes, ok, "one tunnel per lease");
    assert!(
        probes > audited,
        "the auditor probed the exits during the run"
    );
    assert!(
        labels > first_labels && first_labels > 0,
        "the brokers obeyed the auditor's newer labels: {first_labels} then {labels}"
    );
    assert!(gateway_leases > 0, "the gateway's sessions were leased too");
    assert_eq!(plain, 1, "a plain exit had two holders at once");
    assert_eq!(per_session, 1, "a gateway session had two holders at once");

    // The survivors' view: no collision in the store either.
    let metrics = metrics(&brokers[1]);
    assert!(
        metrics.contains("exitvoice_broker_collisions 0"),
        "{metrics}"
    );
    drop(brokers);
    the_naive_control_collides(runtime, origin);
}
