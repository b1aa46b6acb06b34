//! The Debian package (README.md, "Install"), installed, upgraded, removed and purged for real:
//! scripts/package.sh packages the build this test run already has; lintian finds no error and
//! no warning that docs/decisions.md does not argue; `dpkg -i` makes the user `exitvoice` and
//! its state folders, puts every file where the package says, and the units pass
//! `systemd-analyze verify` where they lie (with their man pages); `exitvoice serve`, started as
//! that user with the packaged configuration, answers curl; the man page renders and the bash
//! completion is bound; an edited configuration survives an upgrade; `dpkg -r` keeps the state,
//! `dpkg -P` removes it with the configuration and the user, and nothing the package made is
//! left. The machine is left as found: the package is purged, on failure too.
//!
//! As root (dpkg); needs cargo-deb, lintian, man-db, sqlite3 and curl
//! (scripts/install-test-deps.sh).

mod package_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use package_support::{cmd, echo, ok, run, script, sqlite_count, version_and_commit};

const CONFIG: &str = "/etc/exitvoice/exitvoice.toml";
const STATE: [&str; 2] = ["/var/lib/exitvoice", "/var/lib/exitvoice-audit"];
const UNITS: [&str; 4] = [
    "/lib/systemd/system/exitvoice-serve.service",
    "/lib/systemd/system/exitvoice-audit.service",
    "/lib/systemd/system/exitvoice-audit.timer",
    "/lib/systemd/system/exitvoice-broker.service",
];

/// Purges the package when the test ends, however it ends.
struct Purge;

impl Drop for Purge {
    fn drop(&mut self) {
        let _ = run(&mut cmd("dpkg", &["--purge", "exitvoice"]));
    }
}

/// dpkg's state of the package: "installed", "config-files", or "" when dpkg knows nothing.
fn status() -> String {
    let out = run(&mut cmd(
        "dpkg-query",
        &["-W", "-f", "${db:Status-Status}", "exitvoice"],
    ));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The `getent DATABASE exitvoice` entry, split at the colons, if there is one.
fn entry(database: &str) -> Option<Vec<String>> {
    let out = run(&mut cmd("getent", &[database, "exitvoice"]));
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .split(':')
            .map(str::to_owned)
            .collect()
    })
}

/// `stat`'s owner, group and mode of `path`.
fn owner_and_mode(path: &str) -> String {
    ok(&mut cmd("stat", &["-c", "%U %G %a", path]))
        .trim()
        .to_owned()
}

/// The paths the package holds, from the .deb itself (`dpkg-deb -c`), without the leading dot.
fn contents(deb: &Path) -> Vec<PathBuf> {
    ok(&mut cmd("dpkg-deb", &["-c", deb.to_str().expect("path")]))
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .map(|path| PathBuf::from(path.trim_start_matches('.').trim_end_matches('/')))
        .filter(|path| path.as_os_str().len() > 1)
        .collect()
}

#[test]
fn the_package_installs_runs_upgrades_removes_and_purges() {
    assert_eq!(
        status(),
        "",
        "exitvoice is installed already: this test would replace it (dpkg --purge exitvoice)"
    );
    assert!(entry("passwd").is_none(), "a user exitvoice exists already");
    let _purge = Purge;
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = out_dir.path().to_str().expect("path");
    let (version, commit) =
        version_and_commit(&ok(&mut cmd(package_support::BINARY, &["--version"])));
    assert_eq!(
        commit,
        package_support::git_commit(),
        "--version names the commit"
    );

    let first = PathBuf::from(script(
        "package.sh",
        &[
            "--fast",
            "--out",
            out,
            "--deb-version",
            &format!("{version}-1"),
        ],
    ));
    lintian_finds_only_argued_warnings(&first);
    let made = contents(&first);
    let existed: BTreeSet<PathBuf> = made.iter().filter(|p| p.exists()).cloned().collect();

    ok(&mut cmd("dpkg", &["-i", first.to_str().expect("path")]));
    assert_eq!(status(), "installed");
    assert_ne!(systemd_state(), "", "postinst recorded the units' state");
    the_user_and_the_files_are_there(&version, &commit);
    the_units_verify_the_man_page_renders_and_completion_is_bound();
    serve_answers_as_the_user_with_the_packaged_configuration();

    // The operator's edit, then an upgrade.
    let packaged = std::fs::read_to_string(CONFIG).expect("config");
    let edited = packaged.replace("retain = \"30d\"", "retain = \"7d\"") + "# edited\n";
    assert_ne!(edited, packaged);
    std::fs::write(CONFIG, &edited).expect("edit the config");
    let second = script(
        "package.sh",
        &[
            "--fast",
            "--out",
            out,
            "--deb-version",
            &format!("{version}-2"),
        ],
    );
    ok(&mut cmd("dpkg", &["-i", &second]));
    let installed = ok(&mut cmd(
        "dpkg-query",
        &["-W", "-f", "${Version}", "exitvoice"],
    ));
    assert_eq!(installed, format!("{version}-2"));
    assert_eq!(std::fs::read_to_string(CONFIG).expect("config"), edited);

    // Remove: the binary goes; the state, the configuration and the user stay.
    ok(&mut cmd("dpkg", &["-r", "exitvoice"]));
    assert_eq!(status(), "config-files");
    assert!(!Path::new("/usr/bin/exitvoice").exists());
    assert!(Path::new("/var/lib/exitvoice/echo.db").exists());
    assert_eq!(std::fs::read_to_string(CONFIG).expect("config"), edited);
    assert!(entry("passwd").is_some());

    // Purge: nothing is left that the package made.
    ok(&mut cmd("dpkg", &["-P", "exitvoice"]));
    assert_eq!(status(), "");
    for path in STATE.iter().chain(&["/etc/exitvoice"]) {
        assert!(!Path::new(path).exists(), "{path} is left");
    }
    assert!(entry("passwd").is_none(), "the user is left");
    assert!(entry("group").is_none(), "the group is left");
    for path in made.iter().filter(|path| !existed.contains(*path)) {
        assert!(!path.exists(), "{} is left", path.display());
    }
    assert_eq!(
        systemd_state(),
        "",
        "what deb-systemd-helper recorded is left"
    );
}

/// What deb-systemd-helper recorded of the units (their `[Install]` sections, for an enable
/// to come), one path a line.
fn systemd_state() -> String {
    let dirs = [
        "/var/lib/systemd/deb-systemd-helper-enabled",
        "/var/lib/systemd/deb-systemd-helper-masked",
    ];
    let dirs: Vec<&str> = dirs.into_iter().filter(|d| Path::new(d).exists()).collect();
    if dirs.is_empty() {
        return String::new();
    }
    let mut find = cmd("find", &dirs);
    find.args(["-name", "*exitvoice*"]);
    ok(&mut find)
}

/// lintian reports no error, and each warning it reports is argued in docs/decisions.md
/// (its tag written there as `tag`).
fn lintian_finds_only_argued_warnings(deb: &Path) {
    let out = run(&mut cmd(
        "lintian",
        &["--fail-on", "error", deb.to_str().expect("path")],
    ));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "lintian: {report}");
    assert!(
        !report.lines().any(|line| line.starts_with("E: ")),
        "{report}"
    );
    let decisions =
        std::fs::read_to_string(package_support::root().join("docs/decisions.md")).expect("docs");
    for line in report.lines().filter(|line| line.starts_with("W: ")) {
        let tag = line.split_whitespace().nth(2).expect("a tag");
        assert!(
            decisions.contains(&format!("`{tag}`")),
            "lintian warns {tag}, which docs/decisions.md does not argue: {line}"
        );
    }
}

fn the_user_and_the_files_are_there(version: &str, commit: &str) {
    let user = entry("passwd").expect("the user exitvoice");
    let uid: u32 = user[2].parse().expect("uid");
    assert!(uid < 1000, "a system user: {user:?}");
    assert_eq!(user[5], "/var/lib/exitvoice");
    assert_eq!(user[6], "/usr/sbin/nologin");
    assert!(entry("group").is_some(), "the group exitvoice");
    for dir in STATE {
        assert_eq!(owner_and_mode(dir), "exitvoice exitvoice 700", "{dir}");
    }

    let listed = ok(&mut cmd("dpkg", &["-L", "exitvoice"]));
    let listed: BTreeSet<&str> = listed.lines().collect();
    let mut expected = vec![
        "/usr/bin/exitvoice",
        CONFIG,
        "/usr/share/bash-completion/completions/exitvoice",
        "/usr/share/zsh/vendor-completions/_exitvoice",
        "/usr/share/fish/vendor_completions.d/exitvoice.fish",
        "/usr/share/doc/exitvoice/copyright",
        "/usr/share/doc/exitvoice/changelog.Debian.gz",
    ];
    expected.extend(UNITS);
    // A page for each subcommand `exitvoice --help` lists (but `help`).
    let help = ok(&mut cmd("/usr/bin/exitvoice", &["--help"]));
    let pages: Vec<String> = help
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(|name| format!("/usr/share/man/man1/exitvoice-{name}.1.gz"))
        .collect();
    assert!(pages.len() >= 9, "{help}");
    expected.extend(pages.iter().map(String::as_str));
    for path in expected {
        assert!(listed.contains(path), "the package lacks {path}");
    }
    for path in &listed {
        assert!(Path::new(path).exists(), "{path} listed but missing");
    }
    let conffiles = ok(&mut cmd(
        "dpkg-query",
        &["-W", "-f", "${Conffiles}", "exitvoice"],
    ));
    assert!(conffiles.contains(CONFIG), "{conffiles}");
    assert_eq!(
        ok(&mut cmd("/usr/bin/exitvoice", &["--version"])).trim(),
        format!("exitvoice {version} (commit {commit})")
    );
}

fn the_units_verify_the_man_page_renders_and_completion_is_bound() {
    // Where they lie, with the binary they name and the man pages of their Documentation=.
    let out = run(Command::new("systemd-analyze").arg("verify").args(UNITS));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "verify warnings");

    assert_eq!(
        ok(&mut cmd("man", &["-w", "exitvoice-broker"])).trim(),
        "/usr/share/man/man1/exitvoice-broker.1.gz"
    );
    let out = run(cmd("man", &["--warnings", "-P", "cat", "exitvoice-broker"])
        .env("MANWIDTH", "100")
        .env("LANG", "C.UTF-8"));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "groff warnings");
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains("exitvoice-broker - Lease exits"), "{page}");
    assert!(page.contains("--exits <FILE>"), "{page}");
    assert!(page.contains("EXITVOICE_BROKER_TOKEN"), "{page}");

    let bound = ok(&mut cmd(
        "bash",
        &[
            "-c",
            "source /usr/share/bash-completion/completions/exitvoice; complete -p exitvoice",
        ],
    ));
    assert!(
        bound.starts_with("complete ") && bound.trim().ends_with(" exitvoice"),
        "{bound}"
    );
    // And bash completes with it: `exitvoice bro<TAB>`.
    let completed = ok(&mut cmd(
        "bash",
        &[
            "-c",
            "source /usr/share/bash-completion/completions/exitvoice; \
             COMP_WORDS=(exitvoice bro); COMP_CWORD=1; COMP_LINE='exitvoice bro'; \
             COMP_POINT=${#COMP_LINE}; _exitvoice exitvoice bro exitvoice; \
             printf '%s\\n' \"${COMPREPLY[@]}\"",
        ],
    ));
    assert_eq!(completed.trim(), "broker");
}

fn serve_answers_as_the_user_with_the_packaged_configuration() {
    let logs = tempfile::tempdir().expect("tempdir");
    let log = logs.path().join("serve.log");
    let file = std::fs::File::create(&log).expect("log file");
    // As the unit runs it: the user, the working directory, the packaged file; on a free
    // loopback port, since the file's 443 needs the unit's capability.
    let mut child = Command::new("setpriv")
        .args([
            "--reuid=exitvoice",
            "--regid=exitvoice",
            "--init-groups",
            "--",
            "/usr/bin/exitvoice",
            "serve",
            "--config",
            CONFIG,
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .current_dir("/var/lib/exitvoice")
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log"))
        .stderr(file)
        .spawn()
        .expect("setpriv (util-linux)");
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let addr = package_support::wait_for_line("exitvoice serve: listening on https://", read);
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).expect("status");
    let uid = entry("passwd").expect("user")[2].clone();
    assert!(
        status
            .lines()
            .any(|line| line.split_whitespace().collect::<Vec<_>>()
                == ["Uid:", &uid, &uid, &uid, &uid]),
        "{status}"
    );
    let echo = echo(&mut cmd(
        "curl",
        &["-sk", "--http2", &format!("https://{addr}/api/all")],
    ));
    assert_eq!(echo["peer"]["ip"], "127.0.0.1");

    ok(&mut cmd("kill", &["-TERM", &child.id().to_string()]));
    let exit = child.wait().expect("wait");
    assert!(exit.success(), "{exit:?}: {}", read());
    // The packaged file's database, in the state folder, the user's.
    let db = Path::new("/var/lib/exitvoice/echo.db");
    assert_eq!(
        owner_and_mode(db.to_str().expect("path"))
            .split(' ')
            .take(2)
            .collect::<Vec<_>>(),
        ["exitvoice", "exitvoice"]
    );
    assert!(Path::new("/var/lib/exitvoice/echo.db.cert.pem").exists());
    assert_eq!(sqlite_count(db, "requests"), 1);
}
