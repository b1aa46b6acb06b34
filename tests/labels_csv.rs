//! `exitvoice labels --format csv`, read back by Python's `csv` module (an independent RFC 4180
//! reader): one row per exit, cells as the snapshot has them, and a name a spreadsheet would run
//! as a formula kept as text.

use std::process::{Command, Stdio};

use exitvoice_schema::LabelsDoc;
use exitvoice_store::Store;
use serde_json::{json, Value};

const FORMULA: &str = "=HYPERLINK(\"http://x\",\"click\")";

fn snapshot() -> LabelsDoc {
    let flags = json!({"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false,
                       "remuxed": false, "not_proxied": false, "tls_reoriginated": false});
    serde_json::from_value(json!({
        "schema_version": 2, "generated_at": "2026-12-02T10:00:00Z", "persona": "rustls/chrome",
        "baseline": null,
        "exits": [
            {
                "name": FORMULA, "url": "http://user:***@127.0.0.1:3128", "tags": {},
                "egress_ips": ["203.0.113.7", "203.0.113.9"], "state": "alternating",
                "changed_at": null, "bucket": "C", "voices": [], "route": "quarantine",
                "route_reason": "remuxed",
                "route_reasons": ["remuxed", "says \"h2\", speaks http/1.1"],
                "samples": 3, "errors": {"timeout": 1}, "history": [],
                "latency": {"p50_ms": 120, "p95_ms": 480, "round_trip": {
                    "samples": 3, "gap_min_us": 81_200, "gap_p50_us": 83_000,
                    "tcp_rtt_min_us": 40, "tcp_rtt_p50_us": 52, "app_rtt_min_us": 81_240,
                    "app_rtt_p50_us": 83_050, "baseline_gap_us": 900, "excess_gap_us": 80_300,
                    "verdict": "likely", "reason": "r", "previous_run_gap_min_us": 20_000,
                    "moved": true}},
                "last_probe_at": "2026-12-02T09:59:00Z", "flags": flags,
                "geo": {"newest": {"country": "DE", "asn": 64500, "organization": "-Carrier, GmbH"},
                        "countries": ["DE"], "asns": [64500]},
            },
            {
                "name": "plain, with a comma", "url": "socks5h://127.0.0.1:1080", "tags": {},
                "egress_ips": [], "state": "stable", "changed_at": null, "bucket": null,
                "voices": [], "route": "identity", "route_reason": "", "samples": 0,
                "errors": {}, "history": [], "latency": {"p50_ms": null, "p95_ms": null},
                "last_probe_at": null, "flags": flags,
            },
        ],
    }))
    .unwrap()
}

#[tokio::test]
async fn the_csv_reads_back_as_the_snapshot_with_formulas_made_text() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("labels.db");
    let store = Store::open(&db).await.unwrap();
    store.insert_labels(&snapshot()).await.unwrap();
    store.close().await;

    let out = dir.path().join("exits.csv");
    let status = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .args(["labels", "--format", "csv", "--db"])
        .arg(&db)
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let read = Command::new("python3")
        .args([
            "-c",
            "import csv, json, sys; print(json.dumps(list(csv.DictReader(open(sys.argv[1], newline='')))))",
        ])
        .arg(&out)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(read.status.success());
    let rows: Vec<Value> = serde_json::from_slice(&read.stdout).unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.starts_with(
            "name,url,route,reasons,state,bucket,egress,country,asn,organization,success_rate,"
        ) && text.ends_with("\r\n"),
        "RFC 4180: a header, CRLF line ends: {text:?}"
    );
    assert_eq!(rows.len(), 2, "{rows:?}");
    let first = &rows[0];
    assert_eq!(first["name"], format!("'{FORMULA}"), "a formula stays text");
    assert_eq!(first["url"], "http://user:***@127.0.0.1:3128");
    assert_eq!(first["route"], "quarantine");
    assert_eq!(first["reasons"], "remuxed; says \"h2\", speaks http/1.1");
    assert_eq!(first["state"], "alternating");
    assert_eq!(first["bucket"], "C");
    assert_eq!(first["egress"], "203.0.113.7 203.0.113.9");
    assert_eq!(
        (&first["country"], &first["asn"]),
        (&json!("DE"), &json!("64500"))
    );
    assert_eq!(
        first["organization"], "'-Carrier, GmbH",
        "a formula stays text"
    );
    assert_eq!(first["success_rate"], "0.750", "3 samples of 4 attempts");
    assert_eq!(
        (&first["latency_p50_ms"], &first["latency_p95_ms"]),
        (&json!("120"), &json!("480"))
    );
    assert_eq!(
        (
            &first["gap_min_us"],
            &first["excess_gap_us"],
            &first["gap_verdict"],
            &first["gap_moved"]
        ),
        (
            &json!("81200"),
            &json!("80300"),
            &json!("likely"),
            &json!("true")
        )
    );
    assert_eq!(first["last_probe_at"], "2026-12-02T09:59:00Z");
    let second = &rows[1];
    assert_eq!(second["name"], "plain, with a comma");
    assert_eq!(
        (
            &second["bucket"],
            &second["success_rate"],
            &second["latency_p50_ms"],
            &second["country"],
            &second["gap_min_us"],
            &second["gap_verdict"]
        ),
        (
            &json!(""),
            &json!(""),
            &json!(""),
            &json!(""),
            &json!(""),
            &json!("")
        ),
        "nothing known is an empty cell"
    );

    // On stdout too, byte for byte.
    let printed = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .args(["labels", "--format", "csv", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(printed.status.success());
    assert_eq!(printed.stdout, std::fs::read(&out).unwrap());
}
