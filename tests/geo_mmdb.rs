//! `exitvoice-geo`'s `GeoIp` on MaxMind DB files in the layouts people download, written at
//! test time by an independent writer and every expected value read back with `mmdblookup`
//! (`geo_support`).

mod geo_support;

use std::net::IpAddr;
use std::path::Path;

use exitvoice_geo::{GeoError, GeoIp, Refreshed};
use exitvoice_schema::Place;
use geo_support::{mmdblookup, mmdblookup_typed, write_mmdb};

/// [`geo_support::mmdblookup`] as the text a [`Place`] holds.
fn lookup_text(file: &Path, ip: &str, path: &[&str]) -> Option<String> {
    match mmdblookup(file, ip, path) {
        serde_json::Value::String(text) => Some(text),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn ip(text: &str) -> IpAddr {
    text.parse().expect("address")
}

#[test]
fn maxmind_layout_country_and_asn_files_answer_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let country = dir.path().join("GeoLite2-Country.mmdb");
    let asn = dir.path().join("GeoLite2-ASN.mmdb");
    write_mmdb(
        &country,
        "maxmind-country",
        &["127.0.0.0/8=DE,0,-", "::1/128=FR,0,-"],
    );
    write_mmdb(
        &asn,
        "maxmind-asn",
        &[
            "127.0.0.0/8=-,64500,Example Carrier",
            "::1/128=-,64501,Other Net",
        ],
    );
    let geo = GeoIp::open(&[country.clone(), asn.clone()]).expect("open");
    for address in ["127.0.0.1", "127.3.4.5", "::1"] {
        let expected = Place {
            country: lookup_text(&country, address, &["country", "iso_code"]),
            asn: lookup_text(&asn, address, &["autonomous_system_number"])
                .map(|n| n.parse().expect("a number")),
            organization: lookup_text(&asn, address, &["autonomous_system_organization"]),
        };
        assert!(expected.country.is_some(), "mmdblookup found {address}");
        assert_eq!(geo.place(ip(address)), expected, "{address}");
    }
    let sources = geo.sources();
    assert_eq!(sources[0].file, "GeoLite2-Country.mmdb");
    assert_eq!(sources[0].database_type, "GeoLite2-Country");
    assert_eq!(sources[1].database_type, "GeoLite2-ASN");
    assert_eq!(sources[0].build_date.len(), 10, "{:?}", sources[0]);
    assert_eq!(
        geo.place(ip("192.0.2.1")),
        Place::default(),
        "not in either"
    );
    assert_eq!(geo.lookup_errors(), 0);
}

#[test]
fn an_ipinfo_lite_file_carries_country_and_network() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("ipinfo_lite.mmdb");
    write_mmdb(&file, "ipinfo", &["127.0.0.0/8=NL,64502,Lite Networks BV"]);
    let geo = GeoIp::open(std::slice::from_ref(&file)).expect("open");
    let place = geo.place(ip("127.0.0.1"));
    assert_eq!(
        place.country,
        lookup_text(&file, "127.0.0.1", &["country_code"])
    );
    let asn = lookup_text(&file, "127.0.0.1", &["asn"]).expect("asn");
    assert_eq!(place.asn.map(|n| format!("AS{n}")), Some(asn));
    assert_eq!(place.organization.as_deref(), Some("Lite Networks BV"));
}

#[test]
fn a_missing_truncated_or_foreign_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.mmdb");
    let error = GeoIp::open(std::slice::from_ref(&missing)).expect_err("missing");
    assert!(matches!(error, GeoError::Read { .. }), "{error}");
    assert!(error.to_string().contains("missing.mmdb"), "{error}");

    let good = dir.path().join("good.mmdb");
    write_mmdb(&good, "maxmind-country", &["127.0.0.0/8=DE,0,-"]);
    let bytes = std::fs::read(&good).expect("read");
    let truncated = dir.path().join("truncated.mmdb");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).expect("write");
    let foreign = dir.path().join("labels.json");
    std::fs::write(&foreign, b"{\"not\": \"a database\"}").expect("write");
    for file in [truncated, foreign] {
        let error = GeoIp::open(&[good.clone(), file.clone()]).expect_err("bad file");
        assert!(matches!(error, GeoError::Format { .. }), "{error}");
        let name = file.file_name().expect("name").to_string_lossy();
        assert!(error.to_string().contains(name.as_ref()), "{error}");
    }
}

#[test]
fn a_database_replaced_by_rename_or_in_place_is_read_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("country.mmdb");
    write_mmdb(&file, "maxmind-country", &["127.0.0.0/8=DE,0,-"]);
    let geo = GeoIp::open(std::slice::from_ref(&file)).expect("open");
    assert!(geo.refresh().is_empty(), "nothing changed");
    let country = || geo.place(ip("127.0.0.1")).country;
    assert_eq!(country().as_deref(), Some("DE"));

    // Replaced by rename, as downloaders do.
    let next = dir.path().join("country.mmdb.new");
    write_mmdb(&next, "maxmind-country", &["127.0.0.0/8=AT,0,-"]);
    std::fs::rename(&next, &file).expect("rename");
    let outcomes = geo.refresh();
    assert!(
        matches!(outcomes.as_slice(), [Refreshed::Reloaded(_)]),
        "{outcomes:?}"
    );
    assert_eq!(
        country(),
        lookup_text(&file, "127.0.0.1", &["country", "iso_code"])
    );
    assert_eq!(country().as_deref(), Some("AT"));

    // Rewritten in place (same inode), first with a torn file, then whole.
    let torn = dir.path().join("torn.mmdb");
    write_mmdb(
        &torn,
        "maxmind-country",
        &["127.0.0.0/8=CH,0,-", "10.0.0.0/8=CH,0,-"],
    );
    let whole = std::fs::read(&torn).expect("read");
    std::fs::write(&file, &whole[..whole.len() / 3]).expect("write in place");
    let outcomes = geo.refresh();
    assert!(
        matches!(
            outcomes.as_slice(),
            [Refreshed::Failed(GeoError::Format { .. })]
        ),
        "{outcomes:?}"
    );
    assert_eq!(
        country().as_deref(),
        Some("AT"),
        "the last good contents stay"
    );
    assert!(
        geo.refresh().is_empty(),
        "a failed file is not read again unchanged"
    );
    std::fs::write(&file, &whole).expect("write in place");
    let outcomes = geo.refresh();
    assert!(
        matches!(outcomes.as_slice(), [Refreshed::Reloaded(_)]),
        "{outcomes:?}"
    );
    assert_eq!(country().as_deref(), Some("CH"));
}

/// PyPI's `mmdb-writer` stores a plain number in the narrowest unsigned type that holds it
/// (`uint16` below 65,536), as other writers may: every width `mmdblookup` reads must read here.
#[test]
fn an_asn_of_any_unsigned_width_reads_as_mmdblookup_reads_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let asn = dir.path().join("GeoLite2-ASN.mmdb");
    write_mmdb(
        &asn,
        "maxmind-asn-any-width",
        &[
            "127.0.0.0/8=-,64500,Narrow Net",
            "10.0.0.0/8=-,4200000000,Wide Net",
        ],
    );
    let geo = GeoIp::open(std::slice::from_ref(&asn)).expect("open");
    let mut widths = Vec::new();
    for address in ["127.0.0.1", "10.1.2.3"] {
        let (number, width) = mmdblookup_typed(&asn, address, &["autonomous_system_number"]);
        widths.push(width);
        let expected = Place {
            country: None,
            asn: number.as_u64().map(|n| u32::try_from(n).expect("32 bits")),
            organization: lookup_text(&asn, address, &["autonomous_system_organization"]),
        };
        assert!(expected.asn.is_some(), "mmdblookup found {address}");
        assert_eq!(geo.place(ip(address)), expected, "{address}");
    }
    assert_eq!(
        widths,
        ["uint16", "uint32"],
        "the widths this test is about"
    );
    assert_eq!(geo.lookup_errors(), 0);
}

/// A record that does not read (here the network's number written as text) is unknown, counted
/// each time, and logged once per database, naming the file.
#[test]
fn an_unreadable_record_is_logged_once_per_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let asn = dir.path().join("broken-asn.mmdb");
    write_mmdb(&asn, "maxmind-asn-text", &["127.0.0.0/8=-,64500,Text Net"]);
    let (_, kind) = mmdblookup_typed(&asn, "127.0.0.1", &["autonomous_system_number"]);
    assert_eq!(kind, "utf8_string", "the record this test is about");
    let country = dir.path().join("country.mmdb");
    write_mmdb(&country, "maxmind-country", &["127.0.0.0/8=DE,0,-"]);

    let log = Log::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_ansi(false)
        .finish();
    let geo = GeoIp::open(&[country.clone(), asn.clone()]).expect("open");
    tracing::subscriber::with_default(subscriber, || {
        for _ in 0..3 {
            let place = geo.place(ip("127.0.0.1"));
            assert_eq!(
                place.country,
                lookup_text(&country, "127.0.0.1", &["country", "iso_code"]),
                "the other database still answers"
            );
            assert_eq!((place.asn, place.organization), (None, None));
        }
    });
    assert_eq!(geo.lookup_errors(), 3);
    let text = log.text();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("geo database"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains("WARN"), "{text}");
    assert!(lines[0].contains("broken-asn.mmdb"), "{text}");
    assert!(
        !lines[0].contains("127.0.0.1"),
        "no address in the log: {text}"
    );
}

/// Log lines written by the test's own subscriber.
#[derive(Clone, Default)]
struct Log(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Log {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log")).into_owned()
    }
}

impl std::io::Write for Log {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Log {
    type Writer = Self;

    fn make_writer(&'a self) -> Self {
        self.clone()
    }
}
