//! Coherence: does the story an observation tells hang together? Which client family its TLS
//! voice looks like ([`tls_family`]), which its HTTP/2 voice looks like ([`http_family`]), which
//! its User-Agent claims ([`ua_family`]), and a score in [0, 1] (1 = coherent) lowered by each
//! named reason ([`judge`]):
//!
//! | reason | weight | when |
//! |---|---|---|
//! | `alpn_h2_spoke_http1` | 0.5 | ALPN negotiated h2, but the client spoke HTTP/1.1 |
//! | `tls_family_ne_http_family` | 0.4 | both families known, and that TLS stack does not carry that HTTP/2 stack |
//! | `ua_family_ne_tls_family` | 0.4 | both families known, and the claimed client does not use that TLS stack |
//! | `browser_tls_library_h2` | 0.3 | a browser's TLS (GREASE) with a library's (or no known) HTTP/2 shape |
//! | `ua_os_ne_tcp_os` | 0.3 | both known, and the operating system the User-Agent claims ([`ua_os`]) is not of the kin of the one the SYN's TCP stack shows ([`Coherence::with_os`]) |
//!
//! The rules and the family table live here, in the data contract, and nowhere else: the echo
//! server judges each `/api/all` answer from what it saw (its parsed ClientHello, its Akamai
//! string, the request's User-Agent), and the auditor judges each probe's echo, with the same
//! functions. Each caller only reads its own inputs: the echo its parser's model, the auditor the
//! echo's JSON.

mod families;
mod http_family;
mod tls_family;
mod user_agent;

use serde::{Deserialize, Serialize};

use crate::alpn::{Alpn, Spoken};

pub use http_family::http_family;
pub use tls_family::{tls_family, HelloShape};
pub use user_agent::{ua_family, ua_os};

/// How coherent an observation's story is: the client families its TLS and HTTP/2 voices look
/// like and its User-Agent claims, and a score in [0, 1] (1 = coherent) lowered by each named
/// reason (module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Coherence {
    /// 1 minus the weights of the reasons, at least 0.
    pub score: f64,
    /// Why the story does not hang together: `alpn_h2_spoke_http1`,
    /// `tls_family_ne_http_family`, `ua_family_ne_tls_family`, `browser_tls_library_h2`.
    pub reasons: Vec<String>,
    /// The family the TLS voice looks like, if any.
    pub tls_family: Option<Family>,
    /// The family the HTTP/2 voice looks like, if any.
    pub http_family: Option<Family>,
    /// The family the User-Agent header claims, if one was judged and recognised (absent in
    /// records written before it, and where no User-Agent was seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ua_family: Option<Family>,
    /// The operating system the User-Agent claims ([`ua_os`]: `windows`, `macos`, `ios`,
    /// `android`, `chromeos`, `linux`), when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ua_os: Option<String>,
    /// The operating system the SYN's TCP stack shows (the name a p0f signature database gives
    /// it), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_os: Option<String>,
}

impl Coherence {
    /// This judgement with the operating system the User-Agent claims and the one the TCP
    /// stack shows: `ua_os_ne_tcp_os` when both are known and not kin (Android and ChromeOS
    /// run Linux's stack, iOS macOS's).
    #[must_use]
    pub fn with_os(mut self, ua_os: Option<&str>, tcp_os: Option<&str>) -> Self {
        if let (Some(claimed), Some(shown)) = (ua_os.and_then(os_kin), tcp_os.and_then(os_kin)) {
            if claimed != shown {
                self.reasons.push("ua_os_ne_tcp_os".to_owned());
                self.score = score(&self.reasons);
            }
        }
        self.ua_os = ua_os.map(str::to_owned);
        self.tcp_os = tcp_os.map(str::to_owned);
        self
    }
}

/// The kin of an operating system's name, as the User-Agent or a p0f label writes it (`Linux
/// 3.11 and newer`, `Windows 7 or 8`, `Mac OS X 10.x`): whose TCP stack it runs (`windows`,
/// `apple`, `linux`, `freebsd`, `openbsd`). `None` for a name it does not know.
pub fn os_kin(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    let kins: [(&str, &str); 9] = [
        ("windows", "windows"),
        ("mac os", "apple"),
        ("macos", "apple"),
        ("ios", "apple"),
        ("android", "linux"),
        ("chromeos", "linux"),
        ("linux", "linux"),
        ("freebsd", "freebsd"),
        ("openbsd", "openbsd"),
    ];
    kins.iter()
        .find(|(token, _)| name.contains(token))
        .map(|(_, kin)| *kin)
}

/// A client family (`chrome`, `firefox`, `openssl`, `go`, `java`, `rustls`, `nghttp2`, `node`,
/// `python-h2`, `rust-h2`; User-Agent families also `safari`, `curl`, `python`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Family {
    /// Family name.
    pub name: String,
    /// The fingerprint is one recorded in `captures/`, not only the family's shape (always
    /// false for a User-Agent: it is a claim, not a fingerprint).
    pub exact: bool,
}

impl Family {
    fn new(name: &str, exact: bool) -> Self {
        Self {
            name: name.to_owned(),
            exact,
        }
    }
}

/// The families one observation shows, each `None` when unknown or not seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Families {
    /// From the ClientHello ([`tls_family`]).
    pub tls: Option<Family>,
    /// From the HTTP/2 Akamai string ([`http_family`]).
    pub http: Option<Family>,
    /// From the User-Agent header ([`ua_family`]).
    pub ua: Option<Family>,
}

/// A family's name, if known.
fn name(family: &Option<Family>) -> Option<&str> {
    family.as_ref().map(|f| f.name.as_str())
}

/// The reasons and their weights in tenths (module docs), in the order they are reported.
/// Summed as integers, so a score is the double nearest a whole number of tenths (`0.2`, not
/// `1.0 - 0.4 - 0.4 = 0.19999999999999996`).
const WEIGHTS: [(&str, u8); 5] = [
    ("alpn_h2_spoke_http1", 5),
    ("tls_family_ne_http_family", 4),
    ("ua_family_ne_tls_family", 4),
    ("browser_tls_library_h2", 3),
    ("ua_os_ne_tcp_os", 3),
];

/// 1 minus the weights of `reasons`, at least 0, in whole tenths.
fn score<S: AsRef<str>>(reasons: &[S]) -> f64 {
    let lost: u8 = WEIGHTS
        .iter()
        .filter(|(reason, _)| reasons.iter().any(|r| r.as_ref() == *reason))
        .map(|(_, weight)| weight)
        .sum();
    f64::from(10_u8.saturating_sub(lost)) / 10.0
}

/// Judges one observation: its ALPN facts and the families it shows.
pub fn judge(alpn: &Alpn, families: Families) -> Coherence {
    let Families { tls, http, ua } = families;
    let mut reasons = Vec::new();
    if alpn.negotiated.as_deref() == Some("h2") && alpn.spoken == Spoken::Http1 {
        reasons.push("alpn_h2_spoke_http1");
    }
    if let (Some(t), Some(h)) = (name(&tls), name(&http)) {
        if !families::carries(families::TLS_CARRIES_H2, t, h) {
            reasons.push("tls_family_ne_http_family");
        }
    }
    if let (Some(u), Some(t)) = (name(&ua), name(&tls)) {
        if !families::carries(families::UA_USES_TLS, u, t) {
            reasons.push("ua_family_ne_tls_family");
        }
    }
    let browser = |f: &Option<Family>| name(f).is_some_and(|n| families::BROWSERS.contains(&n));
    if browser(&tls) && alpn.spoken == Spoken::H2 && !browser(&http) {
        reasons.push("browser_tls_library_h2");
    }
    Coherence {
        score: score(&reasons),
        reasons: reasons.into_iter().map(str::to_owned).collect(),
        tls_family: tls,
        http_family: http,
        ua_family: ua,
        ua_os: None,
        tcp_os: None,
    }
}

#[cfg(test)]
mod tests;
