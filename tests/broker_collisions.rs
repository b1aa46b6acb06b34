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
    support::workers::summaries(children, Duration::from_secs(240))
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

/// The Redis server killed (`kill -9`) mid-run and started again without its data. The
/// brokers start a new epoch: no grant for the longest time to live a holder was told (3 s
/// here), then grants resume; no exit or session ever has two holders.
#[test]
fn a_redis_that_forgets_mid_run_never_gives_an_exit_two_holders() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let origin = simulated::unlimited_echo(None);
    let redis = exitvoice_redistest::private_server();
    brokers_keep_every_exit_to_one_holder(
        &runtime,
        &origin,
        &[
            "--store",
            &redis.url(),
            "--max-ttl",
            "3s",
            "--default-ttl",
            "3s",
        ],
        Fault::Forget(&redis),
    );
}

/// Redis with RDB snapshots (Debian's default persistence), killed (`kill -9`) a moment after a
/// `SAVE` while grants went on, and started again from that snapshot: the pool's state is
/// there, older than it was. The brokers start a new epoch over it and grant nothing until
/// every lease the snapshot missed has run out: no exit or session ever has two holders, and
/// no fence is issued twice.
#[test]
fn a_redis_restarted_from_an_older_snapshot_never_gives_an_exit_two_holders() {
    let redis = exitvoice_redistest::private_server();
    let fault = || {
        redis_cli(&redis, &["SAVE"]);
        // Grants the snapshot misses.
        std::thread::sleep(Duration::from_millis(800));
        redis.start_again();
    };
    older_store(&["--store", &redis.url()], &fault, 1 << 32, true);
}

/// The same with Redis's AOF (`appendonly yes`, `appendfsync everysec`) restarted from a copy
/// of its AOF taken a moment before the last grants: what a host crash leaves of the last
/// second under `everysec`.
#[test]
fn a_redis_restarted_from_an_older_aof_never_gives_an_exit_two_holders() {
    let redis = exitvoice_redistest::private_server_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
    ]);
    let fault = || {
        let aof = redis.dir().join("appendonlydir");
        let copy = tempfile::tempdir().unwrap();
        copy_dir(&aof, copy.path());
        std::thread::sleep(Duration::from_millis(800));
        redis.stop();
        std::fs::remove_dir_all(&aof).unwrap();
        copy_dir(copy.path(), &aof);
        redis.start_again();
    };
    older_store(&["--store", &redis.url()], &fault, 1 << 32, true);
}

/// A Redis primary and its replica behind one address (a managed endpoint: here a forwarder
/// the test switches): the replica stopped (`SIGSTOP`) while grants go on, the primary killed
/// (`kill -9`), the replica resumed and promoted (`REPLICAOF NO ONE`), the address switched
/// to it. Replication is asynchronous: the replica lacks the last grants.
#[test]
fn a_redis_failover_to_a_lagging_replica_never_gives_an_exit_two_holders() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let primary = exitvoice_redistest::private_server();
    let port = primary.port().to_string();
    let replica = exitvoice_redistest::private_server_with(&["--replicaof", "127.0.0.1", &port]);
    let endpoint = support::forwarder::Forwarder::start(&runtime, primary.port());
    let fault = || {
        kill_primary_ahead_of(&primary, &replica);
        redis_cli(&replica, &["REPLICAOF", "NO", "ONE"]);
        endpoint.switch(replica.port());
    };
    let url = format!("redis://127.0.0.1:{}/", endpoint.port);
    older_store(&["--store", &url], &fault, 1 << 32, true);
}

/// A Redis Cluster of 3 primaries with a replica each (`--cluster-enabled yes`, joined by
/// `redis-cli --cluster create`): the replica of the primary holding the pool's slot stopped
/// (`SIGSTOP`) while grants go on, the primary killed (`kill -9`), the replica resumed; it takes
/// the slot over after the cluster's node timeout, without the last grants.
#[test]
fn a_redis_cluster_failover_never_gives_an_exit_two_holders() {
    let cluster = exitvoice_redistest::Cluster::start(3);
    let fault = || {
        let (primary, replica) = cluster.shard_of("broker");
        kill_primary_ahead_of(primary, replica);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !redis_cli(replica, &["ROLE"]).starts_with("master") {
            assert!(Instant::now() < deadline, "the replica never took over");
            std::thread::sleep(Duration::from_millis(50));
        }
        cluster.wait_ok();
    };
    older_store(&["--store", &cluster.url()], &fault, 1 << 32, true);
}

/// PostgreSQL with an asynchronous streaming standby, behind one address (an HAProxy that
/// sends connections to the standby once the primary fails its check, as a managed database's
/// endpoint does): the standby's replication cut while grants go on, the primary stopped as a
/// crash would (`pg_ctl stop -m immediate`), the standby promoted. Its timeline is new and it
/// lacks the last grants: the brokers move every fence past the clock (in µs) and hold.
#[test]
fn a_postgresql_failover_to_a_lagging_standby_never_gives_an_exit_two_holders() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let primary = exitvoice_pgtest::private_cluster();
    let replication = support::forwarder::Forwarder::start(&runtime, primary.port());
    let state = primary.fresh_database("failover");
    let standby = primary.standby(replication.port);
    let (primary_port, standby_port) = (primary.port().to_string(), standby.port().to_string());
    let endpoint = support::Proxy::start("haproxy-failover", &[&primary_port, &standby_port]);
    let state = state.replace(
        &format!(":{primary_port}/"),
        &format!(":{}/", endpoint.port),
    );
    // A port nothing listens on: once replication goes there, the standby receives no WAL.
    let (_socket, closed) = runtime.block_on(async { support::closed_port() });
    let fault = || {
        replication.switch(closed);
        std::thread::sleep(Duration::from_millis(800));
        primary.crash();
        standby.promote();
    };
    older_store(&["--store", &state], &fault, 1_000_000_000_000_000, false);
}

/// The same failover run by Redis Sentinel (`--store redis+sentinel://…/<name>`): the replica
/// held back, the primary killed, the replica resumed; the sentinel calls the primary down and
/// promotes the replica, and the brokers ask it for the new primary.
#[test]
fn a_sentinel_failover_to_a_lagging_replica_never_gives_an_exit_two_holders() {
    let primary = exitvoice_redistest::private_server();
    let port = primary.port().to_string();
    let replica = exitvoice_redistest::private_server_with(&["--replicaof", "127.0.0.1", &port]);
    let sentinel = exitvoice_redistest::Sentinel::start(&primary, "leases");
    let fault = || {
        kill_primary_ahead_of(&primary, &replica);
        let deadline = Instant::now() + Duration::from_secs(30);
        while sentinel.primary_port("leases") != Some(replica.port()) {
            assert!(
                Instant::now() < deadline,
                "the sentinel never promoted the replica"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let url = format!("redis+sentinel://127.0.0.1:{}/leases", sentinel.port());
    older_store(&["--store", &url], &fault, 1 << 32, true);
}

/// The collision run with the brokers' store (`store` flags) taken back in time by `fault`.
fn older_store(store: &[&str], fault: &dyn Fn(), fences_above: i64, epochs: bool) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let origin = simulated::unlimited_echo(None);
    let older = Older {
        fault,
        fences_above,
        epochs,
    };
    brokers_keep_every_exit_to_one_holder(&runtime, &origin, store, Fault::Older(older));
}

/// Once `replica` has synced, holds its replication back (`SIGSTOP`) while grants go on
/// without it, kills `primary` (`kill -9`) and resumes the replica: it lacks the last grants.
fn kill_primary_ahead_of(
    primary: &exitvoice_redistest::Server,
    replica: &exitvoice_redistest::Server,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !redis_cli(replica, &["INFO", "replication"]).contains("master_link_status:up") {
        assert!(Instant::now() < deadline, "the replica never synced");
        std::thread::sleep(Duration::from_millis(50));
    }
    replica.freeze(true);
    std::thread::sleep(Duration::from_millis(800));
    primary.stop();
    replica.freeze(false);
}

/// Debian's `redis-cli` on `server`: what it printed.
fn redis_cli(server: &exitvoice_redistest::Server, args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(["-p", &server.port().to_string()])
        .args(args)
        .output()
        .expect("run redis-cli");
    assert!(output.status.success(), "redis-cli {args:?} failed");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Copies the files of directory `from` into `to` (made if missing).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
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

/// A store that comes back older than it was, mid-run: `fault` takes it there and returns once
/// it answers again. Grants after it must carry fences above `fences_above`.
struct Older<'a> {
    fault: &'a dyn Fn(),
    fences_above: i64,
    /// Whether the brokers keep their epochs in the SQL database (a Redis store).
    epochs: bool,
}

/// The broker flags of a run whose store goes back in time: leases told 2 s, so that a new
/// history holds grants for 2 s.
const OLDER_TTL: [&str; 4] = ["--default-ttl", "2s", "--max-ttl", "2s"];
/// An older store's workers hold their tunnel this long: past a store's restart, so that a
/// broker regranting a lost lease's exit would put a second holder on it.
const OLDER_HOLD_MS: &str = "700";
const OLDER_CYCLES: usize = 8;

/// What goes wrong mid-run.
enum Fault<'a> {
    /// The store goes back in time.
    Older(Older<'a>),
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
            if matches!(fault, Fault::Older(_)) {
                flags.extend(OLDER_TTL);
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
    let (cycles, seconds, hold_ms) = match fault {
        Fault::Outage { .. } => ("100000".to_owned(), OUTAGE_RUN_SECONDS, HOLD_MS),
        Fault::Older(_) => (OLDER_CYCLES.to_string(), "0", OLDER_HOLD_MS),
        _ => (CYCLES.to_string(), "0", HOLD_MS),
    };
    let leases = match fault {
        Fault::Older(_) => WORKERS * OLDER_CYCLES,
        _ => WORKERS * CYCLES,
    } as u64;
    // Leases done (tunnels to the origin) before, during and after the outage.
    let done = || {
        let snapshot = sim.snapshot(false);
        snapshot.tunnels - snapshot.uncounted
    };
    let mut rates = None;
    // New tunnels at the exits over time, around a store going back in time.
    let tunnels_over_time = Sampler::start(&sim);
    let mut store_back = None;
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
                .args(["--seconds", seconds, "--hold-ms", hold_ms])
                .args(["--wait-ms", "20000", "--holder", &format!("worker-{w}")])
                .arg("--ca")
                .arg(&ca)
                .arg(&target)
                .env("EXITVOICE_BROKER_TOKEN", TOKEN);
            command
        },
        || match &fault {
            Fault::Older(older) => {
                // The workers' processes start and lease for a while: a lease each.
                let deadline = Instant::now() + Duration::from_secs(60);
                while done() < WORKERS as u64 {
                    assert!(Instant::now() < deadline, "the workers leased nothing");
                    std::thread::sleep(Duration::from_millis(20));
                }
                (older.fault)();
                store_back = Some(Instant::now());
            }
            Fault::KillOne | Fault::Forget(_) => {
                std::thread::sleep(Duration::from_millis(1500));
                brokers[0].kill();
                if let Fault::Forget(redis) = fault {
                    std::thread::sleep(Duration::from_millis(300));
                    redis.restart_empty();
                }
            }
            &Fault::Outage { stop, start } => {
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
    let samples = tunnels_over_time.stop();
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
    } else if let Fault::Older(older) = &fault {
        // Leases whose grant the store lost were answered `unknown_lease` at release; each did
        // its work all the same.
        assert_eq!(ok + unavailable, leases, "{summaries:?}");
        assert_eq!(failed, 0, "{summaries:?}");
        // No fence issued twice on one exit, as the workers were told them.
        let mut issued = std::collections::HashSet::new();
        let mut newest = 0;
        for summary in &summaries {
            let exits = summary["exits"].as_array().unwrap();
            let fences = summary["fences"].as_array().unwrap();
            for (exit, fence) in exits.iter().zip(fences) {
                let (exit, fence) = (exit.as_str().unwrap(), fence.as_i64().unwrap());
                assert!(
                    issued.insert((exit.to_owned(), fence)),
                    "fence {fence} issued twice on {exit}"
                );
                newest = newest.max(fence);
            }
        }
        assert!(
            newest > older.fences_above,
            "no lease of the new history: newest fence {newest}"
        );
        let back = store_back.expect("the fault ran");
        let (gap, after) = (samples.longest_gap_after(back), samples.first_after(back));
        println!(
            "no new tunnel at the exits for {} ms around the store's return, the first {} ms \
             after it (hold 2000 ms)",
            gap.as_millis(),
            after.as_millis()
        );
        assert!(
            after < Duration::from_secs(8),
            "the pool served again after the hold: {after:?} without a grant"
        );
        if older.epochs {
            // One, or more when an instance could not start the one it took (the store went
            // away again under it): that epoch is spent.
            let epoch = epoch_of(runtime, &database);
            assert!(epoch >= Some(1), "a new epoch: {epoch:?}");
        }
    } else if let Fault::Forget(_) = fault {
        // Requests in flight when Redis went away were answered 503 (the worker waits and goes
        // on to its next cycle); every lease granted did its work.
        assert_eq!(ok + unavailable, leases, "{summaries:?}");
        assert_eq!(failed, 0, "{summaries:?}");
        assert_eq!(
            epoch_of(runtime, &database),
            Some(1),
            "the brokers started one new epoch"
        );
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
        assert_eq!(ok, leases, "every lease did its work: {summaries:?}");
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

/// The epoch the brokers' Redis pool is in, as their SQL database keeps it.
fn epoch_of(runtime: &tokio::runtime::Runtime, database: &str) -> Option<i64> {
    runtime.block_on(async {
        let url = database.parse().unwrap();
        let store = exitvoice_store::Store::connect(&url).await.unwrap();
        let tables = exitvoice_store::BrokerTables::new(store);
        let lock = tables.broker_epoch_lock("broker").await.unwrap();
        let epoch = lock.current();
        lock.release().await.unwrap();
        epoch
    })
}

/// The exits' count of tunnels opened, read every 20 ms on a thread of its own.
struct Sampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(Instant, u64)>>,
}

/// What a [`Sampler`] read.
struct Samples(Vec<(Instant, u64)>);

impl Sampler {
    fn start(sim: &Simulator) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sim = sim.clone();
        let thread = std::thread::spawn({
            let stop = stop.clone();
            move || {
                let mut samples = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let snapshot = sim.snapshot(false);
                    samples.push((Instant::now(), snapshot.tunnels - snapshot.uncounted));
                    std::thread::sleep(Duration::from_millis(20));
                }
                samples
            }
        });
        Self { stop, thread }
    }

    fn stop(self) -> Samples {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        Samples(self.thread.join().unwrap())
    }
}

impl Samples {
    /// How long after `at` the first new tunnel came.
    fn first_after(&self, at: Instant) -> Duration {
        let before = self
            .0
            .iter()
            .take_while(|(when, _)| *when <= at)
            .last()
            .map_or(0, |(_, count)| *count);
        self.0
            .iter()
            .find(|(when, count)| *when > at && *count > before)
            .map_or(Duration::MAX, |(when, _)| {
                when.saturating_duration_since(at)
            })
    }

    /// The longest time without a new tunnel that ended after `at`.
    fn longest_gap_after(&self, at: Instant) -> Duration {
        let mut longest = Duration::ZERO;
        let mut last_new = self.0.first().map_or(at, |(when, _)| *when);
        for pair in self.0.windows(2) {
            let [(_, before), (when, count)] = pair else {
                continue;
            };
            if count > before {
                if *when > at {
                    longest = longest.max(when.saturating_duration_since(last_new));
                }
                last_new = *when;
            }
        }
        longest
    }
}
