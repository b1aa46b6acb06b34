use super::*;

const CHROME_CIPHERS: &[u16] = &[0x3a3a, 0x1301, 0x1302, 0x1303, 0xc02b];
const CHROME_EXTENSIONS: &[u16] = &[0x1a1a, 0x0000, 0x0010, 0x44cd, 0xfe0d, 0x2a2a];
const CHROME_JA4: &str = "t13d1517h2_8daaf6152771_cb7bf5808d99";
const CHROME_H2: &str = "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p";
/// The auditor's own rustls hello (JA3 ciphers 4866-4865-4867-…-255, no encrypt_then_mac).
const RUSTLS_CIPHERS: &[u16] = &[0x1302, 0x1301, 0x1303, 0xc02c, 0x00ff];
const RUSTLS_EXTENSIONS: &[u16] = &[0x0000, 0x0010, 0x002b];
/// curl's OpenSSL hello (captures/curl-h2): the renegotiation SCSV and encrypt_then_mac.
const OPENSSL_CIPHERS: &[u16] = &[0x1302, 0x1303, 0x1301, 0xc02c, 0x00ff];
const OPENSSL_EXTENSIONS: &[u16] = &[0x0000, 0x000b, 0x000a, 0x0010, 0x0016, 0x0017, 0x002b];
const CURL_H2: &str = "3:100;4:33554432;2:0|33488897|0|m,p,s,a";
const CHROME_UA: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
                         Chrome/131.0.0.0 Safari/537.36";

fn hello<'a>(ciphers: &'a [u16], extensions: &'a [u16], ja4: &'a str) -> HelloShape<'a> {
    HelloShape {
        cipher_suites: ciphers,
        extensions,
        ja4,
    }
}

fn h2() -> Alpn {
    Alpn {
        offered: vec!["h2".into(), "http/1.1".into()],
        negotiated: Some("h2".into()),
        spoken: Spoken::H2,
    }
}

/// A family as (name, exact).
fn named(family: &Option<Family>) -> Option<(&str, bool)> {
    family.as_ref().map(|f| (f.name.as_str(), f.exact))
}

#[test]
fn chrome_is_chrome_and_the_next_chrome_too() {
    let tls = tls_family(&hello(CHROME_CIPHERS, CHROME_EXTENSIONS, CHROME_JA4));
    let http = http_family(CHROME_H2);
    assert_eq!(
        (named(&tls), named(&http)),
        (Some(("chrome", true)), Some(("chrome", true)))
    );
    let ua = ua_family(CHROME_UA);
    let chrome = judge(&h2(), Families { tls, http, ua });
    assert_eq!((chrome.score, chrome.reasons.len()), (1.0, 0));
    // A new minor release: other window sizes, another extension, another JA4; same shape.
    let mut extensions = CHROME_EXTENSIONS.to_vec();
    extensions.push(0x0029);
    let tls = tls_family(&hello(
        CHROME_CIPHERS,
        &extensions,
        "t13d1518h2_8daaf6152771_aaaaaaaaaaaa",
    ));
    let http = http_family("1:65536;2:0;4:6291000;6:262144|15663000|0|m,a,s,p");
    assert_eq!(
        (named(&tls), named(&http)),
        (Some(("chrome", false)), Some(("chrome", false)))
    );
}

/// One row per reason, readable as the spec of the module docs' table.
#[test]
fn reasons_and_weights() {
    let chrome_tls = || tls_family(&hello(CHROME_CIPHERS, CHROME_EXTENSIONS, CHROME_JA4));
    let rustls_tls = || tls_family(&hello(RUSTLS_CIPHERS, RUSTLS_EXTENSIONS, "x"));
    let curl_tls = || tls_family(&hello(OPENSSL_CIPHERS, OPENSSL_EXTENSIONS, "x"));
    let http1 = Alpn {
        spoken: Spoken::Http1,
        ..h2()
    };
    // (case, alpn, families, reasons, score)
    let table: [(&str, &Alpn, Families, &[&str], f64); 7] = [
        (
            "Chrome's TLS carrying Go's HTTP/2 settings with Chrome's pseudo order: no shape",
            &h2(),
            Families {
                tls: chrome_tls(),
                http: http_family("2:0;4:4194304;6:10485760|1073741824|0|m,a,s,p"),
                ua: None,
            },
            &["browser_tls_library_h2"],
            0.7,
        ),
        (
            "the rustls persona with the chrome profile",
            &h2(),
            Families {
                tls: rustls_tls(),
                http: http_family(CHROME_H2),
                ua: None,
            },
            &["tls_family_ne_http_family"],
            0.6,
        ),
        (
            "ALPN said h2, HTTP/1.1 was spoken",
            &http1,
            Families {
                tls: rustls_tls(),
                ..Families::default()
            },
            &["alpn_h2_spoke_http1"],
            0.5,
        ),
        (
            "curl as itself",
            &h2(),
            Families {
                tls: curl_tls(),
                http: http_family(CURL_H2),
                ua: ua_family("curl/7.88.1"),
            },
            &[],
            1.0,
        ),
        (
            "curl claiming to be Chrome",
            &h2(),
            Families {
                tls: curl_tls(),
                http: http_family(CURL_H2),
                ua: ua_family(CHROME_UA),
            },
            &["ua_family_ne_tls_family"],
            0.6,
        ),
        (
            "an unknown User-Agent claims nothing",
            &h2(),
            Families {
                tls: curl_tls(),
                http: http_family(CURL_H2),
                ua: ua_family("exitvoice-auditor"),
            },
            &[],
            1.0,
        ),
        (
            "nothing parsed: no family, nothing claimed",
            &Alpn::default(),
            Families {
                http: http_family("||"),
                ..Families::default()
            },
            &[],
            1.0,
        ),
    ];
    for (case, alpn, families, reasons, score) in table {
        let c = judge(alpn, families);
        assert_eq!(c.reasons, reasons, "{case}: {c:?}");
        // Exact: a score is a whole number of tenths, with no float noise in the labels.
        assert_eq!(c.score, score, "{case}: {c:?}");
        assert!(c.score.to_string().len() <= 3, "{case}: {}", c.score);
    }
    let all = judge(
        &http1,
        Families {
            tls: chrome_tls(),
            http: http_family(CURL_H2),
            ua: ua_family("Go-http-client/1.1"),
        },
    );
    // The downgrade and browser_tls_library_h2 exclude each other (HTTP/1.1 vs h2 spoken).
    assert_eq!(all.reasons.len(), 3, "{all:?}");
    assert_eq!(all.score, 0.0, "never below 0");
}

#[test]
fn user_agents_name_their_family() {
    let table = [
        (CHROME_UA, Some("chrome")),
        // Edge is Chromium.
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0", Some("chrome")),
        ("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", Some("firefox")),
        ("Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", Some("safari")),
        // Chrome on iOS is WebKit.
        ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1", Some("safari")),
        ("curl/7.88.1", Some("curl")),
        ("Go-http-client/2.0", Some("go")),
        ("python-requests/2.28.1", Some("python")),
        ("python-httpx/0.23.3", Some("python")),
        ("Python/3.11 aiohttp/3.8.4", Some("python")),
        ("Java-http-client/17.0.13", Some("java")),
        ("nghttp2/1.52.0", Some("nghttp2")),
        ("node", Some("node")),
        ("exitvoice-auditor", None),
        ("", None),
        ("Mozilla/5.0", None),
    ];
    for (user_agent, family) in table {
        let found = ua_family(user_agent);
        assert_eq!(
            found.as_ref().map(|f| f.name.as_str()),
            family,
            "{user_agent}"
        );
        assert!(found.is_none_or(|f| !f.exact), "a claim is never exact");
    }
    // Long and multi-byte: cut at a character boundary, never a panic.
    let long = format!("curl/{}", "é".repeat(2000));
    assert_eq!(named(&ua_family(&long)), Some(("curl", false)));
    let late = format!("Mozilla/5.0 {} Chrome/1", "x".repeat(2000));
    assert_eq!(ua_family(&late), None, "only the first bytes are read");
}

#[test]
fn user_agents_name_their_operating_system() {
    let table = [
        (CHROME_UA, Some("linux")),
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0", Some("windows")),
        ("Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", Some("macos")),
        // An iPhone's says `like Mac OS X`, Android's and ChromeOS's `Linux`: the first token wins.
        ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1", Some("ios")),
        ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36", Some("android")),
        ("Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", Some("chromeos")),
        ("curl/8.5.0", None),
        ("Mozilla/5.0", None),
    ];
    for (user_agent, os) in table {
        assert_eq!(ua_os(user_agent), os, "{user_agent}");
    }
}

#[test]
fn a_claimed_os_unlike_the_stacks_is_a_reason() {
    let judged = || judge(&h2(), Families::default());
    // p0f's labels for the stacks (`p0f.fp`: `s:unix:Linux:3.11 and newer`, `s:win:Windows:7 or 8`).
    let windows_on_linux = judged().with_os(Some("windows"), Some("Linux 3.11 and newer"));
    assert_eq!(windows_on_linux.reasons, ["ua_os_ne_tcp_os"]);
    assert_eq!(windows_on_linux.score, 0.7);
    assert_eq!(windows_on_linux.ua_os.as_deref(), Some("windows"));
    assert_eq!(
        windows_on_linux.tcp_os.as_deref(),
        Some("Linux 3.11 and newer")
    );
    // Android and ChromeOS run Linux's stack, iOS macOS's.
    for (claimed, shown) in [
        ("android", "Linux 3.11 and newer"),
        ("chromeos", "Linux 2.2.x-3.x"),
        ("ios", "Mac OS X 10.x"),
        ("windows", "Windows 7 or 8"),
    ] {
        let kin = judged().with_os(Some(claimed), Some(shown));
        assert!(kin.reasons.is_empty(), "{claimed} on {shown}: {kin:?}");
    }
    // Either unknown: no reason.
    assert!(judged()
        .with_os(None, Some("Windows 7 or 8"))
        .reasons
        .is_empty());
    assert!(judged().with_os(Some("macos"), None).reasons.is_empty());
    assert!(judged()
        .with_os(Some("windows"), Some("Plan 9"))
        .reasons
        .is_empty());
}
