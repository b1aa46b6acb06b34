//! Our parsers against the real-client captures in `captures/` (see captures/README.md).
//!
//! Every expected value in `captures/<client>/capture.json` comes from an independent tool
//! (tshark, hyperframe/hpack, ja4plus), never from this crate. These tests check that our TLS and
//! HTTP/2 fingerprints and HTTP/1 request lines and header orders equal those values for every
//! recorded connection, and the relationships
//! the voices promise: one voice per client and layer across connections, distinct clients
//! distinct, Chromium's permutation visible in JA3 but not in JA3N, JA4 or the voice.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use exitvoice_protocol::classify::{browser_profile, bucket, sniff, BucketInput};
use exitvoice_protocol::h1::parse_head;
use exitvoice_protocol::h2::{akamai_fingerprint, akamai_fingerprint_hash, parse_prefix, H2Prefix};
use exitvoice_protocol::tls::{parse_client_hello, TlsFingerprints};
use exitvoice_schema::{Bucket, Spoken, VoiceId};
use serde_json::Value;

/// The clients captures/ must hold (captures/README.md, provenance table).
const CLIENTS: [&str; 14] = [
    "chromium",
    "curl-h1",
    "curl-h2",
    "firefox-esr",
    "go-h1",
    "go-h2",
    "java-httpclient",
    "nghttp",
    "node-http2",
    "node-https",
    "openssl-s_client",
    "python-aiohttp",
    "python-httpx-h2",
    "python-requests",
];

/// One recorded connection: its files and the expected values from capture.json.
struct Conn {
    client: String,
    name: String,
    hello: Vec<u8>,
    prefix: Vec<u8>,
    expected: Value,
    /// The recorder's notes (connN.json): ALPN offered / negotiated and protocol spoken, as
    /// Python's ssl module and the recorder's sniffing saw them.
    meta: Value,
}

impl Conn {
    fn label(&self) -> String {
        format!("{}/{}", self.client, self.name)
    }

    fn tls(&self) -> TlsFingerprints {
        match parse_client_hello(&self.hello) {
            Ok(hello) => hello.fingerprints(),
            Err(e) => panic!("{}: ClientHello does not parse: {e}", self.label()),
        }
    }

    fn is_h2(&self) -> bool {
        self.prefix.starts_with(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    }

    fn h2(&self) -> H2Prefix {
        match parse_prefix(&self.prefix) {
            Ok(p) => p,
            Err(e) => panic!("{}: HTTP/2 prefix does not parse: {e}", self.label()),
        }
    }

    /// The application-layer voice: HTTP/2 voice for h2 connections, HTTP/1 voice otherwise.
    fn app_voice(&self) -> VoiceId {
        if self.is_h2() {
            exitvoice_protocol::h2::voice_id(&self.h2())
        } else {
            match parse_head(&self.prefix) {
                Ok(head) => exitvoice_protocol::h1::voice_id(&head),
                Err(e) => panic!("{}: HTTP/1 head does not parse: {e}", self.label()),
            }
        }
    }

    /// The bucket of the connection's first request, from the recorded ALPN facts and our sniff
    /// and profile match.
    fn bucket(&self) -> Option<Bucket> {
        let offered = self.meta["alpn_offered"]
            .as_array()
            .is_some_and(|a| a.iter().any(|p| p == "h2"));
        let spoken = sniff(&self.prefix).unwrap_or(Spoken::Unknown);
        let h2 = (spoken == Spoken::H2).then(|| self.h2());
        bucket(&BucketInput {
            alpn_offered_h2: offered,
            alpn_negotiated_h2: self.meta["alpn_negotiated"] == "h2",
            spoken,
            own_preface_and_settings: h2.as_ref().is_some_and(|p| p.settings().is_some()),
            request_index: 1,
            earlier_other_probe: false,
            browser_profile: h2.as_ref().is_some_and(|p| browser_profile(p).is_some()),
        })
    }

    /// The expected value of `field`, when capture.json has one.
    fn want(&self, field: &str) -> Option<&Value> {
        self.expected.get(field).and_then(|v| v.get("value"))
    }
}

fn captures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../captures")
}

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every client's connections, by client directory name.
fn load() -> BTreeMap<String, Vec<Conn>> {
    let mut out = BTreeMap::new();
    for client in CLIENTS {
        let dir = captures_dir().join(client);
        let doc: Value = serde_json::from_slice(&read(&dir.join("capture.json")))
            .unwrap_or_else(|e| panic!("{client}/capture.json: {e}"));
        let conns = doc["connections"]
            .as_array()
            .unwrap_or_else(|| panic!("{client}/capture.json: no connections"))
            .iter()
            .map(|c| {
                let file = |key: &str| dir.join(c[key].as_str().unwrap_or_default());
                Conn {
                    client: client.to_string(),
                    name: c["name"].as_str().unwrap_or_default().to_string(),
                    hello: read(&file("hello")),
                    prefix: read(&file("prefix")),
                    expected: c["expected"].clone(),
                    meta: serde_json::from_slice(&read(&file("recorder_meta")))
                        .unwrap_or_else(|e| panic!("{client}: recorder notes: {e}")),
                }
            })
            .collect::<Vec<_>>();
        assert_eq!(conns.len(), 2, "{client}: two connections expected");
        out.insert(client.to_string(), conns);
    }
    out
}

/// Compares `got` with the expected `field` (if capture.json has it); records a mismatch.
fn check(errors: &mut Vec<String>, conn: &Conn, field: &str, got: Value) -> bool {
    match conn.want(field) {
        Some(want) if *want != got => {
            errors.push(format!(
                "{} {field}: expected {want}, got {got}",
                conn.label()
            ));
            true
        }
        Some(_) => true,
        None => false,
    }
}

fn names(it: impl Iterator<Item = impl AsRef<[u8]>>) -> Value {
    Value::from(
        it.map(|n| String::from_utf8_lossy(n.as_ref()).into_owned())
            .collect::<Vec<_>>(),
    )
}

#[test]
fn captures_are_all_there_with_expected_values() {
    let all = load();
    for (client, conns) in &all {
        for c in conns {
            assert!(!c.hello.is_empty(), "{}: empty hello", c.label());
            assert!(!c.prefix.is_empty(), "{}: empty prefix", c.label());
            for field in ["ja3", "ja3_string", "ja4", "ja4_r", "ja4_o", "ja4_ro"] {
                assert!(c.want(field).is_some(), "{client}: no expected {field}");
            }
            if c.is_h2() {
                assert!(c.want("akamai").is_some(), "{client}: no expected akamai");
            } else {
                for field in ["http1_request_line", "http1_header_order"] {
                    assert!(c.want(field).is_some(), "{client}: no expected {field}");
                }
            }
        }
    }
}

#[test]
fn tls_fingerprints_equal_the_independent_values() {
    let mut errors = Vec::new();
    let mut checked = 0;
    for conns in load().values() {
        for c in conns {
            let fp = c.tls();
            for (field, got) in [
                ("ja3", fp.ja3_hash().to_owned()),
                ("ja3_string", fp.ja3().to_owned()),
                ("ja4", fp.ja4().to_owned()),
                ("ja4_r", fp.ja4_r().to_owned()),
                ("ja4_o", fp.ja4_o().to_owned()),
                ("ja4_ro", fp.ja4_ro().to_owned()),
            ] {
                checked += usize::from(check(&mut errors, c, field, Value::from(got)));
            }
        }
    }
    assert!(
        errors.is_empty(),
        "{} mismatches:\n{}",
        errors.len(),
        errors.join("\n")
    );
    assert_eq!(
        checked,
        14 * 2 * 6,
        "every connection has all six TLS values"
    );
}

#[test]
fn h2_fields_and_akamai_equal_the_independent_values() {
    let mut errors = Vec::new();
    let mut h2_conns = 0;
    for conns in load().values() {
        for c in conns.iter().filter(|c| c.is_h2()) {
            h2_conns += 1;
            let p = c.h2();
            let akamai = akamai_fingerprint(&p);
            check(
                &mut errors,
                c,
                "akamai_hash",
                Value::from(akamai_fingerprint_hash(&akamai)),
            );
            check(&mut errors, c, "akamai", Value::from(akamai));
            let settings = p
                .settings()
                .map(|s| {
                    s.entries
                        .iter()
                        .map(|e| Value::from(vec![u64::from(e.id), u64::from(e.value)]))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            check(&mut errors, c, "h2_settings", Value::from(settings));
            check(
                &mut errors,
                c,
                "h2_window_update",
                p.connection_window_update()
                    .map_or(Value::Null, Value::from),
            );
            let prio = p
                .priority_frames()
                .map(|(s, f)| {
                    Value::from(vec![
                        u64::from(s),
                        u64::from(f.exclusive),
                        u64::from(f.dependency),
                        u64::from(f.weight),
                    ])
                })
                .collect::<Vec<_>>();
            check(&mut errors, c, "h2_priority_frames", Value::from(prio));
            let Some(req) = p.first_request() else {
                errors.push(format!("{}: no request decoded", c.label()));
                continue;
            };
            check(
                &mut errors,
                c,
                "h2_first_stream_id",
                Value::from(req.stream_id),
            );
            let hp = req.priority.map_or(Value::Null, |f| {
                serde_json::json!({
                    "exclusive": u8::from(f.exclusive),
                    "depends_on": f.dependency,
                    "weight": f.weight,
                })
            });
            check(&mut errors, c, "h2_headers_priority", hp);
            check(
                &mut errors,
                c,
                "h2_pseudo_header_order",
                names(req.pseudo_header_order()),
            );
            check(&mut errors, c, "h2_header_order", names(req.header_names()));
        }
    }
    assert!(
        errors.is_empty(),
        "{} mismatches:\n{}",
        errors.len(),
        errors.join("\n")
    );
    assert_eq!(h2_conns, 8 * 2, "eight h2 clients, two connections each");
}

#[test]
fn h1_request_line_and_header_order_equal_the_independent_values() {
    let mut errors = Vec::new();
    let mut h1_conns = 0;
    for conns in load().values() {
        for c in conns.iter().filter(|c| !c.is_h2()) {
            h1_conns += 1;
            let head = match parse_head(&c.prefix) {
                Ok(head) => head,
                Err(e) => panic!("{}: HTTP/1 head does not parse: {e}", c.label()),
            };
            check(
                &mut errors,
                c,
                "http1_request_line",
                Value::from(exitvoice_protocol::h1::echo(&head).request_line),
            );
            check(
                &mut errors,
                c,
                "http1_header_order",
                names(head.headers.iter().map(|(name, _)| name)),
            );
        }
    }
    assert!(
        errors.is_empty(),
        "{} mismatches:\n{}",
        errors.len(),
        errors.join("\n")
    );
    assert_eq!(h1_conns, 6 * 2, "six HTTP/1 clients, two connections each");
}

#[test]
fn each_client_keeps_one_tls_voice_and_one_h2_or_h1_voice() {
    let mut errors = Vec::new();
    for (client, conns) in load() {
        let [a, b] = [&conns[0], &conns[1]];
        assert_eq!(
            a.is_h2(),
            b.is_h2(),
            "{client}: one connection h2, the other not"
        );
        let (ta, tb) = (a.tls().voice_id().to_owned(), b.tls().voice_id().to_owned());
        if ta != tb {
            errors.push(format!("{client}: TLS voice differs: {ta:?} vs {tb:?}"));
        }
        let (va, vb) = (a.app_voice(), b.app_voice());
        if va != vb {
            errors.push(format!("{client}: h2/h1 voice differs: {va:?} vs {vb:?}"));
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn different_clients_never_share_both_voices() {
    let voices: Vec<(String, VoiceId, VoiceId)> = load()
        .into_iter()
        .map(|(client, conns)| {
            (
                client,
                VoiceId(conns[0].tls().voice_id().to_owned()),
                conns[0].app_voice(),
            )
        })
        .collect();
    for (i, (ca, ta, va)) in voices.iter().enumerate() {
        for (cb, tb, vb) in voices.iter().skip(i + 1) {
            assert!(
                !(ta == tb && va == vb),
                "{ca} and {cb} share both voices: {ta:?}, {va:?}"
            );
        }
    }
}

#[test]
fn sniff_agrees_with_the_recorder() {
    for conns in load().values() {
        for c in conns {
            let want = match c.meta["spoken"].as_str() {
                Some("h2") => Spoken::H2,
                Some("http/1.1" | "http/1.0") => Spoken::Http1,
                other => panic!("{}: recorder saw {other:?}", c.label()),
            };
            assert_eq!(sniff(&c.prefix), Some(want), "{}", c.label());
        }
    }
}

#[test]
fn browsers_are_bucket_a_h2_libraries_bucket_b() {
    const BROWSERS: [&str; 2] = ["chromium", "firefox-esr"];
    const H2_LIBRARIES: [&str; 6] = [
        "curl-h2",
        "go-h2",
        "java-httpclient",
        "nghttp",
        "node-http2",
        "python-httpx-h2",
    ];
    let mut errors = Vec::new();
    for (client, conns) in load() {
        for c in &conns {
            let want = if BROWSERS.contains(&client.as_str()) {
                Some(Bucket::A)
            } else if H2_LIBRARIES.contains(&client.as_str()) {
                Some(Bucket::B)
            } else {
                // HTTP/1-only clients did not offer h2: no bucket.
                None
            };
            let got = c.bucket();
            if got != want {
                errors.push(format!("{}: bucket {got:?}, expected {want:?}", c.label()));
            }
            if c.is_h2() {
                let profile = browser_profile(&c.h2()).map(|p| p.name);
                if BROWSERS.contains(&client.as_str()) != profile.is_some() {
                    errors.push(format!("{}: browser profile {profile:?}", c.label()));
                }
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn chromium_permutes_extensions_but_keeps_ja3n_ja4_and_voice() {
    let all = load();
    let [a, b] = [&all["chromium"][0], &all["chromium"][1]];
    let (fa, fb) = (a.tls(), b.tls());
    assert_ne!(
        fa.ja3_hash(),
        fb.ja3_hash(),
        "Chromium's JA3 should differ per connection"
    );
    assert_ne!(
        fa.order_id(),
        fb.order_id(),
        "Chromium's extension order should differ"
    );
    assert_eq!(fa.ja3n_hash(), fb.ja3n_hash());
    assert_eq!(fa.ja4(), fb.ja4());
    assert_eq!(fa.ja4_r(), fb.ja4_r());
    assert_eq!(fa.voice_id(), fb.voice_id());
}
