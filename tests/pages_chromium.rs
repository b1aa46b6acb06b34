//! The pages for people, loaded by real headless Chromium from running servers.
//!
//! The fingerprint page must show what `/api/all` says to the same browser; the dashboard must
//! list every exit of a real audit run with its state and route, and draw one timeline mark per
//! sample. Every load fails the test on any console message, screenshots at 1280 and 360 px are
//! written under the test's target directory and checked, and no page carries a secret.

mod support;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use exitvoice_schema::Echo;
use support::browser::{self, assert_screenshot, text_by_id};
use support::{
    audit, closed_port, exits_file, EchoServer, Proxy, PASSWORD, PASSWORD_ENCODED, USER,
};

/// Where the screenshots go (kept after the run, for people to look at).
fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pages-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

/// Screenshots `url` at 1280 and 360 px wide into `<name>-<width>.png`, checks both, and fails
/// on any console message.
fn screenshots(url: &str, name: &str) {
    for width in [1280, 360] {
        let path = screenshot_dir().join(format!("{name}-{width}.png"));
        let console = browser::screenshot(url, width, 1600, &path);
        assert!(console.is_empty(), "{name} at {width} px: {console:?}");
        assert_screenshot(&path, width, 1600);
    }
}

/// Loads `url` and fails on any console message.
fn load(url: &str) -> String {
    let page = browser::load(url);
    assert!(page.console.is_empty(), "{url}: console {:?}", page.console);
    page.dom
}

/// Every stylesheet and script `dom` loads (`/assets/…`) answers 200 from `base`: a failed
/// subresource shows in Chromium's DevTools console but not in its log, so it is checked here.
fn assert_assets_load(dom: &str, base: &str) {
    let assets: Vec<&str> = dom
        .split(['"', '\''])
        .filter(|part| part.starts_with("/assets/"))
        .collect();
    assert_eq!(assets.len(), 2, "a stylesheet and a script: {assets:?}");
    for asset in assets {
        let (status, _, _) = curl(&[&format!("{base}{asset}")]);
        assert_eq!(status, 200, "{asset}");
    }
}

/// The value of header `name` in the answer to `curl -sk` with `args`.
fn header(args: &[&str], name: &str) -> Option<String> {
    let output = Command::new("curl")
        .args(["-sk", "-o", "/dev/null", "-D", "-"])
        .args(args)
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
}

/// `curl -sk` with extra args: (HTTP status, content type, body).
fn curl(args: &[&str]) -> (u16, String, String) {
    let output = Command::new("curl")
        .args(["-sk", "-o", "-", "-w", "\n%{http_code} %{content_type}"])
        .args(args)
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, trailer) = text.rsplit_once('\n').expect("curl trailer");
    let (status, content_type) = trailer.split_once(' ').unwrap_or((trailer, ""));
    (
        status.parse().expect("status"),
        content_type.to_owned(),
        body.to_owned(),
    )
}

#[test]
fn the_fingerprint_page_shows_what_api_all_says_to_the_same_browser() {
    let echo = EchoServer::start();
    let base = format!("https://127.0.0.1:{}", echo.port);
    let page = load(&format!("{base}/"));
    let api = load(&format!("{base}/api/all"));
    // The browser's own /api/all, on another connection: what stays the same across its
    // connections (JA3 does not: Chromium permutes its extensions) must be what the page says.
    let api: Echo = exitvoice_auditor::probe::chromium::echo_from_dom(&api).expect("echo JSON");
    let tls = api.tls.as_ref().expect("Chromium's TLS");
    let http2 = api.http2.as_ref().expect("Chromium speaks h2");
    let shown = |id: &str| text_by_id(&page, id).unwrap_or_else(|| panic!("no #{id}:\n{page}"));
    assert_eq!(shown("ja4"), tls.ja4);
    assert_eq!(shown("ja4_r"), tls.ja4_r);
    assert_eq!(shown("tls_voice_id"), tls.voice_id.0);
    assert_eq!(shown("akamai_fingerprint"), http2.akamai_fingerprint);
    assert_eq!(shown("http2_voice_id"), http2.voice_id.0);
    assert_eq!(Some(shown("profile")), api.profile);
    assert_eq!(shown("alpn_offered"), api.alpn.offered.join(","));
    // The TCP layer: the SYN of the browser's host, alike on each of its connections.
    let tcp = api.tcp.as_ref().expect("the SYN of Chromium's connection");
    assert_eq!(shown("tcp_voice"), tcp.voice_id.0);
    assert_eq!(shown("tcp_p0f"), tcp.p0f);
    // The page's own request: the JSON it embeds is the echo it was rendered from.
    let embedded: Echo = serde_json::from_str(&shown("echo-json")).expect("embedded echo");
    let own = embedded.tls.as_ref().expect("tls");
    assert_eq!(shown("ja3_hash"), own.ja3_hash);
    assert_eq!(shown("ja3"), own.ja3);
    assert_eq!(embedded.path, "/");
    assert_eq!(
        embedded
            .http2
            .as_ref()
            .map(|h| h.pseudo_header_order.join(",")),
        Some(shown("pseudo_header_order"))
    );
    // Coherence: the page's families and score are what the API judged for the same browser.
    let coherence = api.coherence.as_ref().expect("coherence in /api/all");
    let name = |f: &Option<exitvoice_schema::Family>| f.as_ref().map(|f| f.name.clone());
    assert_eq!(Some(shown("tls_family")), name(&coherence.tls_family));
    assert_eq!(Some(shown("http_family")), name(&coherence.http_family));
    assert_eq!(Some(shown("ua_family")), name(&coherence.ua_family));
    let score: f64 = shown("coherence_score").parse().expect("a score");
    assert!(
        (score - coherence.score).abs() < 0.005,
        "{score} vs {coherence:?}"
    );
    let bucket = api.bucket.expect("a bucket").to_string();
    assert!(
        page.contains(&format!("class=\"badge bucket-{bucket}\"")),
        "bucket {bucket} not shown"
    );
    assert!(text_by_id(&page, "bucket-rule").is_some_and(|rule| rule.contains(&bucket)));
    // Names and GREASE from the echo's detail; the script ran and added copy buttons.
    assert!(page.contains("TLS_AES_128_GCM_SHA256"));
    assert!(page.contains("INITIAL_WINDOW_SIZE"));
    assert!(page.contains("GREASE (RFC 8701"), "Chromium sends GREASE");
    assert!(
        page.matches("class=\"copy\"").count() > 20,
        "no copy buttons"
    );
    assert!(page.contains("href=\"/api/all\""));
    for external in ["src=\"http", "href=\"http", "url(http"] {
        assert!(!page.contains(external), "an external resource: {external}");
    }

    // Scripts keep JSON: `*/*` at / is the JSON 404, /api/* is JSON even when HTML is asked.
    let (status, kind, body) = curl(&[&format!("{base}/")]);
    assert_eq!((status, kind.as_str()), (404, "application/json"), "{body}");
    // An HTTP/1.1 client that asks for HTML gets the page with its request head.
    let (status, _, h1) = curl(&["--http1.1", "-H", "Accept: text/html", &format!("{base}/")]);
    assert_eq!(status, 200);
    assert_eq!(
        text_by_id(&h1, "request_line").as_deref(),
        Some("GET / HTTP/1.1")
    );
    assert!(h1.contains("id=\"http1_header_order\""), "{h1}");
    let (status, kind, _) = curl(&["-H", "Accept: text/html", &format!("{base}/api/all")]);
    assert_eq!((status, kind.as_str()), (200, "application/json"));
    // The auditor's route stays JSON: its personas send a browser's Accept.
    let (status, kind, _) = curl(&["-H", "Accept: text/html", &format!("{base}/probe/tok-1")]);
    assert_eq!((status, kind.as_str()), (200, "application/json"));
    let (status, kind, _) = curl(&["-H", "Accept: text/html", &format!("{base}/elsewhere")]);
    assert_eq!((status, kind.as_str()), (404, "text/html; charset=utf-8"));
    let (status, kind, css) = curl(&[&format!("{base}/assets/exitvoice.css")]);
    assert_eq!((status, kind.as_str()), (200, "text/css; charset=utf-8"));
    assert!(css.contains("@media"));
    assert_assets_load(&page, &base);
    // The browser itself refuses anything from elsewhere (a violation would be a console
    // message, which fails the loads above).
    let csp = header(
        &["-H", "Accept: text/html", &format!("{base}/")],
        "content-security-policy",
    );
    assert!(csp.is_some_and(|p| p.starts_with("default-src 'none'")));

    screenshots(&format!("{base}/"), "fingerprint");
}

/// `exitvoice dashboard` on a free port; killed on drop.
struct Dashboard {
    port: u16,
    child: Child,
}

impl Dashboard {
    fn start(db: &Path, token: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
            .args(["dashboard", "--listen", "127.0.0.1:0", "--database"])
            .arg(db)
            .env("EXITVOICE_DASHBOARD_TOKEN", token)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn exitvoice dashboard");
        let stdout = child.stdout.take().expect("stdout");
        let line = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find(|line| line.contains("listening on"))
            .expect("dashboard printed no address");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .expect("address");
        let addr: std::net::SocketAddr = addr.parse().expect("socket address");
        Self {
            port: addr.port(),
            child,
        }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `<tr>` of exit `name` in the exits table.
fn exit_row<'a>(dom: &'a str, name: &str) -> &'a str {
    let start = dom
        .find(&format!("<tr data-exit=\"{name}\""))
        .unwrap_or_else(|| panic!("no row for {name}"));
    let rest = dom.get(start..).unwrap_or_default();
    rest.get(..rest.find("</tr>").unwrap_or(rest.len()))
        .unwrap_or_default()
}

#[test]
fn the_dashboard_shows_every_exit_of_a_real_audit_run() {
    const TOKEN: &str = "dash-T0ken-for-the-test";
    let echo = EchoServer::start();
    let tiny = Proxy::tinyproxy();
    let squid = Proxy::squid();
    let (_closed, dead_port) = closed_port();
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[
            ("tinyproxy", format!("http://127.0.0.1:{}", tiny.port)),
            (
                "squid",
                format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}", squid.port),
            ),
            ("dead", format!("http://127.0.0.1:{dead_port}")),
        ],
    );
    let db = work.path().join("audit.db");
    let run = audit(&exits, &db, &["--samples", "3"]);
    let dashboard = Dashboard::start(&db, TOKEN);
    let base = format!("http://127.0.0.1:{}", dashboard.port);
    let authed = format!("http://viewer:{TOKEN}@127.0.0.1:{}", dashboard.port);

    // Only the token opens it, as a bearer token or as Basic auth's password.
    let (status, _, body) = curl(&[&format!("{base}/exits")]);
    assert_eq!(status, 401);
    assert!(!body.contains(TOKEN));
    // The stylesheet needs no token: a page's assets load without a second challenge.
    let (status, kind, _) = curl(&[&format!("{base}/assets/exitvoice.css")]);
    assert_eq!((status, kind.as_str()), (200, "text/css; charset=utf-8"));
    let wrong = "Authorization: Bearer dash-T0ken-for-the-tesT";
    assert_eq!(curl(&["-H", wrong, &format!("{base}/exits.json")]).0, 401);
    let bearer = format!("Authorization: Bearer {TOKEN}");
    let (status, kind, json) = curl(&["-H", &bearer, &format!("{base}/exits.json")]);
    assert_eq!((status, kind.as_str()), (200, "application/json"));
    let exported: serde_json::Value = serde_json::from_str(&json).expect("labels JSON");
    assert_eq!(exported, run.labels, "/exits.json is the labels export");
    let (status, kind, csv) = curl(&["-H", &bearer, &format!("{base}/exits.csv")]);
    assert_eq!((status, kind.as_str()), (200, "text/csv; charset=utf-8"));
    // Read by Python's csv module: one row per exit of the stored labels, with its route.
    let mut python = Command::new("python3")
        .args([
            "-c",
            "import csv, io, json, sys; print(json.dumps([[r['name'], r['route']] \
             for r in csv.DictReader(io.StringIO(sys.stdin.read(), newline=''))]))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    std::io::Write::write_all(&mut python.stdin.take().expect("stdin"), csv.as_bytes())
        .expect("CSV to python3");
    let read = python.wait_with_output().expect("python3 reads the CSV");
    let rows: serde_json::Value = serde_json::from_slice(&read.stdout).expect("rows");
    let expected: Vec<serde_json::Value> = run.labels["exits"]
        .as_array()
        .expect("exits")
        .iter()
        .map(|exit| serde_json::json!([exit["name"], exit["route"]]))
        .collect();
    assert_eq!(
        rows,
        serde_json::json!(expected),
        "/exits.csv is the labels export"
    );
    assert_eq!(curl(&["-H", wrong, &format!("{base}/exits.csv")]).0, 401);

    let list = load(&format!("{authed}/exits"));
    for name in ["tinyproxy", "squid", "dead"] {
        let label = run.exit(name);
        let row = exit_row(&list, name);
        let state = label["state"].as_str().expect("state");
        let route = label["route"].as_str().expect("route");
        assert!(
            row.contains(&format!("<td class=\"state\">{state}</td>")),
            "{name}: state {state} not in {row}"
        );
        assert!(
            row.contains(&format!("class=\"badge route-{route}\"")),
            "{name}: route {route} not in {row}"
        );
    }
    assert_eq!(run.exit("dead")["route"], "quarantine");
    assert_eq!(list.matches("<tr data-exit=").count(), 3);
    assert!(list.contains("id=\"chart-buckets\"") && list.contains("id=\"chart-routes\""));
    assert_assets_load(&list, &base);
    let csp = header(
        &["-H", &bearer, &format!("{base}/exits")],
        "content-security-policy",
    );
    assert!(csp.is_some_and(|p| p.starts_with("default-src 'none'")));

    // Filters and sorting are query parameters.
    let quarantined = load(&format!("{authed}/exits?route=quarantine"));
    let routes: Vec<&serde_json::Value> = ["tinyproxy", "squid", "dead"]
        .iter()
        .map(|n| &run.exit(n)["route"])
        .collect();
    assert_eq!(
        quarantined.matches("<tr data-exit=").count(),
        1,
        "{routes:?}\n{quarantined}"
    );
    assert!(quarantined.contains("<tr data-exit=\"dead\""));
    let sorted = load(&format!("{authed}/exits?sort=name&order=desc"));
    let order: Vec<usize> = ["tinyproxy", "squid", "dead"]
        .iter()
        .map(|n| sorted.find(&format!("<tr data-exit=\"{n}\"")).expect("row"))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");

    // One mark per successful sample, one gap per failed probe.
    for name in ["tinyproxy", "dead"] {
        let label = run.exit(name);
        let history = label["history"].as_array().expect("history");
        let samples = history.iter().filter(|e| e["voice"].is_string()).count();
        let failures = history.iter().filter(|e| e["error"].is_string()).count();
        let page = load(&format!("{authed}/exits/{name}"));
        let svg = page
            .get(page.find("<svg id=\"timeline\"").expect("timeline")..)
            .and_then(|s| s.get(..s.find("</svg>").expect("end of svg")))
            .expect("svg");
        assert_eq!(svg.matches("<circle").count(), samples, "{name}: {svg}");
        assert_eq!(svg.matches("class=\"gap\"").count(), failures, "{name}");
        assert_eq!(
            page.matches("<tr class=\"probe\">").count(),
            history.len(),
            "{name}: the probes table"
        );
    }
    assert_eq!(run.exit("tinyproxy")["samples"], 3);

    let squid_page = load(&format!("{authed}/exits/squid"));
    for page in [&list, &squid_page] {
        assert!(!page.contains(PASSWORD) && !page.contains(PASSWORD_ENCODED));
        assert!(!page.contains(TOKEN), "the dashboard token is rendered");
    }
    assert!(
        squid_page.contains(&format!("{USER}:***@")),
        "the redacted URL"
    );

    screenshots(&format!("{authed}/exits"), "exits");
    screenshots(&format!("{authed}/exits/tinyproxy"), "exit");
}

#[test]
fn the_dashboard_refuses_what_it_cannot_serve() {
    let work = tempfile::tempdir().unwrap();
    let missing = work.path().join("missing.db");
    let run = |db: &Path, token: &str| {
        Command::new(env!("CARGO_BIN_EXE_exitvoice"))
            .args(["dashboard", "--listen", "127.0.0.1:0", "--database"])
            .arg(db)
            .env("EXITVOICE_DASHBOARD_TOKEN", token)
            .output()
            .expect("run exitvoice dashboard")
    };
    // No database: an error, and no empty database created in its place.
    let out = run(&missing, "t0ken-long-enough-17");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such database"));
    assert!(!missing.exists());
    // An empty token would open the dashboard to anyone.
    let empty = work.path().join("empty.db");
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(exitvoice_store::Store::open(&empty))
        .expect("an empty store");
    // and a short one to whoever tries enough (failed attempts are not rate-limited).
    for token in ["", "t0ken-15-chars!"] {
        let out = run(&empty, token);
        assert!(!out.status.success(), "{token:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("at least 16 characters"),
            "{token:?}"
        );
    }
    // A database without labels yet: the dashboard says so.
    let dashboard = Dashboard::start(&empty, "t0ken-long-enough-17");
    let url = format!("http://127.0.0.1:{}/exits", dashboard.port);
    let (status, kind, body) = curl(&["-H", "Authorization: Bearer t0ken-long-enough-17", &url]);
    assert_eq!((status, kind.as_str()), (404, "text/html; charset=utf-8"));
    assert!(body.contains("no labels yet"), "{body}");
}
