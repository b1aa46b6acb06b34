//! `exitvoice audit --geoip`. Test exits of our own leave from distinct loopback
//! addresses (127.0.0.x); MaxMind DB files written at test time place each address in a country
//! and a network (`geo_support`: an independent writer, every expected value read back with
//! `mmdblookup`). An exit whose `country` the samples do not match gets `geo_mismatch`; a rotating
//! exit over two countries gets `geo_changed`; the pool is counted by country and network; the
//! CSV carries them.

mod geo_support;
mod support;

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;

use geo_support::{mmdblookup, write_mmdb};
use serde_json::{json, Value};
use support::bound_exit::BoundExit;
use support::{audit, EchoServer};

fn ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, last)
}

/// An exits file: the echo, then each exit as `(name, port, extra TOML lines)`.
fn exits_file(dir: &Path, echo: &EchoServer, exits: &[(&str, u16, &str)]) -> std::path::PathBuf {
    let mut text = format!(
        "[echo]\nurl = \"https://localhost:{}\"\nspki_sha256 = \"{}\"\n",
        echo.port, echo.pin
    );
    for (name, port, extra) in exits {
        text.push_str(&format!(
            "\n[[exits]]\nname = \"{name}\"\nurl = \"http://127.0.0.1:{port}\"\n{extra}"
        ));
    }
    let path = dir.join("exits.toml");
    std::fs::write(&path, text).expect("write exits file");
    path
}

#[test]
fn geo_mismatch_geo_changed_and_the_pool_by_country() {
    let work = tempfile::tempdir().unwrap();
    let country = work.path().join("GeoLite2-Country.mmdb");
    let asn = work.path().join("GeoLite2-ASN.mmdb");
    write_mmdb(
        &country,
        "maxmind-country",
        &[
            "127.0.0.1/32=NL,0,-",
            "127.0.0.2/32=DE,0,-",
            "127.0.0.3/32=FR,0,-",
        ],
    );
    write_mmdb(
        &asn,
        "maxmind-asn",
        &[
            "127.0.0.1/32=-,64500,Auditor Net",
            "127.0.0.2/32=-,64501,Berlin Carrier",
            "127.0.0.3/32=-,64502,Paris Carrier",
        ],
    );
    let echo = EchoServer::start();
    let berlin = BoundExit::start(&[ip(2)]);
    let paris = BoundExit::start(&[ip(3)]);
    let rotating = BoundExit::start(&[ip(2), ip(3)]);
    let exits = exits_file(
        work.path(),
        &echo,
        &[
            ("berlin", berlin.port, "country = \"de\"\nasn = 64501\n"),
            ("said-de", paris.port, "country = \"DE\"\n"),
            ("rotating", rotating.port, "rotate = true\n"),
        ],
    );
    let db = work.path().join("audit.db");
    let run = audit(
        &exits,
        &db,
        &[
            "--samples",
            "4",
            "--no-quic",
            "--geoip",
            country.to_str().unwrap(),
            "--geoip",
            asn.to_str().unwrap(),
        ],
    );
    let place = |address: &str| {
        (
            mmdblookup(&country, address, &["country", "iso_code"]),
            mmdblookup(&asn, address, &["autonomous_system_number"]),
        )
    };
    let (de, de_asn) = place("127.0.0.2");
    let (fr, fr_asn) = place("127.0.0.3");
    assert!(de.is_string() && fr.is_string(), "mmdblookup found them");

    let home = run.exit("berlin");
    assert_eq!(home["geo"]["countries"], json!([de]), "{home}");
    assert_eq!(home["geo"]["asns"], json!([de_asn]), "{home}");
    assert_eq!(
        home["geo"]["newest"]["organization"],
        mmdblookup(&asn, "127.0.0.2", &["autonomous_system_organization"])
    );
    assert_eq!(home["flags"]["geo_changed"], false, "{home}");
    assert!(
        !home["route_reasons"].to_string().contains("geo_mismatch"),
        "{home}"
    );

    let away = run.exit("said-de");
    assert_eq!(away["geo"]["countries"], json!([fr]), "{away}");
    assert_eq!(away["route"], "quarantine", "{away}");
    assert!(
        away["route_reasons"]
            .as_array()
            .unwrap()
            .contains(&json!("geo_mismatch")),
        "{away}"
    );

    let both = run.exit("rotating");
    assert_eq!(both["flags"]["geo_changed"], true, "{both}");
    let countries = both["geo"]["countries"].as_array().unwrap();
    assert!(countries.contains(&de) && countries.contains(&fr), "{both}");

    // The pool by the newest sample's country and network.
    let pool = &run.labels["pool"];
    let by_country: u64 = pool["by_country"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(by_country, 3, "{pool}");
    assert!(
        pool["by_country"][fr.as_str().unwrap()].as_u64() >= Some(1),
        "{pool}"
    );
    assert!(
        pool["by_asn"][format!("AS{fr_asn}")].as_u64() >= Some(1),
        "{pool}"
    );
    let share = pool["largest_asn_share"].as_f64().unwrap();
    assert!((0.5..=1.0).contains(&share), "{pool}");
    assert_eq!(
        pool["geo_sources"][0]["file"], "GeoLite2-Country.mmdb",
        "{pool}"
    );
    assert_eq!(
        pool["geo_sources"][1]["database_type"], "GeoLite2-ASN",
        "{pool}"
    );

    // The CSV carries the newest place, read back by Python's csv module.
    let csv = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .args(["labels", "--format", "csv", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(csv.status.success());
    let read = Command::new("python3")
        .args([
            "-c",
            "import csv, io, json, sys; print(json.dumps(list(csv.DictReader(io.StringIO(sys.stdin.read())))))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(&csv.stdout)?;
            child.wait_with_output()
        })
        .unwrap();
    let rows: Vec<Value> = serde_json::from_slice(&read.stdout).unwrap();
    let row = rows.iter().find(|r| r["name"] == "berlin").unwrap();
    assert_eq!(row["country"], de, "{row}");
    assert_eq!(row["asn"], de_asn.to_string(), "{row}");
    assert_eq!(row["organization"], "Berlin Carrier", "{row}");
}

/// `exitvoice labels` and `exitvoice dashboard` with `--geoip`: exits audited without geo
/// databases are placed by their egress addresses when shown (an IPinfo Lite file here), the
/// pool counted by country and the database named; the stored labels stay as they were.
#[test]
fn labels_and_the_dashboard_place_exits_audited_without_geo() {
    let work = tempfile::tempdir().unwrap();
    let geo = work.path().join("ipinfo_lite.mmdb");
    write_mmdb(
        &geo,
        "ipinfo",
        &[
            "127.0.0.2/32=DE,64501,Berlin Carrier",
            "127.0.0.3/32=FR,64502,Paris Carrier",
        ],
    );
    let echo = EchoServer::start();
    let berlin = BoundExit::start(&[ip(2)]);
    let paris = BoundExit::start(&[ip(3)]);
    let exits = exits_file(
        work.path(),
        &echo,
        &[("berlin", berlin.port, ""), ("paris", paris.port, "")],
    );
    let db = work.path().join("audit.db");
    let run = audit(&exits, &db, &["--samples", "2", "--no-quic"]);
    assert_eq!(
        run.exit("berlin")["geo"],
        Value::Null,
        "audited without --geoip"
    );

    let labels = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_exitvoice"))
            .args(["labels", "--db"])
            .arg(&db)
            .args(extra)
            .output()
            .unwrap()
    };
    let placed = labels(&["--geoip", geo.to_str().unwrap()]);
    assert!(placed.status.success(), "{placed:?}");
    let doc: Value = serde_json::from_slice(&placed.stdout).unwrap();
    let exit = |doc: &Value, name: &str| support::exit_label(doc, name).clone();
    for (name, address) in [("berlin", "127.0.0.2"), ("paris", "127.0.0.3")] {
        let label = exit(&doc, name);
        let country = mmdblookup(&geo, address, &["country_code"]);
        assert_eq!(label["geo"]["countries"], json!([country]), "{label}");
        assert_eq!(
            label["geo"]["newest"]["organization"],
            mmdblookup(&geo, address, &["as_name"]),
            "{label}"
        );
        assert_eq!(doc["pool"]["by_country"][country.as_str().unwrap()], 1);
    }
    assert_eq!(doc["pool"]["geo_sources"][0]["file"], "ipinfo_lite.mmdb");
    // Without the flag the snapshot is printed as stored.
    let stored: Value = serde_json::from_slice(&labels(&[]).stdout).unwrap();
    assert_eq!(exit(&stored, "berlin")["geo"], Value::Null);
    // A file that is not there stops the command, named.
    let missing = work.path().join("nowhere.mmdb");
    let failed = labels(&["--geoip", missing.to_str().unwrap()]);
    assert!(!failed.status.success());
    assert!(
        String::from_utf8_lossy(&failed.stderr).contains("nowhere.mmdb"),
        "{failed:?}"
    );

    // The dashboard's export, likewise.
    let token = "geo-dashboard-token-0123456789";
    let mut dashboard = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .args(["dashboard", "--listen", "127.0.0.1:0", "--database"])
        .arg(&db)
        .arg("--geoip")
        .arg(&geo)
        .env("EXITVOICE_DASHBOARD_TOKEN", token)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let line = {
        use std::io::BufRead as _;
        std::io::BufReader::new(dashboard.stdout.take().unwrap())
            .lines()
            .map_while(Result::ok)
            .find(|line| line.contains("listening on"))
            .expect("the dashboard printed its address")
    };
    let url = line
        .split("listening on ")
        .nth(1)
        .unwrap()
        .trim()
        .to_owned();
    let export = Command::new("curl")
        .args(["-sf", "-H", &format!("Authorization: Bearer {token}")])
        .arg(format!("{url}.json"))
        .output()
        .unwrap();
    let _ = dashboard.kill();
    let _ = dashboard.wait();
    assert!(export.status.success(), "{export:?}");
    let shown: Value = serde_json::from_slice(&export.stdout).unwrap();
    assert_eq!(
        exit(&shown, "paris")["geo"]["countries"],
        json!([mmdblookup(&geo, "127.0.0.3", &["country_code"])])
    );
    assert_eq!(shown["pool"]["geo_sources"][0]["file"], "ipinfo_lite.mmdb");
}
