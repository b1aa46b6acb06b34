//! The echo's JSON read into the rules' inputs; the rules themselves are tested in
//! `exitvoice_schema::coherence`.

use super::*;
use exitvoice_schema::Spoken;
use serde_json::{json, Value};

fn hello(ciphers: &[u64], extensions: &[u64]) -> Value {
    json!({
        "cipher_suites": ciphers.iter().map(|v| json!({ "value": v })).collect::<Vec<_>>(),
        "extensions": extensions
            .iter()
            .map(|v| json!({ "type": { "value": v }, "len": 0, "body": null }))
            .collect::<Vec<_>>(),
    })
}

fn echo(detail: Value, ja4: &str, akamai: Option<&str>, spoken: Spoken) -> Echo {
    let mut echo = crate::test_echo::echo(&detail);
    echo.alpn.spoken = spoken;
    if let Some(tls) = &mut echo.tls {
        tls.ja4 = ja4.into();
    }
    match (akamai, &mut echo.http2) {
        (Some(akamai), Some(h2)) => h2.akamai_fingerprint = akamai.into(),
        _ => echo.http2 = None,
    }
    echo
}

const CHROME_H2: &str = "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p";

/// A family as (name, exact).
fn named(family: &Option<exitvoice_schema::Family>) -> Option<(&str, bool)> {
    family.as_ref().map(|f| (f.name.as_str(), f.exact))
}

#[test]
fn the_echo_detail_is_read_in_wire_order_with_grease() {
    let chrome = of_echo(&echo(
        hello(
            &[0x3a3a, 0x1301, 0x1302, 0x1303, 0xc02b],
            &[0x1a1a, 0x0000, 0x0010, 0x44cd, 0xfe0d, 0x2a2a],
        ),
        "t13d1517h2_8daaf6152771_cb7bf5808d99",
        Some(CHROME_H2),
        Spoken::H2,
    ));
    assert_eq!(named(&chrome.tls_family), Some(("chrome", true)));
    assert_eq!(named(&chrome.http_family), Some(("chrome", true)));
    assert_eq!((chrome.score, chrome.reasons.len()), (1.0, 0));
    assert_eq!(chrome.ua_family, None, "the echo judged no User-Agent");
}

#[test]
fn the_rustls_persona_with_the_chrome_profile_and_a_downgrade() {
    // The auditor's own rustls hello (JA3 ciphers 4866-4865-4867-…-255, no encrypt_then_mac).
    let rustls = hello(
        &[0x1302, 0x1301, 0x1303, 0xc02c, 0x00ff],
        &[0x0000, 0x0010, 0x002b],
    );
    let persona = of_echo(&echo(rustls.clone(), "x", Some(CHROME_H2), Spoken::H2));
    assert_eq!(named(&persona.tls_family), Some(("rustls", false)));
    assert_eq!(persona.reasons, ["tls_family_ne_http_family"]);
    let downgrade = of_echo(&echo(rustls, "x", None, Spoken::Http1));
    assert_eq!(downgrade.reasons, ["alpn_h2_spoke_http1"]);
    // Nothing parsed, or values out of the u16 range: no family, nothing claimed.
    let empty = of_echo(&echo(json!(null), "", Some("||"), Spoken::Unknown));
    assert_eq!(
        (named(&empty.tls_family), named(&empty.http_family)),
        (None, None)
    );
    let odd = of_echo(&echo(hello(&[0x1_0000], &[]), "", None, Spoken::H2));
    assert_eq!((odd.tls_family, odd.score), (None, 1.0));
}

#[test]
fn the_user_agent_family_is_the_echos_reading() {
    let rustls = hello(&[0x1302, 0x1301, 0x1303], &[0x0000, 0x0010, 0x002b]);
    let mut sent = echo(rustls, "x", Some(CHROME_H2), Spoken::H2);
    let chrome_ua = exitvoice_schema::coherence::ua_family(
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    );
    sent.coherence = Some(exitvoice_schema::coherence::judge(
        &sent.alpn,
        exitvoice_schema::Families {
            ua: chrome_ua,
            ..Default::default()
        },
    ));
    let persona = of_echo(&sent);
    assert_eq!(named(&persona.ua_family), Some(("chrome", false)));
    // rustls TLS under a Chrome User-Agent and Chrome's HTTP/2: both mismatches, both weights.
    assert_eq!(
        persona.reasons,
        ["tls_family_ne_http_family", "ua_family_ne_tls_family"]
    );
    assert_eq!(persona.score, 0.2, "{persona:?}");
}
