//! What the package and image tests share: the build this test run already has (its target
//! folder and profile, which scripts/package.sh and scripts/image.sh take), commands run with
//! their output checked, and a server's printed address.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The binary `cargo test` built, which the scripts package (`--no-build`).
pub const BINARY: &str = env!("CARGO_BIN_EXE_exitvoice");

/// The source tree.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The target folder and the profile of [`BINARY`] (`target/debug/exitvoice`: `target`, `dev`).
pub fn build() -> (PathBuf, String) {
    let dir = Path::new(BINARY).parent().expect("profile folder");
    let target = dir.parent().expect("target folder").to_path_buf();
    let profile = match dir.file_name().and_then(|name| name.to_str()) {
        Some("debug") => "dev".to_owned(),
        Some(other) => other.to_owned(),
        None => panic!("profile folder of {BINARY}"),
    };
    (target, profile)
}

/// Runs a packaging script of scripts/ on [`BINARY`]'s build with `args`; the last line it
/// printed (the package's path, the image's name).
pub fn script(name: &str, args: &[&str]) -> String {
    let (target, profile) = build();
    let out = Command::new(root().join("scripts").join(name))
        .args(["--profile", &profile, "--no-build"])
        .args(args)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("run the script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .last()
        .expect("a last line")
        .trim()
        .to_owned()
}

/// Runs `command`; panics with its output unless it succeeded; its standard output.
pub fn ok(command: &mut Command) -> String {
    let out = run(command);
    assert!(out.status.success(), "{command:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `command` with no standard input.
pub fn run(command: &mut Command) -> Output {
    command
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("{command:?}: {error}"))
}

/// `PROGRAM ARGS`, for [`ok`] and [`run`].
pub fn cmd(program: &str, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command.args(args);
    command
}

/// The version and commit `exitvoice --version` names: "exitvoice 0.1.0 (commit 0123abcd)".
pub fn version_and_commit(version_line: &str) -> (String, String) {
    let rest = version_line
        .trim()
        .strip_prefix("exitvoice ")
        .unwrap_or_else(|| panic!("{version_line}"));
    let (version, commit) = rest
        .split_once(" (commit ")
        .unwrap_or_else(|| panic!("{version_line}"));
    (version.to_owned(), commit.trim_end_matches(')').to_owned())
}

/// The commit of the source tree as git names it (12 digits, as build.rs asks), or "unknown"
/// outside a git checkout.
pub fn git_commit() -> String {
    let out = run(cmd("git", &["rev-parse", "--short=12", "HEAD"]).current_dir(root()));
    match out.status.success() {
        true => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        false => "unknown".to_owned(),
    }
}

/// Polls `read` (a server's output so far) until a line starts with `prefix`; the rest of it.
pub fn wait_for_line(prefix: &str, mut read: impl FnMut() -> String) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = read();
        if let Some(rest) = text.lines().find_map(|line| line.strip_prefix(prefix)) {
            return rest.trim().to_owned();
        }
        assert!(Instant::now() < deadline, "no line {prefix:?} in:\n{text}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `curl -sk --http2 URL`'s answer as JSON, checked to be an echo over HTTP/2.
pub fn echo(curl: &mut Command) -> serde_json::Value {
    let body = ok(curl);
    let echo: serde_json::Value = serde_json::from_str(&body).expect("an echo as JSON");
    assert_eq!(echo["schema_version"], 1, "{echo}");
    assert_eq!(echo["alpn"]["spoken"], "h2", "{echo}");
    assert!(echo["tls"]["ja4"].is_string(), "{echo}");
    echo
}

/// Rows of `table` in the SQLite file `db` of a server that has stopped, as sqlite3 counts
/// them in a copy (with its write-ahead log, if one was left): nothing is written beside the
/// server's files, whose owner is not root.
pub fn sqlite_count(db: &Path, table: &str) -> u64 {
    let copy = tempfile::tempdir().expect("tempdir");
    let copied = copy.path().join("copy.db");
    std::fs::copy(db, &copied).expect("copy the database");
    let wal = db.with_file_name(format!(
        "{}-wal",
        db.file_name().and_then(|n| n.to_str()).expect("name")
    ));
    if wal.exists() {
        std::fs::copy(&wal, copy.path().join("copy.db-wal")).expect("copy the log");
    }
    ok(&mut cmd(
        "sqlite3",
        &[
            copied.to_str().expect("path"),
            &format!("SELECT count(*) FROM {table}"),
        ],
    ))
    .trim()
    .parse()
    .expect("a count")
}
