//! The examples a user copies (`examples/proxy/`), run as a user runs them against a broker
//! with proxy listeners in front of simulated exits (`bench/exitsim`): curl over HTTP `CONNECT`
//! and SOCKS5, a `requests` worker, a Scrapy spider, a crawlee crawl and headless Chromium. Each
//! must fetch the pages of an echo server through the broker, each task must ride one lease
//! (the broker's count of grants) and leave from one exit (the exits' own count of tunnels),
//! and the worker's report of an origin's `429` must end its lease and ban its exit there.
//!
//! The echo serves the test CA's certificate (`.tools/certs`), which the clients are given
//! through their own environment variables (`CURL_CA_BUNDLE`, `REQUESTS_CA_BUNDLE`,
//! `NODE_EXTRA_CA_CERTS`), as for a private CA; Scrapy verifies no certificate, and Chromium
//! is told to ignore the error. Needs curl, chromium, `.tools/venv` (requests),
//! `.tools/venv-scrapy` and the crawlee example's `node_modules`: scripts/install-test-deps.sh.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use support::proxy_world::{World, TOKEN};

/// The echo's name, on the test CA's certificate: `/etc/hosts` has it as 127.0.0.1
/// (scripts/install-test-deps.sh), and the exits resolve it. A name, not an address: clients
/// send SNI only for names, and crawlee's HTTP/2 takes an origin only by the name it asked for.
const HOST: &str = "echo.exitvoice.test";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn example(name: &str) -> PathBuf {
    root().join("examples/proxy").join(name)
}

fn certs() -> PathBuf {
    let certs = root().join(".tools/certs");
    assert!(
        certs.join("ca.pem").exists() && certs.join("leaf-chain.pem").exists(),
        "run scripts/install-test-deps.sh (makes the test CA in .tools/certs)"
    );
    certs
}

fn ca() -> String {
    certs().join("ca.pem").to_string_lossy().into_owned()
}

/// The echo's URL at `path`, by [`HOST`].
fn page(world: &World, path: &str) -> String {
    use std::net::ToSocketAddrs as _;
    let resolved = (HOST, world.echo.port)
        .to_socket_addrs()
        .map(|mut addresses| addresses.any(|a| a.ip().is_loopback()))
        .unwrap_or(false);
    assert!(
        resolved,
        "{HOST} is not 127.0.0.1 in /etc/hosts: run scripts/install-test-deps.sh"
    );
    format!("https://{HOST}:{}{path}", world.echo.port)
}

/// The world, with the echo on the test CA's leaf certificate, and `extra` broker flags.
fn world(extra: &[&str]) -> World {
    let certs = certs();
    let chain = certs.join("leaf-chain.pem").to_string_lossy().into_owned();
    let key = certs.join("leaf.key").to_string_lossy().into_owned();
    World::start_on(&["--cert", &chain, "--key", &key], extra)
}

/// A Python of `.tools/` (`venv` or `venv-scrapy`).
fn python(venv: &str) -> PathBuf {
    let python = root().join(".tools").join(venv).join("bin/python");
    assert!(
        python.exists(),
        "run scripts/install-test-deps.sh (needs .tools/{venv})"
    );
    python
}

/// `command` with the broker proxy's address and token in its environment, and no proxy of
/// the test's own environment.
fn example_command(world: &World, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new(program);
    for name in ["http_proxy", "https_proxy", "all_proxy", "no_proxy"] {
        command.env_remove(name).env_remove(name.to_uppercase());
    }
    command
        .env("EXITVOICE_PROXY", world.proxy().to_string())
        .env("EXITVOICE_BROKER_TOKEN", TOKEN);
    command
}

/// Runs `command` (an [`example_command`]) asking for anonymous exits, as a quick audit labels
/// the simulated ones (identity takes a browser-shaped voice from the auditor); asserts it
/// succeeded, and returns what it printed.
fn run(command: &mut Command) -> String {
    // Shown without its environment, which holds the token.
    let shown = format!(
        "{} {:?}",
        command.get_program().to_string_lossy(),
        command.get_args().collect::<Vec<_>>()
    );
    let out = command
        .env("EXITVOICE_CLASS", "anonymous")
        .output()
        .unwrap_or_else(|e| panic!("{shown}: {e} (scripts/install-test-deps.sh)"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{shown}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains(TOKEN), "the token in the output");
    stdout
}

/// The JSON objects printed one a line, other lines (a crawler's log) left out.
fn json_lines(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(serde_json::Value::is_object)
        .collect()
}

/// Tunnels each exit has opened so far, as the exits count them, in exit order (`sim-N`).
fn tunnels(world: &World) -> Vec<u64> {
    let per_exit = world.sim.snapshot(true).per_exit.expect("per-exit counts");
    per_exit.iter().map(|[opened, _]| *opened).collect()
}

/// The exits (by number) that opened tunnels since `before`, and how many each.
fn used_since(world: &World, before: &[u64]) -> BTreeMap<usize, u64> {
    tunnels(world)
        .iter()
        .zip(before)
        .enumerate()
        .filter(|(_, (now, then))| now > then)
        .map(|(exit, (now, then))| (exit, now - then))
        .collect()
}

/// `GET /v1/exits`: each exit's entry by name.
fn exits(world: &World) -> BTreeMap<String, serde_json::Value> {
    world.api("/v1/exits")["exits"]
        .as_array()
        .expect("exits")
        .iter()
        .map(|exit| {
            (
                exit["exit"].as_str().expect("a name").to_owned(),
                exit.clone(),
            )
        })
        .collect()
}

/// Asserts that `page` is what the echo server answers for `path`: its JSON, with the client's
/// TLS voice.
fn assert_echo(page: &serde_json::Value, path: &str) {
    assert_eq!(page["path"], path, "{page}");
    let ja4 = page["tls"]["ja4"].as_str().unwrap_or_default();
    assert!(ja4.starts_with('t'), "a TLS voice over TCP: {page}");
}

/// Asserts that every page of `paths` was fetched (status 200, an echo's bytes) by one JSON
/// line of `out`, no other was, and returns each page's task.
fn fetched(world: &World, out: &str, paths: &[String]) -> Vec<String> {
    let lines = json_lines(out);
    let mut tasks = Vec::new();
    for path in paths {
        let url = page(world, path);
        let line = lines
            .iter()
            .find(|line| line["url"] == url.as_str())
            .unwrap_or_else(|| panic!("{url} not fetched: {out}"));
        assert_eq!(line["status"], 200, "{line}");
        // The echo's JSON of /api/all is kilobytes; its 404 is a few hundred bytes.
        assert!(line["bytes"].as_u64().unwrap_or(0) > 2_000, "{line}");
        tasks.push(line["task"].as_str().expect("a task").to_owned());
    }
    assert_eq!(lines.len(), paths.len(), "one line a page: {out}");
    tasks
}

#[test]
fn curl_over_connect_and_socks5h_leaves_one_task_from_one_exit() {
    let world = world(&["--task-idle", "30s", "--proxy-wait", "500ms"]);
    let path = "/api/all?from=curl";
    let (before, served) = (tunnels(&world), world.served());

    // The examples ask for identity unless told otherwise, and this pool has none: the broker
    // answers 503, and leases nothing.
    let refused = example_command(&world, example("curl.sh"))
        .arg(page(&world, path))
        .env("CURL_CA_BUNDLE", ca())
        .output()
        .expect("curl.sh");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("503"), "{said}");
    assert_eq!(world.served(), served);

    let out = run(example_command(&world, example("curl.sh"))
        .arg(page(&world, path))
        .arg("t1")
        .env("CURL_CA_BUNDLE", ca()));
    let pages: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&out)
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("not the echo's JSON: {e}: {out}"));
    assert_eq!(pages.len(), 2, "an HTTP and a SOCKS5 fetch: {out}");
    for page in &pages {
        assert_echo(page, path);
    }
    assert_eq!(
        pages[0]["tls"]["ja4"], pages[1]["tls"]["ja4"],
        "curl's voice, whichever way it came"
    );

    // One lease for both, and both tunnels on one exit, as the exits count them.
    assert_eq!(
        world.served(),
        served + 1,
        "the SOCKS5 fetch joined the lease"
    );
    let used = used_since(&world, &before);
    assert_eq!(used.len(), 1, "one exit: {used:?}");
    let (&exit, &opened) = used.iter().next().unwrap();
    assert_eq!(opened, 2, "both tunnels on sim-{exit}");
    // The broker's view: that exit holds task t1's lease still (--task-idle), of the class
    // asked.
    let exits = exits(&world);
    let holders = exits[&format!("sim-{exit}")]["holders"]
        .as_array()
        .expect("holders")
        .clone();
    assert_eq!(holders.len(), 1, "{holders:?}");
    assert_eq!(holders[0]["class"], "anonymous", "{holders:?}");
    assert_eq!(world.live(), 1, "no other lease");
}

#[test]
fn requests_worker_needs_only_the_proxy_url_and_reports_what_the_origin_refused() {
    let world = world(&["--task-idle", "30s"]);
    let limited = format!(
        "http://{HOST}:{}/limited",
        world.http_origin_answering("429 Too Many Requests")
    );
    let paths = ["/api/all?page=1".to_owned(), "/api/all?page=2".to_owned()];
    let mut urls: Vec<String> = paths.iter().map(|path| page(&world, path)).collect();
    urls.push(limited.clone());
    let served = world.served();
    let worker = example("requests_worker.py");
    let out = run(example_command(&world, python("venv"))
        .arg(&worker)
        .args(["--tasks", "2", "--worker", "rq"])
        .args(&urls)
        .env("REQUESTS_CA_BUNDLE", ca())
        .env("EXITVOICE_BROKER", &world.broker.url));
    let lines = json_lines(&out);
    for task in ["rq_0", "rq_1"] {
        let of_task: Vec<_> = lines.iter().filter(|line| line["task"] == task).collect();
        let statuses: Vec<_> = of_task.iter().map(|line| line["status"].clone()).collect();
        assert_eq!(
            serde_json::Value::Array(statuses),
            serde_json::json!([200, 200, 429, null]),
            "{task}: two pages, the origin's 429, then its report: {out}"
        );
        for (line, url) in of_task.iter().zip(&urls[..2]) {
            assert_eq!(line["url"], url.as_str());
            assert!(line["bytes"].as_u64().unwrap_or(0) > 2_000, "{line}");
        }
        assert_eq!(of_task[3]["reported"], "429", "{out}");
        assert_eq!(of_task[3]["broker"], 200, "the broker ended {task}'s lease");
    }
    assert_eq!(world.served(), served + 2, "one lease a task: {out}");
    assert_eq!(world.live(), 0, "the reports ended both leases");
    // Each report banned its exit for the origin (the host, the echo's too), so the second task
    // left from another exit.
    let exits = exits(&world);
    let refused: Vec<_> = exits
        .values()
        .filter(|exit| exit["outcomes_last_hour"]["429"] == 1)
        .collect();
    assert_eq!(refused.len(), 2, "two exits refused: {exits:?}");
    for exit in refused {
        let bans = exit["bans"].as_array().expect("bans");
        assert!(bans.iter().any(|ban| ban["origin"] == HOST), "{exit}");
    }

    // Reporting is optional: without EXITVOICE_BROKER the 429 is only printed, and the task's
    // lease lives on (until --task-idle), on the one exit not banned there.
    let out = run(example_command(&world, python("venv"))
        .arg(&worker)
        .args(["--worker", "quiet", &limited]));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1, "{out}");
    assert_eq!(lines[0]["status"], 429, "{out}");
    assert_eq!(world.live(), 1, "no report, the lease stays");
    assert_eq!(world.served(), served + 3);
}

#[test]
fn scrapy_spider_fetches_its_pages_a_task_on_one_lease() {
    let world = world(&[]);
    let paths: Vec<String> = (0..4).map(|i| format!("/api/all?scrapy={i}")).collect();
    let urls: Vec<String> = paths.iter().map(|path| page(&world, path)).collect();
    let (before, served) = (tunnels(&world), world.served());
    let out = run(example_command(&world, python("venv-scrapy"))
        .arg(example("scrapy_spider.py"))
        .args(["--tasks", "2"])
        .args(&urls));
    let tasks = fetched(&world, &out, &paths);
    let expected: Vec<String> = (0..4).map(|i| format!("scrapy_{}", i % 2)).collect();
    assert_eq!(tasks, expected, "page i in task i mod 2");
    assert_eq!(world.served(), served + 2, "one lease a task");
    let used = used_since(&world, &before);
    assert_eq!(used.len(), 2, "one exit a task: {used:?}");
}

#[test]
fn crawlee_fetches_its_pages_a_task_per_session() {
    let crawlee = example("crawlee");
    assert!(
        crawlee.join("node_modules/crawlee").is_dir(),
        "run scripts/install-test-deps.sh (npm ci in examples/proxy/crawlee)"
    );
    let world = world(&[]);
    let paths: Vec<String> = (0..6).map(|i| format!("/api/all?crawlee={i}")).collect();
    let urls: Vec<String> = paths.iter().map(|path| page(&world, path)).collect();
    let (before, served) = (tunnels(&world), world.served());
    // In a directory of its own: crawlee keeps nothing on disk, and this shows it.
    let cwd = tempfile::tempdir().unwrap();
    let out = run(example_command(&world, "node")
        .arg(crawlee.join("crawl.js"))
        .args(&urls)
        .current_dir(cwd.path())
        .env("NODE_EXTRA_CA_CERTS", ca()));
    let tasks: BTreeSet<String> = fetched(&world, &out, &paths).into_iter().collect();
    assert!(
        (1..=2).contains(&tasks.len()) && tasks.iter().all(|t| t.starts_with("crawlee_")),
        "a task per session, at most two sessions: {tasks:?}"
    );
    let grants = world.served() - served;
    assert_eq!(
        usize::try_from(grants).unwrap(),
        tasks.len(),
        "one lease a session"
    );
    let used = used_since(&world, &before);
    assert_eq!(used.len(), tasks.len(), "one exit a session: {used:?}");
    assert!(
        std::fs::read_dir(cwd.path()).unwrap().next().is_none(),
        "crawlee wrote storage"
    );
}

#[test]
fn chromium_rides_the_fixed_lease_listener() {
    let world = world(&["--task-idle", "30s"]);
    let path = "/api/all?from=chromium";
    let (before, served) = (tunnels(&world), world.served());
    let profile = tempfile::tempdir().unwrap();
    // The example's flags, and the ones a test run needs: no sandbox (root), nothing fetched
    // in the background, the test CA's certificate accepted, TCP only.
    let dom = run(example_command(&world, example("chromium.sh"))
        .arg(page(&world, path))
        .args(exitvoice_auditor::probe::chromium::HEADLESS_FLAGS)
        .args([
            "--disable-quic",
            "--ignore-certificate-errors",
            "--proxy-bypass-list=<-loopback>",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .env(
            "EXITVOICE_BROWSER_PROXY",
            world.broker.proxies[1].to_string(),
        ));
    // Chromium shows a JSON answer as text in a <pre>.
    let text = dom
        .split_once("<pre")
        .and_then(|(_, rest)| rest.split_once('>'))
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .map(|(json, _)| support::browser::unescape(json))
        .unwrap_or_else(|| panic!("chromium showed no echo: {dom}"));
    let page: serde_json::Value = serde_json::from_str(&text).expect("the echo's JSON");
    assert_echo(&page, path);
    assert!(
        page["http2"]["akamai_fingerprint"].is_string(),
        "Chromium spoke HTTP/2 through the tunnel: {page}"
    );
    assert_eq!(world.served(), served + 1, "the listener's one lease");
    let used = used_since(&world, &before);
    assert_eq!(used.len(), 1, "every connection from one exit: {used:?}");
    assert_eq!(world.live(), 1, "task browser's lease, until --task-idle");
}
