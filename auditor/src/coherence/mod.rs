//! Coherence: does the story an observation tells hang together? Which client family its TLS
//! voice looks like, which its HTTP/2 voice looks like ([`families`]), and a score in [0, 1]
//! (1 = coherent) lowered by each named reason:
//!
//! | reason | weight | when |
//! |---|---|---|
//! | `alpn_h2_spoke_http1` | 0.5 | ALPN negotiated h2, but the client spoke HTTP/1.1 |
//! | `tls_family_ne_http_family` | 0.4 | both families known, and that TLS stack does not carry that HTTP/2 stack |
//! | `browser_tls_library_h2` | 0.3 | a browser's TLS (GREASE) with a library's (or no known) HTTP/2 shape |
//!
//! An exit is judged by whether it *keeps* the baseline's coherence (its reasons are among the
//! baseline's), not by the score: the rustls persona with the `chrome` profile is incoherent on
//! purpose (rustls TLS, Chrome's HTTP/2). The User-Agent family is not judged: the echo reports
//! header names, not values.

mod families;

use exitvoice_schema::{Alpn, Coherence, Echo, Family, Http2Echo, Spoken, TlsEcho};
use serde_json::Value;

use crate::changes::is_grease;

/// ALPS, old and new code points (draft-vvv-tls-alps): only Chromium sends it.
const ALPS: [u64; 2] = [0x4469, 0x44cd];
/// record_size_limit (RFC 8449) and delegated_credentials (RFC 9345): Firefox sends both.
const RECORD_SIZE_LIMIT: u64 = 0x001c;
const DELEGATED_CREDENTIALS: u64 = 0x0022;
/// status_request_v2 (RFC 6961): Java's TLS stack still sends it.
const STATUS_REQUEST_V2: u64 = 0x0011;
/// encrypt_then_mac (RFC 7366): OpenSSL sends it, with the renegotiation SCSV cipher.
const ENCRYPT_THEN_MAC: u64 = 0x0016;
const RENEGOTIATION_SCSV: u64 = 0x00ff;
/// rustls' default cipher order starts with the three TLS 1.3 suites, AES-256 then AES-128
/// (OpenSSL's puts ChaCha20 second); it sends the renegotiation SCSV, not encrypt_then_mac.
const RUSTLS_FIRST: [u64; 3] = [0x1302, 0x1301, 0x1303];

/// The weights of the reasons (module docs).
const WEIGHTS: [(&str, f64); 3] = [
    ("alpn_h2_spoke_http1", 0.5),
    ("tls_family_ne_http_family", 0.4),
    ("browser_tls_library_h2", 0.3),
];

/// The coherence of one echo.
pub fn of_echo(echo: &Echo) -> Coherence {
    of_parts(echo.tls.as_ref(), &echo.alpn, echo.http2.as_ref())
}

/// The coherence of a connection's parts: its ClientHello fingerprints, ALPN, and HTTP/2 echo
/// (what `exitvoice inspect` reports for capture files too).
pub fn of_parts(tls: Option<&TlsEcho>, alpn: &Alpn, http2: Option<&Http2Echo>) -> Coherence {
    let tls_family = tls.and_then(|tls| {
        let name = tls_family(&tls.detail.to_value())?;
        let exact = families::TLS_EXACT
            .iter()
            .any(|(family, ja4s)| *family == name && ja4s.contains(&tls.ja4.as_str()));
        Some(family(name, exact))
    });
    let http_family = http2.and_then(|h2| {
        let (name, exact) = http_family(&h2.akamai_fingerprint)?;
        Some(family(name, exact))
    });
    let mut reasons = Vec::new();
    if alpn.negotiated.as_deref() == Some("h2") && alpn.spoken == Spoken::Http1 {
        reasons.push("alpn_h2_spoke_http1");
    }
    if let (Some(tls), Some(http)) = (&tls_family, &http_family) {
        let carries = families::COMPATIBLE
            .iter()
            .any(|(t, hs)| *t == tls.name && hs.contains(&http.name.as_str()));
        if !carries {
            reasons.push("tls_family_ne_http_family");
        }
    }
    let browser = |f: &Option<Family>| {
        f.as_ref()
            .is_some_and(|f| families::BROWSERS.contains(&f.name.as_str()))
    };
    if browser(&tls_family) && http2.is_some() && !browser(&http_family) {
        reasons.push("browser_tls_library_h2");
    }
    let lost: f64 = WEIGHTS
        .iter()
        .filter(|(name, _)| reasons.contains(name))
        .map(|(_, weight)| weight)
        .sum();
    Coherence {
        score: (1.0 - lost).max(0.0),
        reasons: reasons.into_iter().map(str::to_owned).collect(),
        tls_family,
        http_family,
    }
}

fn family(name: &str, exact: bool) -> Family {
    Family {
        name: name.to_owned(),
        exact,
    }
}

/// The TLS family of a parsed ClientHello (the echo's `detail`) by shape, first rule that fits.
fn tls_family(detail: &Value) -> Option<&'static str> {
    let list = |key: &str| -> Vec<u64> {
        detail
            .get(key)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|item| {
                item.get("value")
                    .or_else(|| item.get("type").and_then(|t| t.get("value")))
                    .and_then(Value::as_u64)
            })
            .collect()
    };
    let ciphers = list("cipher_suites");
    let extensions = list("extensions");
    let grease = ciphers.iter().chain(&extensions).any(|&v| is_grease(v));
    let ciphers: Vec<u64> = ciphers.into_iter().filter(|&v| !is_grease(v)).collect();
    let has = |code: u64| extensions.contains(&code);
    if ciphers.is_empty() {
        None
    } else if grease && ALPS.iter().any(|&a| has(a)) {
        Some("chrome")
    } else if has(RECORD_SIZE_LIMIT) && has(DELEGATED_CREDENTIALS) {
        Some("firefox")
    } else if has(STATUS_REQUEST_V2) {
        Some("java")
    } else if ciphers.contains(&RENEGOTIATION_SCSV) && has(ENCRYPT_THEN_MAC) {
        Some("openssl")
    } else if ciphers.starts_with(&RUSTLS_FIRST) {
        Some("rustls")
    } else if ciphers.first().is_some_and(|&c| c >> 8 != 0x13) && !grease {
        // Go lists its TLS 1.2 suites first (its TLS 1.3 suites are not configurable).
        Some("go")
    } else {
        None
    }
}

/// The HTTP/2 family of an Akamai string `S|WU|P|PS` by shape: SETTINGS identifiers in order
/// and the pseudo-header order; exact when the whole string was recorded.
fn http_family(akamai: &str) -> Option<(&'static str, bool)> {
    let mut parts = akamai.split('|');
    let settings = parts.next()?;
    let pseudo = parts.nth(2)?;
    let ids: Vec<&str> = settings
        .split([';', ','])
        .filter_map(|s| s.split(':').next())
        .filter(|id| !id.is_empty())
        .collect();
    let ids = ids.join(",");
    families::H2_SHAPES
        .iter()
        .find(|shape| shape.settings_ids == ids && shape.pseudo == pseudo)
        .map(|shape| (shape.name, shape.exact.contains(&akamai)))
}

#[cfg(test)]
mod tests;
