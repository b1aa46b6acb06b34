//! The family table: which client stacks a TLS or HTTP/2 voice looks like, built from the
//! recorded clients in `captures/` (each row names the captures it comes from) and from the
//! auditor's own rustls persona and `rustls-default` profile; and which TLS stacks the clients a
//! User-Agent names are built on.
//!
//! A family is recognised by *shape*, not by an exact fingerprint: the traits that stay across
//! a stack's releases (GREASE, the extensions only that stack sends, the SETTINGS identifiers in
//! their order and the pseudo-header order) and not the values that move with each release
//! (build numbers, window sizes). `exact` says whether the fingerprint is one recorded in
//! `captures/` (the JA4 for TLS, the Akamai string for HTTP/2).

/// JA4 fingerprints of the recorded clients, by TLS family (`captures/*/capture.json`,
/// `expected.ja4`).
pub(super) const TLS_EXACT: &[(&str, &[&str])] = &[
    // captures/chromium
    ("chrome", &["t13d1517h2_8daaf6152771_cb7bf5808d99"]),
    // captures/firefox-esr
    ("firefox", &["t13d1617h2_86a278354501_3cbfd9057e0d"]),
    // captures/curl-h1, captures/curl-h2, captures/nghttp, captures/node-http2, captures/node-https, captures/openssl-s_client, captures/python-aiohttp, captures/python-httpx-h2, captures/python-requests
    (
        "openssl",
        &[
            "t13d1213h2_ed40b14a4398_03aaa766dde5",
            "t13d311000_e8f1e7e78f70_1f22a2ca17c4",
            "t13d311100_e8f1e7e78f70_d41ae481755e",
            "t13d3112h1_e8f1e7e78f70_b26ce05bbdd6",
            "t13d3112h1_e8f1e7e78f70_d41ae481755e",
            "t13d3112h2_e8f1e7e78f70_b26ce05bbdd6",
            "t13d591000_a33745022dd6_1f22a2ca17c4",
            "t13d5911h2_a33745022dd6_1f22a2ca17c4",
        ],
    ),
    // captures/go-h1, captures/go-h2
    (
        "go",
        &[
            "t13d190900_9dc949149365_97f8aa674fd9",
            "t13d1910h2_9dc949149365_97f8aa674fd9",
        ],
    ),
    // captures/java-httpclient
    ("java", &["t13d3713h2_db35923f8641_7c76daad20ec"]),
];

/// One HTTP/2 family's shape: SETTINGS identifiers in wire order, the pseudo-header order (the
/// Akamai string's first and last parts without values), and the recorded Akamai strings.
pub(super) struct H2Shape {
    /// Family name.
    pub name: &'static str,
    /// SETTINGS identifiers, comma-separated, wire order.
    pub settings_ids: &'static str,
    /// Pseudo-header order, Akamai letters.
    pub pseudo: &'static str,
    /// Recorded Akamai strings of this shape.
    pub exact: &'static [&'static str],
}

/// HTTP/2 shapes (`captures/*/capture.json`, `expected.akamai`; `rust-h2` is the `h2` crate's
/// default, the auditor's `rustls-default` profile).
pub(super) const H2_SHAPES: &[H2Shape] = &[
    // captures/chromium
    H2Shape {
        name: "chrome",
        settings_ids: "1,2,4,6",
        pseudo: "m,a,s,p",
        exact: &["1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p"],
    },
    // captures/firefox-esr
    H2Shape {
        name: "firefox",
        settings_ids: "1,2,4,5",
        pseudo: "m,p,a,s",
        exact: &["1:65536;2:0;4:131072;5:16384|12517377|0|m,p,a,s"],
    },
    // captures/curl-h2
    H2Shape {
        name: "nghttp2",
        settings_ids: "3,4,2",
        pseudo: "m,p,s,a",
        exact: &["3:100;4:33554432;2:0|33488897|0|m,p,s,a"],
    },
    // captures/nghttp
    H2Shape {
        name: "nghttp2",
        settings_ids: "3,4",
        pseudo: "m,p,s,a",
        exact: &["3:100;4:65535|00|3:0:0:201,5:0:0:101,7:0:0:1,9:0:7:1,11:0:3:1|m,p,s,a"],
    },
    // captures/go-h2
    H2Shape {
        name: "go",
        settings_ids: "2,4,6",
        pseudo: "a,m,p,s",
        exact: &["2:0;4:4194304;6:10485760|1073741824|0|a,m,p,s"],
    },
    // captures/java-httpclient
    H2Shape {
        name: "java",
        settings_ids: "1,2,3,4,5,6",
        pseudo: "a,m,p,s",
        exact: &["1:16384;2:0;3:0;4:16777216;5:16384;6:393216|33488897|0|a,m,p,s"],
    },
    // captures/node-http2
    H2Shape {
        name: "node",
        settings_ids: "",
        pseudo: "p,m,a,s",
        exact: &["|00|0|p,m,a,s"],
    },
    // captures/python-httpx-h2
    H2Shape {
        name: "python-h2",
        settings_ids: "1,2,4,5,3,6",
        pseudo: "m,a,s,p",
        exact: &["1:4096;2:0;4:65535;5:16384;3:100;6:65536|16777216|0|m,a,s,p"],
    },
    // auditor/src/probe/h2.rs, H2Profile::rustls_default
    H2Shape {
        name: "rust-h2",
        settings_ids: "2,4,5,6",
        pseudo: "m,s,a,p",
        exact: &[],
    },
];

/// Browser families; the others are libraries.
pub(super) const BROWSERS: &[&str] = &["chrome", "firefox"];

/// The HTTP/2 families each TLS family speaks with (OpenSSL carries several libraries).
pub(super) const TLS_CARRIES_H2: &[(&str, &[&str])] = &[
    ("chrome", &["chrome"]),
    ("firefox", &["firefox"]),
    ("openssl", &["nghttp2", "node", "python-h2"]),
    ("go", &["go"]),
    ("java", &["java"]),
    ("rustls", &["rust-h2"]),
];

/// The TLS families the client a User-Agent names is built on. `curl`, Python, Node and nghttp2
/// as Debian builds them use OpenSSL (captures/curl-h2, captures/python-*, captures/node-*,
/// captures/nghttp); Safari uses Apple's own stack, which the table does not know, so any known
/// TLS family under a Safari User-Agent is a mismatch.
pub(super) const UA_USES_TLS: &[(&str, &[&str])] = &[
    ("chrome", &["chrome"]),
    ("curl", &["openssl"]),
    ("firefox", &["firefox"]),
    ("go", &["go"]),
    ("java", &["java"]),
    ("nghttp2", &["openssl"]),
    ("node", &["openssl"]),
    ("python", &["openssl"]),
    ("safari", &[]),
];

/// Whether `table` pairs family `from` with family `to`.
pub(super) fn carries(table: &[(&str, &[&str])], from: &str, to: &str) -> bool {
    table
        .iter()
        .any(|(name, others)| *name == from && others.contains(&to))
}
