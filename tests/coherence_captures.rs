//! The family table recognises every recorded client in `captures/` (analysed by
//! `exitvoice inspect`, the echo's own analysis), exactly, and finds each one coherent; and the
//! echo server, judging the same bytes from its own parser's model, finds the same families.

use std::path::Path;
use std::process::Command;

use exitvoice_auditor::coherence;
use exitvoice_protocol::analysis;
use exitvoice_schema::{Alpn, Http2Echo, Spoken, TlsEcho};
use serde_json::Value;

fn capture(client: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("captures")
        .join(client)
}

/// The families the echo server finds in a capture's bytes, as a live `/api/all` would.
fn echo_families(client: &str) -> exitvoice_schema::Families {
    let dir = capture(client);
    let hello = std::fs::read(dir.join("conn1.hello.bin")).unwrap();
    let prefix = std::fs::read(dir.join("conn1.prefix.bin")).unwrap();
    let analysis = analysis::analyse(&analysis::ConnectionInput {
        hello: &hello,
        prefix: &prefix,
        alpn_negotiated: Some("h2"),
        ..analysis::ConnectionInput::default()
    });
    analysis.json(&hello, &prefix).families.clone()
}

fn inspect(client: &str) -> Value {
    let dir = capture(client);
    let output = Command::new(env!("CARGO_BIN_EXE_exitvoice"))
        .arg("inspect")
        .arg("--compact")
        .arg(dir.join("conn1.hello.bin"))
        .arg(dir.join("conn1.prefix.bin"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{client}");
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn every_recorded_client_is_its_own_family_and_coherent() {
    // (capture, TLS family, HTTP/2 family)
    let table = [
        ("chromium", "chrome", "chrome"),
        ("firefox-esr", "firefox", "firefox"),
        ("curl-h2", "openssl", "nghttp2"),
        ("nghttp", "openssl", "nghttp2"),
        ("go-h2", "go", "go"),
        ("java-httpclient", "java", "java"),
        ("node-http2", "openssl", "node"),
        ("python-httpx-h2", "openssl", "python-h2"),
    ];
    for (client, tls_family, http_family) in table {
        let json = inspect(client);
        let tls: TlsEcho = serde_json::from_value(json["tls"].clone()).unwrap();
        let http2: Http2Echo = serde_json::from_value(json["http2"].clone()).unwrap();
        let alpn = Alpn {
            offered: vec![],
            negotiated: Some("h2".into()),
            spoken: Spoken::H2,
        };
        let c = coherence::of_parts(Some(&tls), &alpn, Some(&http2), None);
        let family =
            |f: &Option<exitvoice_schema::Family>| f.as_ref().map(|f| (f.name.clone(), f.exact));
        assert_eq!(
            family(&c.tls_family),
            Some((tls_family.into(), true)),
            "{client}"
        );
        assert_eq!(
            family(&c.http_family),
            Some((http_family.into(), true)),
            "{client}"
        );
        assert_eq!(
            (c.score, c.reasons.len()),
            (1.0, 0),
            "{client}: {:?}",
            c.reasons
        );
        let echo = echo_families(client);
        assert_eq!(
            (echo.tls, echo.http),
            (c.tls_family, c.http_family),
            "{client}: the echo and the auditor agree"
        );
    }
}
