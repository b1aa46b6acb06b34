//! One configuration for `serve` and `audit`: `--config FILE` (TOML, tables
//! `[serve]` and `[audit]`, keys named like the flags), `EXITVOICE_*` variables, precedence
//! flag, then environment, then file, then default; unknown keys and bad values named with
//! their line; `exitvoice config check FILE` with secrets redacted. Runs the real binary.
//! Needs curl.

mod echo_support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use echo_support::{curl, EchoServer};

const SECRET: &str = "file-s3cret-7d1e";

/// Runs the binary with `args` and extra environment variables (no inherited `EXITVOICE_*`);
/// one still running after 10 s (a server that should have refused to start) is killed.
fn exitvoice(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_exitvoice"));
    for (key, _) in std::env::vars() {
        if key.starts_with("EXITVOICE_") {
            command.env_remove(key);
        }
    }
    command
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("run exitvoice");
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().expect("try_wait").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output().expect("exitvoice output")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write config");
    path.display().to_string()
}

/// The `key = value  # source` line of `key` in `config check` output's `[section]`.
fn effective<'a>(out: &'a str, section: &str, key: &str) -> &'a str {
    let start = out
        .find(&format!("[{section}]"))
        .unwrap_or_else(|| panic!("[{section}] in {out}"));
    out[start..]
        .lines()
        .find(|line| line.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("{key} in [{section}] of {out}"))
}

#[test]
fn config_check_shows_env_over_file_over_default_and_redacts_secrets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "ev.toml",
        &format!(
            "[serve]\nper-ip-rate = 50\nper-ip-burst = 60\nlisten = [\"127.0.0.1:9443\", \"[::1]:9443\"]\n\
             api-token = \"{SECRET}\"\n\n[audit]\nexits = \"exits.toml\"\nonce = true\n\n\
             [broker]\nexits = \"exits.toml\"\nstateless-per-exit = 3\nban-ttl = \"2h\"\n\
             broker-token = \"{SECRET}\"\nstore = \"postgres://fleet:{SECRET}@db.internal/broker\"\n"
        ),
    );
    let out = exitvoice(
        &["config", "check", &file],
        &[("EXITVOICE_PER_IP_BURST", "70")],
    );
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert_eq!(
        effective(&text, "serve", "per-ip-rate"),
        "per-ip-rate = 50  # file"
    );
    assert_eq!(
        effective(&text, "serve", "per-ip-burst"),
        "per-ip-burst = 70  # EXITVOICE_PER_IP_BURST"
    );
    assert_eq!(
        effective(&text, "serve", "penalty-strikes"),
        "penalty-strikes = 20  # default"
    );
    assert_eq!(
        effective(&text, "serve", "listen"),
        r#"listen = ["127.0.0.1:9443", "[::1]:9443"]  # file"#
    );
    assert_eq!(
        effective(&text, "serve", "api-token"),
        r#"api-token = "<redacted>"  # file"#
    );
    assert_eq!(effective(&text, "audit", "once"), "once = true  # file");
    assert_eq!(
        effective(&text, "audit", "concurrency"),
        "concurrency = 8  # default"
    );
    assert_eq!(
        effective(&text, "broker", "stateless-per-exit"),
        "stateless-per-exit = 3  # file"
    );
    assert_eq!(
        effective(&text, "broker", "ban-ttl"),
        r#"ban-ttl = "2h"  # file"#
    );
    assert_eq!(
        effective(&text, "broker", "broker-token"),
        r#"broker-token = "<redacted>"  # file"#
    );
    assert_eq!(
        effective(&text, "broker", "store"),
        r#"store = "postgres://fleet:***@db.internal/broker"  # file"#
    );
    assert!(
        !text.contains(SECRET),
        "the secret is never printed: {text}"
    );
    // A Redis store's password too.
    let redis = format!("rediss://broker:{SECRET}@cache.internal:6380/0");
    let out = exitvoice(
        &["config", "check", &file],
        &[("EXITVOICE_BROKER_STORE_URL", redis.as_str())],
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert_eq!(
        effective(&text, "broker", "store"),
        r#"store = "rediss://broker:***@cache.internal:6380/0"  # EXITVOICE_BROKER_STORE_URL"#
    );
    assert!(!text.contains(SECRET), "{text}");

    // A secret from the environment is redacted too, and `--help` does not show it either.
    let out = exitvoice(
        &["config", "check", &file],
        &[("EXITVOICE_API_TOKEN", "env-s3cret-91aa")],
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert_eq!(
        effective(&text, "serve", "api-token"),
        r#"api-token = "<redacted>"  # EXITVOICE_API_TOKEN"#
    );
    assert!(!text.contains("env-s3cret-91aa"));
    let help = exitvoice(
        &["serve", "--help"],
        &[("EXITVOICE_API_TOKEN", "env-s3cret-91aa")],
    );
    let help = String::from_utf8(help.stdout).expect("UTF-8");
    assert!(help.contains("[env: EXITVOICE_API_TOKEN]"), "{help}");
    assert!(!help.contains("env-s3cret-91aa"));
}

#[test]
fn unknown_keys_and_bad_values_are_errors_naming_key_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "[serve]\nper-ip-rate = 5\n\n# a typo:\nper-ip-rat = 5\n",
            "line 5: unknown key `per-ip-rat` in [serve]",
        ),
        ("[srve]\n", "line 1: unknown key `srve`"),
        (
            "[serve]\nhandshake-timeout = \"soon\"\n",
            "line 2: `handshake-timeout`: invalid value 'soon'",
        ),
        (
            "[audit]\nexits = \"e.toml\"\nonce = \"yes\"\n",
            "line 3: `once` must be true or false",
        ),
        (
            "[serve]\ndatabase = [\"a.db\", \"b.db\"]\n",
            "line 2: `database` takes one value, not a list",
        ),
        ("[serve]\nlisten = \n", "not TOML"),
    ];
    for (text, want) in cases {
        let file = write(dir.path(), "bad.toml", text);
        let db = dir.path().join("echo.db").display().to_string();
        for args in [
            vec!["config", "check", file.as_str()],
            vec![
                "serve",
                "--config",
                &file,
                "--listen",
                "127.0.0.1:0",
                "--db",
                &db,
            ],
        ] {
            let out = exitvoice(&args, &[]);
            assert!(!out.status.success(), "{args:?} accepted {text:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains(want), "{args:?} on {text:?}: {stderr}");
        }
    }
}

#[tokio::test]
async fn a_running_server_takes_flag_over_env_over_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The harness passes `--listen 127.0.0.1:0` as a flag: the file's listen must lose to it.
    let file = write(
        dir.path(),
        "ev.toml",
        &format!(
            "[serve]\nlisten = [\"127.0.0.3:0\"]\nmetrics-listen = \"127.0.0.1:0\"\n\
             api-token = \"{SECRET}\"\nstore-peer-ip = \"prefix\"\n"
        ),
    );
    let server = EchoServer::start_with_env(
        &["--config", &file],
        &[("EXITVOICE_METRICS_LISTEN", Path::new("127.0.0.4:0"))],
    );
    let ips: Vec<String> = server.addrs.iter().map(|a| a.ip().to_string()).collect();
    assert_eq!(ips, ["127.0.0.1"], "flag over file");
    let metrics = server
        .metrics
        .expect("metrics from the file, address from the env");
    assert_eq!(metrics.ip().to_string(), "127.0.0.4", "env over file");

    // The file's secret is in force: the bearer opens /api/observations, nothing else does.
    let url = server.url("/api/observations?limit=1");
    let status = |extra: &[&str]| {
        let mut args = vec!["-sk", "-o", "/dev/null", "-w", "%{http_code}"];
        args.extend_from_slice(extra);
        args.push(&url);
        String::from_utf8(curl(&args).stdout).expect("UTF-8")
    };
    let bearer = format!("Authorization: Bearer {SECRET}");
    assert_eq!(status(&["-H", &bearer]), "200");
    assert_eq!(status(&[]), "401");
    // The file's store-peer-ip is in force too: the stored peer is a /24.
    let probe = curl(&["-sk", &server.url("/probe/config-file-probe")]);
    assert!(probe.status.success());
    let rows = server
        .rows_until(|rows| rows.iter().any(|r| r.token.is_some()))
        .await;
    let row = rows.iter().find(|r| r.token.is_some()).expect("stored");
    assert_eq!(row.peer, "127.0.0.0/24:0");
    assert!(
        !server.stderr().contains(SECRET),
        "the secret is never logged"
    );
}
