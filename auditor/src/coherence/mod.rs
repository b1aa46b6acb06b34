//! Coherence of a probe's echo: the echo's ClientHello detail and Akamai string read into the
//! inputs of [`exitvoice_schema::coherence`], which holds the rules, their weights and the family
//! table (the echo server judges its `/api/all` answers with the same functions, from its own
//! parser's model).
//!
//! An exit is judged by whether it *keeps* the baseline's coherence (its reasons are among the
//! baseline's), not by the score: the rustls persona with the `chrome` profile is incoherent on
//! purpose (rustls TLS, Chrome's HTTP/2). The User-Agent family is the echo's own reading
//! (`coherence.ua_family` in its answer): the echo keeps header names, not values, so the
//! User-Agent the origin received is known only to it.

use exitvoice_schema::coherence::{self, HelloShape};
use exitvoice_schema::{Alpn, Coherence, Echo, Families, Family, Http2Echo, TlsEcho};
use serde::Deserialize;

/// The coherence of one echo, with the User-Agent family and operating system the echo read
/// from the request, and the operating system its p0f database named for the SYN.
pub fn of_echo(echo: &Echo) -> Coherence {
    let ua = echo.coherence.as_ref().and_then(|c| c.ua_family.clone());
    let ua_os = echo.coherence.as_ref().and_then(|c| c.ua_os.as_deref());
    let tcp_os = echo.tcp.as_ref().and_then(|t| t.os.as_deref());
    of_parts(echo.tls.as_ref(), &echo.alpn, echo.http2.as_ref(), ua).with_os(ua_os, tcp_os)
}

/// The coherence of a connection's parts: its ClientHello fingerprints, ALPN, HTTP/2 echo and
/// the User-Agent's family where one was read (capture files have none).
pub fn of_parts(
    tls: Option<&TlsEcho>,
    alpn: &Alpn,
    http2: Option<&Http2Echo>,
    ua: Option<Family>,
) -> Coherence {
    let tls_family = tls.and_then(|tls| {
        // Only the two lists are read: the rest of the detail is skipped, not built.
        let detail: HelloCodes = serde_json::from_str(tls.detail.get()).unwrap_or_default();
        coherence::tls_family(&HelloShape {
            cipher_suites: &codes(&detail.cipher_suites),
            extensions: &codes(&detail.extensions),
            ja4: &tls.ja4,
        })
    });
    let families = Families {
        tls: tls_family,
        http: http2.and_then(|h2| coherence::http_family(&h2.akamai_fingerprint)),
        ua,
    };
    coherence::judge(alpn, families)
}

/// The two lists of the echo's ClientHello `detail` that the family rules read; a detail that
/// does not parse reads as empty lists.
#[derive(Default, Deserialize)]
struct HelloCodes {
    #[serde(default)]
    cipher_suites: Vec<Coded>,
    #[serde(default)]
    extensions: Vec<Coded>,
}

/// An item of those lists: `{"value": 4865, …}` for a cipher suite, `{"type": {"value": 0, …},
/// …}` for an extension.
#[derive(Deserialize)]
struct Coded {
    #[serde(default)]
    value: Option<u64>,
    #[serde(default, rename = "type")]
    kind: Option<Box<Coded>>,
}

/// The code points of a list, wire order.
fn codes(items: &[Coded]) -> Vec<u16> {
    items
        .iter()
        .filter_map(|item| {
            item.value
                .or_else(|| item.kind.as_ref().and_then(|kind| kind.value))
                .and_then(|v| u16::try_from(v).ok())
        })
        .collect()
}

#[cfg(test)]
mod tests;
