//! Headless Chromium (Debian package `chromium`, installed by `scripts/test.sh`) as the tests'
//! browser: the DOM after load (`--dump-dom`), screenshots, and the page's console messages
//! (`--enable-logging=stderr` writes each as an `INFO:CONSOLE` line). Each run gets a fresh
//! profile directory.

use std::path::Path;
use std::process::Command;

/// What one page load left.
pub struct Load {
    /// The serialized DOM after the load event (scripts have run).
    pub dom: String,
    /// The page's console messages (errors, warnings and logs alike).
    pub console: Vec<String>,
}

/// Every flag a test run needs: headless, no sandbox (root), nothing fetched in the background,
/// the echo's self-signed certificate accepted, TCP only (the pages are not about QUIC).
fn chromium(profile: &Path) -> Command {
    with_flags(Command::new("chromium"), profile)
}

/// `command` (a Chromium to run) with the flags of [`chromium`].
fn with_flags(mut command: Command, profile: &Path) -> Command {
    command.args(exitvoice_auditor::probe::chromium::HEADLESS_FLAGS);
    command.args([
        "--disable-quic",
        "--ignore-certificate-errors",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ]);
    command.arg(format!("--user-data-dir={}", profile.display()));
    command
}

/// The console lines of Chromium's log.
fn console(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|line| line.contains(":CONSOLE"))
        .map(str::to_owned)
        .collect()
}

/// Loads `url` and returns its DOM and console messages.
pub fn load(url: &str) -> Load {
    load_with(Command::new("chromium"), url)
}

/// Loads `url` with Chromium run in network namespace `ns` (`support::netns`).
pub fn load_in(ns: &str, url: &str) -> Load {
    load_with(super::netns::in_ns(ns, "chromium"), url)
}

/// Loads `url` with `command` (a Chromium to run).
fn load_with(command: Command, url: &str) -> Load {
    let profile = tempfile::tempdir().expect("profile dir");
    let output = with_flags(command, profile.path())
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("run chromium (scripts/test.sh installs it)");
    assert!(output.status.success(), "chromium --dump-dom {url} failed");
    Load {
        dom: String::from_utf8_lossy(&output.stdout).into_owned(),
        console: console(&output.stderr),
    }
}

/// Screenshots `url` in a `width` × `height` window into `path` (PNG); returns the console
/// messages of that load.
pub fn screenshot(url: &str, width: u32, height: u32, path: &Path) -> Vec<String> {
    let profile = tempfile::tempdir().expect("profile dir");
    let output = chromium(profile.path())
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", path.display()))
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        output.status.success(),
        "chromium --screenshot {url} failed"
    );
    console(&output.stderr)
}

/// Asserts `path` is a PNG of `width` × `height` with more than a blank page's bytes.
pub fn assert_screenshot(path: &Path, width: u32, height: u32) {
    let png = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{}: not a PNG",
        path.display()
    );
    // IHDR is the first chunk: width and height, big-endian, at bytes 16..24.
    let dimension = |at: usize| {
        let bytes: [u8; 4] = png
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .expect("IHDR");
        u32::from_be_bytes(bytes)
    };
    assert_eq!(
        (dimension(16), dimension(20)),
        (width, height),
        "{}",
        path.display()
    );
    // A blank page of this size compresses to a few kilobytes; text and tables take far more.
    assert!(
        png.len() > 20_000,
        "{}: {} bytes, the page looks empty",
        path.display(),
        png.len()
    );
}

/// The text of the element with `id` (up to its first child tag), HTML entities decoded.
pub fn text_by_id(dom: &str, id: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let start = at + dom.get(at..)?.find('>')? + 1;
    let rest = dom.get(start..)?;
    let end = rest.find('<')?;
    Some(unescape(rest.get(..end)?))
}

/// Decodes the entities an HTML serializer writes in text.
pub fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}
