use super::*;
use serde_json::json;

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

const CHROME_CIPHERS: &[u64] = &[0x3a3a, 0x1301, 0x1302, 0x1303, 0xc02b];
const CHROME_EXTENSIONS: &[u64] = &[0x1a1a, 0x0000, 0x0010, 0x44cd, 0xfe0d, 0x2a2a];
const CHROME_JA4: &str = "t13d1517h2_8daaf6152771_cb7bf5808d99";
const CHROME_H2: &str = "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p";

fn named(family: &Option<Family>) -> Named<'_> {
    family.as_ref().map(|f| (f.name.as_str(), f.exact))
}

/// A family as (name, exact).
type Named<'a> = Option<(&'a str, bool)>;

fn names(c: &Coherence) -> (Named<'_>, Named<'_>) {
    (named(&c.tls_family), named(&c.http_family))
}

#[test]
fn chrome_is_chrome_and_the_next_chrome_too() {
    let chrome = of_echo(&echo(
        hello(CHROME_CIPHERS, CHROME_EXTENSIONS),
        CHROME_JA4,
        Some(CHROME_H2),
        Spoken::H2,
    ));
    assert_eq!(
        names(&chrome),
        (Some(("chrome", true)), Some(("chrome", true)))
    );
    assert_eq!((chrome.score, chrome.reasons.len()), (1.0, 0));
    // A new minor release: other window sizes, another extension, another JA4; same shape.
    let mut extensions = CHROME_EXTENSIONS.to_vec();
    extensions.push(0x0029);
    let next = of_echo(&echo(
        hello(CHROME_CIPHERS, &extensions),
        "t13d1518h2_8daaf6152771_aaaaaaaaaaaa",
        Some("1:65536;2:0;4:6291000;6:262144|15663000|0|m,a,s,p"),
        Spoken::H2,
    ));
    assert_eq!(
        names(&next),
        (Some(("chrome", false)), Some(("chrome", false)))
    );
    assert_eq!(next.score, 1.0);
}

#[test]
fn reasons_and_weights() {
    // Chrome's TLS carrying a library's HTTP/2 (Go's shape).
    let go_h2 = "2:0;4:4194304;6:10485760|1073741824|0|m,a,s,p";
    let spliced = of_echo(&echo(
        hello(CHROME_CIPHERS, CHROME_EXTENSIONS),
        CHROME_JA4,
        Some(go_h2),
        Spoken::H2,
    ));
    assert_eq!(
        spliced.reasons,
        ["browser_tls_library_h2"],
        "no shape known: {spliced:?}"
    );
    // The rustls persona with the chrome profile: rustls TLS, Chrome's HTTP/2.
    // The auditor's own rustls hello (JA3 ciphers 4866-4865-4867-…-255, no encrypt_then_mac).
    let rustls = hello(
        &[0x1302, 0x1301, 0x1303, 0xc02c, 0x00ff],
        &[0x0000, 0x0010, 0x002b],
    );
    let persona = of_echo(&echo(rustls.clone(), "x", Some(CHROME_H2), Spoken::H2));
    assert_eq!(names(&persona).0, Some(("rustls", false)));
    assert_eq!(persona.reasons, ["tls_family_ne_http_family"]);
    assert!((persona.score - 0.6).abs() < 1e-9);
    // ALPN said h2, HTTP/1.1 was spoken.
    let downgrade = of_echo(&echo(rustls, "x", None, Spoken::Http1));
    assert_eq!(downgrade.reasons, ["alpn_h2_spoke_http1"]);
    assert!((downgrade.score - 0.5).abs() < 1e-9);
    // Nothing parsed: no family, nothing claimed.
    let empty = of_echo(&echo(json!(null), "", Some("||"), Spoken::Unknown));
    assert_eq!(names(&empty), (None, None));
    assert_eq!(empty.score, 1.0);
}
