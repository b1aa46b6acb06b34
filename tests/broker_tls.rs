//! The broker over TLS (`--tls`: a self-signed pair made on first start beside the database), a
//! lease taken with `exitvoice lease --broker-ca`, and the rule that a non-loopback address
//! needs both TLS and a token.

mod support;

use std::process::Command;

use support::broker::Broker;

const TOKEN: &str = "tls-test-token-0123456789";

fn exits(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("exits.toml");
    std::fs::write(
        &path,
        "[[exits]]\nname = \"a\"\nurl = \"http://u:p@127.0.0.1:9\"\n",
    )
    .unwrap();
    path
}

#[test]
fn a_lease_over_tls_checked_against_the_brokers_own_certificate() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("broker.db");
    let broker = Broker::start(
        &exits(work.path()),
        &db.to_string_lossy(),
        TOKEN,
        &["--tls"],
    );
    assert!(
        broker.url.starts_with("https://127.0.0.1:"),
        "{}",
        broker.url
    );
    let ca = work.path().join("broker.db.cert.pem");
    assert!(
        ca.exists(),
        "the self-signed certificate is kept beside the database"
    );
    let renew = |ca: Option<&std::path::Path>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_exitvoice"));
        command.args(["lease", "--broker", &broker.url]);
        if let Some(ca) = ca {
            command.arg("--broker-ca").arg(ca);
        }
        command.args(["renew", "nope", "--fence", "1"]);
        command
            .env("EXITVOICE_BROKER_TOKEN", TOKEN)
            .output()
            .unwrap()
    };
    // The broker answered over TLS: an unknown lease is its 404 (exit 4), not a TLS failure.
    let output = renew(Some(&ca));
    assert_eq!(
        output.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("unknown_lease"));
    // Without the certificate to check it against, nothing is sent.
    let output = renew(None);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--broker-ca"));
    // A certificate the broker's chain does not lead to is refused.
    let other = work.path().join("other.pem");
    let pair = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    std::fs::write(&other, pair.cert.pem()).unwrap();
    let output = renew(Some(&other));
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("TLS to the broker"));
}

#[test]
fn a_non_loopback_address_needs_tls_and_a_token() {
    let work = tempfile::tempdir().unwrap();
    let exits = exits(work.path());
    for extra in [&[][..], &["--tls"][..]] {
        let output = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
            .args(["broker", "--listen", "0.0.0.0:0", "--database"])
            .arg(work.path().join("broker.db"))
            .arg("--exits")
            .arg(&exits)
            .args(extra)
            .env_remove("EXITVOICE_BROKER_TOKEN")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{extra:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("needs TLS") && stderr.contains("--broker-token"),
            "{stderr}"
        );
    }
}
