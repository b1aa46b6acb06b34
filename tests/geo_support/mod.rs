//! Shared by the geo tests: MaxMind DB files written at test time by an independent writer
//! (PyPI's `mmdb-writer`, `tests/tools/write_mmdb.py`) and read back by another independent
//! reader, `mmdblookup` (Debian's `mmdb-bin`); both installed by `scripts/install-test-deps.sh`.
#![allow(dead_code)] // Each test file uses its own part of this module.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The repository's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Writes `out` in `layout` (`maxmind-country`, `maxmind-asn`, `ipinfo`) with `entries`
/// (`NETWORK=COUNTRY,ASN,ORGANIZATION`).
pub fn write_mmdb(out: &Path, layout: &str, entries: &[&str]) {
    let status = Command::new(root().join(".tools/venv/bin/python"))
        .arg(root().join("tests/tools/write_mmdb.py"))
        .arg(out)
        .arg(layout)
        .args(entries)
        .status()
        .expect("the test venv's python (scripts/install-test-deps.sh)");
    assert!(status.success(), "write_mmdb.py {layout}");
}

/// `mmdblookup`'s value at `path` (e.g. `country iso_code`) for `ip`, as JSON: a string
/// (`"Example Carrier" <utf8_string>`), a number for an unsigned integer (`64500 <uint32>`),
/// `null` when it finds none.
pub fn mmdblookup(file: &Path, ip: &str, path: &[&str]) -> Value {
    mmdblookup_typed(file, ip, path).0
}

/// [`mmdblookup`] with the type `mmdblookup` names (`uint16`, `utf8_string`, …; empty when it
/// finds none).
pub fn mmdblookup_typed(file: &Path, ip: &str, path: &[&str]) -> (Value, String) {
    let out = Command::new("mmdblookup")
        .arg("--file")
        .arg(file)
        .args(["--ip", ip])
        .args(path)
        .output()
        .expect("mmdblookup (apt mmdb-bin)");
    let text = String::from_utf8_lossy(&out.stdout);
    let Some((value, kind)) = text.trim().rsplit_once(" <") else {
        return (Value::Null, String::new());
    };
    let kind = kind.trim_end_matches('>').to_owned();
    if kind.starts_with("uint") {
        (Value::from(value.parse::<u64>().expect("a number")), kind)
    } else {
        (Value::from(value.trim_matches('"')), kind)
    }
}
