//! `exitvoice serve --geoip`: `/api/all` and the fingerprint page show the visitor's country and
//! network from MaxMind DB files written at test time by an independent writer (PyPI's
//! `mmdb-writer`, `tests/tools/write_mmdb.py`), each expected value read back with `mmdblookup`
//! (Debian's `mmdb-bin`); a database replaced while the server runs is picked up without a
//! restart, and a file that does not read stops the start with its name.
//!
//! Run with `cargo test --test echo_geo`; needs curl, the test venv and mmdblookup
//! (scripts/install-test-deps.sh).

mod echo_support;
mod geo_support;

use std::process::Command;
use std::time::{Duration, Instant};

use echo_support::{curl, EchoServer};
use geo_support::{mmdblookup, root, write_mmdb};
use serde_json::Value;

/// `/api/all` as seen from the loopback address `from`.
fn echo_from(server: &EchoServer, from: &str) -> Value {
    let out = curl(&[
        "-sk",
        "--interface",
        from,
        &server.url("/api/all?token=geo"),
    ]);
    assert!(out.status.success(), "curl: {out:?}");
    serde_json::from_slice(&out.stdout).expect("echo JSON")
}

/// Waits until the country `/api/all` shows is `want`.
fn wait_for_country(server: &EchoServer, want: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let echo = echo_from(server, "127.0.0.1");
        if echo["geo"]["country"] == want {
            return echo;
        }
        assert!(
            Instant::now() < deadline,
            "still {} instead of {want}",
            echo["geo"]
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_echo_shows_the_visitors_place_and_follows_a_replaced_database() {
    let geo_dir = tempfile::tempdir().expect("tempdir");
    let country = geo_dir.path().join("GeoLite2-Country.mmdb");
    let asn = geo_dir.path().join("GeoLite2-ASN.mmdb");
    write_mmdb(
        &country,
        "maxmind-country",
        &["127.0.0.1/32=DE,0,-", "127.0.2.0/24=NL,0,-"],
    );
    write_mmdb(
        &asn,
        "maxmind-asn",
        &[
            "127.0.0.1/32=-,64500,Example Carrier GmbH",
            "127.0.2.0/24=-,64501,Polder Net",
        ],
    );
    let server = EchoServer::start(&[
        "--geoip",
        country.to_str().expect("UTF-8"),
        "--geoip",
        asn.to_str().expect("UTF-8"),
    ]);

    // Two visitors on two networks, each as the independent reader says.
    for from in ["127.0.0.1", "127.0.2.1"] {
        let echo = echo_from(&server, from);
        let geo = &echo["geo"];
        assert_eq!(
            geo["country"],
            mmdblookup(&country, from, &["country", "iso_code"])
        );
        assert_eq!(
            geo["asn"],
            mmdblookup(&asn, from, &["autonomous_system_number"])
        );
        assert_eq!(
            geo["organization"],
            mmdblookup(&asn, from, &["autonomous_system_organization"])
        );
        assert!(geo["country"].is_string(), "{from}: {geo}");
        let sources = geo["sources"].as_array().expect("sources");
        assert_eq!(sources.len(), 2, "{geo}");
        assert_eq!(sources[0]["file"], "GeoLite2-Country.mmdb");
        assert_eq!(sources[0]["database_type"], "GeoLite2-Country");
        assert_eq!(sources[1]["database_type"], "GeoLite2-ASN");
    }

    // Only the full echo carries it; nothing of it is stored.
    let clean = curl(&["-sk", &server.url("/api/clean")]);
    let clean: Value = serde_json::from_slice(&clean.stdout).expect("clean JSON");
    assert!(clean.get("geo").is_none(), "{clean}");
    let tls = curl(&["-sk", &server.url("/api/tls")]);
    let tls: Value = serde_json::from_slice(&tls.stdout).expect("tls JSON");
    assert!(tls.get("geo").is_none(), "{tls}");

    // The fingerprint page names the place and the databases.
    let page = curl(&["-sk", "-H", "Accept: text/html", &server.url("/")]);
    let page = String::from_utf8_lossy(&page.stdout);
    assert!(page.contains("Where you connect from"), "{page}");
    assert!(
        page.contains(">DE<") && page.contains(">AS64500<"),
        "{page}"
    );
    assert!(page.contains("(GeoLite2-Country, built "), "{page}");

    // Replaced by rename, as downloaders do: read again without a restart.
    let next = geo_dir.path().join("next.mmdb");
    write_mmdb(&next, "maxmind-country", &["127.0.0.0/8=AT,0,-"]);
    std::fs::rename(&next, &country).expect("rename");
    wait_for_country(&server, "AT");

    // Rewritten in place: a torn file is refused and counted, the last good contents stay.
    let whole_path = geo_dir.path().join("whole.mmdb");
    write_mmdb(&whole_path, "maxmind-country", &["127.0.0.0/8=CH,0,-"]);
    let whole = std::fs::read(&whole_path).expect("read");
    std::fs::write(&country, &whole[..whole.len() / 2]).expect("write in place");
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.healthz()["geoip"]["reload_failed"]
        .as_u64()
        .unwrap_or(0)
        == 0
    {
        assert!(Instant::now() < deadline, "no reload failure counted");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(echo_from(&server, "127.0.0.1")["geo"]["country"], "AT");
    std::fs::write(&country, &whole).expect("write in place");
    wait_for_country(&server, "CH");
    assert!(server.healthz()["geoip"]["reloaded"].as_u64() >= Some(2));
    assert!(
        server.stderr().contains("GeoLite2-Country.mmdb"),
        "the failure is logged with the file's name"
    );
}

/// Over HTTP/3 too (aioquic, an independent client): the full echo carries the same place.
#[test]
fn the_http3_echo_shows_the_place_too() {
    let geo_dir = tempfile::tempdir().expect("tempdir");
    let country = geo_dir.path().join("country.mmdb");
    write_mmdb(&country, "maxmind-country", &["127.0.0.0/8=FI,0,-"]);
    let server = EchoServer::start(&["--geoip", country.to_str().expect("UTF-8")]);
    let output = Command::new(root().join(".tools/venv/bin/python"))
        .arg(root().join("tests/clients/py_aioquic.py"))
        .args(["127.0.0.1", &server.port.to_string(), "localhost"])
        .arg(server.cert_pem())
        .args(["/api/all", "/api/clean"])
        .output()
        .expect("run py_aioquic.py");
    assert!(output.status.success(), "aioquic: {output:?}");
    let run: Value = serde_json::from_slice(&output.stdout).expect("aioquic JSON");
    let body = |path: &str| {
        run["answers"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["path"] == path))
            .map(|x| x["body"].clone())
            .unwrap_or_else(|| panic!("no answer for {path}: {run}"))
    };
    let all = body("/api/all");
    assert_eq!(all["alpn"]["spoken"], "h3", "{all}");
    assert_eq!(
        all["geo"]["country"],
        mmdblookup(&country, "127.0.0.1", &["country", "iso_code"])
    );
    assert_eq!(all["geo"]["sources"][0]["file"], "country.mmdb");
    assert!(body("/api/clean").get("geo").is_none());
}

#[test]
fn an_ipinfo_lite_database_answers_alone() {
    let geo_dir = tempfile::tempdir().expect("tempdir");
    let lite = geo_dir.path().join("ipinfo_lite.mmdb");
    write_mmdb(&lite, "ipinfo", &["127.0.0.0/8=NL,64502,Lite Networks BV"]);
    let server = EchoServer::start(&["--geoip", lite.to_str().expect("UTF-8")]);
    let geo = &echo_from(&server, "127.0.0.1")["geo"];
    assert_eq!(
        geo["country"],
        mmdblookup(&lite, "127.0.0.1", &["country_code"])
    );
    let asn = mmdblookup(&lite, "127.0.0.1", &["asn"]);
    assert_eq!(Value::from(format!("AS{}", geo["asn"])), asn, "{geo}");
    assert_eq!(
        geo["organization"],
        mmdblookup(&lite, "127.0.0.1", &["as_name"])
    );
}

#[test]
fn a_file_that_does_not_read_stops_the_start_with_its_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("good.mmdb");
    write_mmdb(&good, "maxmind-country", &["127.0.0.0/8=DE,0,-"]);
    let bytes = std::fs::read(&good).expect("read");
    let truncated = dir.path().join("truncated.mmdb");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).expect("write");
    let missing = dir.path().join("missing.mmdb");
    for bad in [&truncated, &missing] {
        let out = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
            .args(["serve", "--listen", "127.0.0.1:0", "--db"])
            .arg(dir.path().join("echo.db"))
            .arg("--geoip")
            .arg(&good)
            .arg("--geoip")
            .arg(bad)
            .output()
            .expect("run exitvoice serve");
        assert!(!out.status.success(), "{bad:?} must stop the start");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let name = bad.file_name().expect("name").to_string_lossy();
        assert!(stderr.contains(name.as_ref()), "{stderr}");
    }
}
