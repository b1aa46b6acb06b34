//! `exitvoice audit --once` on a terminal: a progress bar with the probes done, their rate and
//! the time left, and warnings (here: every probe refused) written on lines of their own, with
//! the bar drawn again below them. The terminal is a pseudo-terminal made by util-linux's
//! `script`, whose typescript is the bytes a terminal would have shown.

mod support;

use std::process::Command;

use support::EchoServer;

/// The typescript's segments as a terminal shows them line by line: split at each carriage
/// return and line feed, with the escape sequences (colours, line clears) taken out.
fn segments(typescript: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut chars = typescript.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ parameters, then one final byte in @..~.
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
        .split(['\r', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn warnings_get_lines_of_their_own_under_the_progress_bar() {
    let echo = EchoServer::start();
    let work = tempfile::tempdir().expect("tempdir");
    // Three exits nobody listens on: every probe is refused and warned about.
    let exits = work.path().join("exits.txt");
    std::fs::write(
        &exits,
        "http://127.0.0.1:1\nhttp://127.0.0.1:2\nhttp://127.0.0.1:3\n",
    )
    .expect("exits");
    let command = format!(
        "{} audit --once --exits {} --db {} --samples 3 --spacing 300ms --no-quic \
         --echo-url https://localhost:{} --echo-pin {}",
        env!("CARGO_BIN_EXE_exitvoice"),
        exits.display(),
        work.path().join("audit.db").display(),
        echo.port,
        echo.pin,
    );
    let out = Command::new("script")
        .args(["--quiet", "--return", "--command", &command, "/dev/null"])
        .env("TERM", "xterm")
        .env_remove("RUST_LOG")
        .output()
        .expect("script (util-linux)");
    assert!(out.status.success(), "{out:?}");
    let shown = segments(&String::from_utf8_lossy(&out.stdout));

    let warnings: Vec<&String> = shown
        .iter()
        .filter(|s| s.contains("probe failed"))
        .collect();
    assert!(
        warnings.len() >= 9,
        "every refused probe is warned about: {shown:#?}"
    );
    for warning in &warnings {
        assert!(
            warning.starts_with("20") && warning.contains(" WARN "),
            "a warning starts its own line with its time: {warning:?}"
        );
    }
    let bars: Vec<&String> = shown.iter().filter(|s| s.starts_with("probes ")).collect();
    assert!(
        bars.iter()
            .any(|bar| bar.contains("/s,") && bar.ends_with("left")),
        "the bar shows the rate and the time left: {bars:#?}"
    );
    // The baseline and 3 samples of each of the 3 exits.
    assert!(
        shown.iter().any(|s| s.starts_with("probes done: 10 in ")),
        "{shown:#?}"
    );
    let head = shown
        .iter()
        .position(|s| s.starts_with("exit ") && s.contains("state"))
        .expect("the summary table's head on a line of its own");
    assert_eq!(
        shown[head + 1..]
            .iter()
            .filter(|s| s.starts_with("http://127.0.0.1:"))
            .count(),
        3,
        "{shown:#?}"
    );
}
