//! The systemd units of `deploy/`: `systemd-analyze verify` accepts them (with
//! the binary path pointed at the one just built, since verify checks that it is executable),
//! `systemd-analyze security --offline` rates the services' exposure low, and the shipped
//! configuration passes `exitvoice config check`. Needs systemd-analyze
//! (scripts/install-test-deps.sh installs systemd).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const UNITS: [&str; 3] = [
    "exitvoice-serve.service",
    "exitvoice-audit.service",
    "exitvoice-audit.timer",
];
/// Where the units expect the binary (README.md, "Deploying").
const INSTALLED_BINARY: &str = "/usr/local/bin/exitvoice";

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

fn unit_text(name: &str) -> String {
    std::fs::read_to_string(deploy().join(name)).expect("unit file")
}

/// Copies the units into a temporary directory, the binary path replaced by the built one.
fn staged() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in UNITS {
        let text = unit_text(name).replace(INSTALLED_BINARY, env!("CARGO_BIN_EXE_exitvoice"));
        std::fs::write(dir.path().join(name), text).expect("stage unit");
    }
    dir
}

fn analyze(dir: &Path, args: &[&str]) -> Output {
    Command::new("systemd-analyze")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("systemd-analyze is installed (scripts/install-test-deps.sh)")
}

#[test]
fn systemd_analyze_verify_accepts_the_units_and_would_refuse_a_broken_one() {
    let dir = staged();
    let paths: Vec<String> = UNITS.iter().map(|name| format!("./{name}")).collect();
    let mut args = vec!["verify"];
    args.extend(paths.iter().map(String::as_str));
    let out = analyze(dir.path(), &args);
    assert!(out.status.success(), "{out:?}");
    // verify reports unknown keys and bad values as warnings with exit status 0: none allowed.
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "verify warnings");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");

    // The same check on a unit with a typo says so: the assertion above can fail.
    let broken = unit_text("exitvoice-audit.timer").replace("OnCalendar=", "OnCalender=");
    std::fs::write(dir.path().join("exitvoice-audit.timer"), broken).expect("write");
    let out = analyze(dir.path(), &["verify", "./exitvoice-audit.timer"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("Unknown key 'OnCalender'"), "{said}");
}

#[test]
fn the_services_are_hardened_and_the_audit_runs_hourly() {
    let serve = unit_text("exitvoice-serve.service");
    for line in [
        "DynamicUser=yes",
        "StateDirectory=exitvoice",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
        "AmbientCapabilities=CAP_NET_BIND_SERVICE",
    ] {
        assert!(serve.lines().any(|l| l == line), "serve unit lacks {line}");
    }
    let timer = unit_text("exitvoice-audit.timer");
    assert!(timer.lines().any(|l| l == "OnCalendar=hourly"));
    assert!(timer.lines().any(|l| l.starts_with("RandomizedDelaySec=")));

    let dir = staged();
    for service in ["exitvoice-serve.service", "exitvoice-audit.service"] {
        let out = analyze(
            dir.path(),
            &["security", "--offline=true", &format!("./{service}")],
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let level: f64 = text
            .lines()
            .find_map(|line| line.split("Overall exposure level for ").nth(1))
            .and_then(|rest| rest.split(": ").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|level| level.parse().ok())
            .unwrap_or_else(|| panic!("no exposure level: {text}"));
        // systemd rates 0–10; below 2 is "OK" (a default service scores 9.6 "UNSAFE").
        assert!(level < 2.0, "{service}: exposure {level}");
    }
}

#[test]
fn the_shipped_configuration_checks() {
    let out = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .args(["config", "check"])
        .arg(deploy().join("exitvoice.toml"))
        .env_remove("EXITVOICE_API_TOKEN")
        .output()
        .expect("run exitvoice");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(r#"listen = ["0.0.0.0:443", "[::]:443"]  # file"#),
        "{text}"
    );
    assert!(
        text.contains(r#"database = "/var/lib/exitvoice/echo.db"  # file"#),
        "{text}"
    );
    assert!(
        text.contains(r#"exits = "/etc/exitvoice/exits.toml"  # file"#),
        "{text}"
    );
}
