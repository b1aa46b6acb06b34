//! The labels JSON Schema (`schema/json/labels.schema.json`) accepts what `exitvoice audit`
//! writes and rejects what the contract forbids: unknown fields, another version, a password in
//! a URL.

mod support;

use support::{audit, exits_file, labels_schema, EchoServer};

fn errors(labels: &serde_json::Value) -> Vec<String> {
    let validator = jsonschema::draft202012::new(&labels_schema()).unwrap();
    validator
        .iter_errors(labels)
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn the_schema_holds_the_contract() {
    let echo = EchoServer::start();
    let (_closed, port) = support::closed_port();
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[("closed", format!("http://u:pw@127.0.0.1:{port}"))],
    );
    // `audit` validates the document it reads back.
    let run = audit(&exits, &work.path().join("audit.db"), &["--samples", "1"]);
    let label = run.exit("closed");
    assert_eq!(label["route"], "quarantine");
    assert_eq!(label["url"], format!("http://u:***@127.0.0.1:{port}"));

    // A dead exit has no coherence: its family pair is `none`.
    assert_eq!(
        run.labels["pool"]["by_family"],
        serde_json::json!({"none": 1})
    );
    let mut odd_family = run.labels.clone();
    odd_family["pool"]["by_family"] = serde_json::json!({"Chrome 131": 1});
    assert!(
        !errors(&odd_family).is_empty(),
        "a family pair is `tls+http`"
    );
    let mut unknown = run.labels.clone();
    unknown["exits"][0]["undocumented"] = serde_json::json!(1);
    assert!(!errors(&unknown).is_empty(), "an unknown field is refused");
    let mut old = run.labels.clone();
    old["schema_version"] = serde_json::json!(1);
    assert!(!errors(&old).is_empty(), "version 1 is another contract");
    let mut leaked = run.labels.clone();
    leaked["exits"][0]["url"] = serde_json::json!(format!("http://u:pw@127.0.0.1:{port}"));
    assert!(
        !errors(&leaked).is_empty(),
        "a password in a URL is refused"
    );
    let mut reasonless = run.labels.clone();
    reasonless["exits"][0]["route_reasons"] = serde_json::json!([]);
    assert!(
        !errors(&reasonless).is_empty(),
        "a route has at least one reason"
    );
}
