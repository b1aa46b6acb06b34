//! The exits file: TOML, or a plain list of proxy URLs (one per line, `#` comments).
//!
//! ```toml
//! [echo]
//! url = "https://echo.example:18443"          # where probes go
//! spki_sha256 = "9f86d08…"                    # hex sha256 of the echo certificate's SPKI
//!
//! [route]                                      # optional, the reader's own table (below)
//! quarantine_buckets = ["D"]
//!
//! [[exits]]
//! name = "squid"
//! url = "http://zoo:zoopass@127.0.0.1:13128"
//! tags = { tier = "dc", region = "eu" }
//!
//! [[exits]]
//! name = "gateway"
//! url = "http://customer-{session}:pw@gw.example:7777"
//! sessions = 4                                 # 4 exits gateway#1..#4, ids minted by us
//! sticky = "90m"                               # optional: the provider's sticky window
//! stateless_per_exit = 4                       # optional: the broker's, for this exit
//!
//! [[exits]]
//! name = "gateway-de"
//! url = "http://customer-{session}-country-{country}:pw@gw.example:7777"
//! sessions = 2
//! country = "de"                               # expected egress country; fills `{country}`
//! asn = 3320                                   # optional: expected egress network
//!
//! [[exits]]
//! name = "rotating"
//! url = "http://u:pw@rotating.example:8000"
//! rotate = true                                # each connection should leave from a new IP
//!
//! [[exits]]
//! name = "tls-proxy"
//! url = "https://u:pw@proxy.example:8443"       # TLS to the proxy, then CONNECT
//! proxy_ca = "/etc/exitvoice/proxy-ca.pem"     # optional; the system CA bundle otherwise
//! ```
//!
//! Parsing never panics and never quotes credentials in its errors: TOML errors are reduced to
//! their message and line number, URL errors to their kind.
//!
//! The `[route]` table belongs to one reader, the auditor (its route rule), so the file is
//! generic over it: [`ExitsFile<R>`] deserializes the table as `R` in the same pass as the rest
//! (its errors keep their line), and a reader with no use for it takes
//! [`serde::de::IgnoredAny`].

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use toml::Spanned;

use crate::duration::{self, DurationError};
use crate::{
    Exit, ProxyUrl, Session, SessionMinter, UrlError, COUNTRY_PLACEHOLDER, SESSION_PLACEHOLDER,
};

/// Largest exits file read (bytes): room for a pool of [`MAX_EXITS`] plain exits with long
/// URLs and tags, and a bound on what a broken or hostile file costs to read.
pub const MAX_CONFIG_BYTES: usize = 64 << 20;
/// Most sessions one gateway entry may expand to: a gateway serving a whole pool.
pub const MAX_SESSIONS: u32 = 100_000;
/// Most stateless leases one exit may carry at once (`stateless_per_exit`).
pub const MAX_STATELESS_PER_EXIT: u32 = 256;
/// Most exits one file may name, gateway sessions expanded: twice the largest pools the
/// broker and the auditor are measured at (100,000). Without it a small file of gateways with
/// many sessions each expands to billions of exits (found by fuzzing).
pub const MAX_EXITS: usize = 200_000;

/// The echo server probes go to, with its pinned certificate key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EchoTarget {
    /// Host name (SNI and CONNECT target) or IP literal.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// sha256 of the echo certificate's SubjectPublicKeyInfo (DER).
    pub spki_sha256: [u8; 32],
}

impl EchoTarget {
    /// Builds a target from an `https://host[:port][/]` URL and an SPKI pin: 64 hex digits or
    /// `sha256//<base64>`.
    ///
    /// # Errors
    /// [`ConfigError::EchoUrl`] or [`ConfigError::Pin`].
    pub fn new(url: &str, pin_hex: &str) -> Result<Self, ConfigError> {
        let rest = url
            .trim()
            .strip_prefix("https://")
            .ok_or(ConfigError::EchoUrl("must start with https://"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
            return Err(ConfigError::EchoUrl("expected https://host[:port]"));
        }
        let parsed = ProxyUrl::parse(&format!("https://{rest}"))
            .map_err(|_| ConfigError::EchoUrl("expected https://host[:port]"))?;
        let pin_text = pin_hex.trim();
        // Either hex, or the `sha256//<base64>` form `exitvoice serve` prints (curl's
        // --pinnedpubkey syntax).
        let pin = match pin_text.strip_prefix("sha256//") {
            Some(b64) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|_| ConfigError::Pin)?,
            None => hex::decode(pin_text).map_err(|_| ConfigError::Pin)?,
        };
        let spki_sha256 = <[u8; 32]>::try_from(pin.as_slice()).map_err(|_| ConfigError::Pin)?;
        Ok(Self {
            host: parsed.host,
            port: parsed.port,
            spki_sha256,
        })
    }

    /// `host:port` for CONNECT and logs.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// A parsed exits file; `R` is its `[route]` table (see the module docs).
#[derive(Clone, Debug)]
pub struct ExitsFile<R> {
    /// The echo target, if the file names one (a plain list never does).
    pub echo: Option<EchoTarget>,
    /// The exits, gateway sessions expanded.
    pub exits: Vec<Exit>,
    /// The `[route]` table, `R::default()` when the file has none.
    pub route: R,
}

/// Why an exits file was rejected. Never contains a password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file is larger than [`MAX_CONFIG_BYTES`].
    #[error("exits file is larger than {MAX_CONFIG_BYTES} bytes")]
    TooLarge,
    /// The file is not UTF-8.
    #[error("exits file is not UTF-8")]
    NotUtf8,
    /// TOML syntax or shape error (message and line only; the line's text is not quoted).
    #[error("exits file, line {line}: {message}")]
    Toml {
        /// 1-based line of the error, 0 if unknown.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// A proxy URL is invalid.
    #[error("exit {which}: {error}")]
    Url {
        /// The exit's name, or `line N` in a plain list.
        which: String,
        /// What is wrong.
        error: UrlError,
    },
    /// The echo URL is invalid.
    #[error("echo url: {0}")]
    EchoUrl(&'static str),
    /// The SPKI pin is not 64 hex digits.
    #[error("echo spki_sha256 must be a sha256: 64 hex digits or sha256//<base64>")]
    Pin,
    /// Two exits share a name.
    #[error("duplicate exit name {0:?}")]
    DuplicateName(String),
    /// An exit name is empty or has control characters.
    #[error("exit names must be non-empty printable text")]
    BadName,
    /// `sessions` without `{session}` in the user name, or a count out of range.
    #[error(
        "exit {0}: sessions needs `{{session}}` in the user name and a count 1..={MAX_SESSIONS}"
    )]
    BadSessions(String),
    /// `stateless_per_exit` above [`MAX_STATELESS_PER_EXIT`].
    #[error("exit {0}: stateless_per_exit must be 0..={MAX_STATELESS_PER_EXIT}")]
    BadStatelessPerExit(String),
    /// `country` is not two ASCII letters, or `{country}` is in the user name without it.
    #[error(
        "exit {0}: country must be two letters (ISO 3166-1 alpha-2), and `{{country}}` in the \
         user name needs it"
    )]
    BadCountry(String),
    /// A `sticky` window is refused.
    #[error("exits file, line {line}: exit {exit}: sticky {problem}")]
    Sticky {
        /// 1-based line of the value.
        line: usize,
        /// The exit's name.
        exit: String,
        /// What is wrong.
        problem: StickyError,
    },
    /// The file names no exit.
    #[error("exits file names no exit")]
    Empty,
    /// More than [`MAX_EXITS`] exits, gateway sessions expanded.
    #[error("exits file names more than {MAX_EXITS} exits (sessions included)")]
    TooManyExits,
}

/// Why a `sticky` window was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StickyError {
    /// The value is not a duration.
    #[error("{0}")]
    Duration(DurationError),
    /// The entry has no `sessions`: only a gateway session stays on one egress.
    #[error("needs `sessions`: a plain proxy has no session to keep")]
    WithoutSessions,
    /// The window is zero.
    #[error("must be longer than zero")]
    Zero,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile<R> {
    echo: Option<RawEcho>,
    #[serde(default)]
    route: Option<R>,
    #[serde(default)]
    exits: Vec<RawExit>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEcho {
    url: String,
    spki_sha256: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExit {
    name: String,
    url: String,
    #[serde(default)]
    tags: BTreeMap<String, String>,
    sessions: Option<u32>,
    sticky: Option<Spanned<String>>,
    proxy_ca: Option<PathBuf>,
    #[serde(default)]
    rotate: bool,
    stateless_per_exit: Option<u32>,
    country: Option<String>,
    asn: Option<u32>,
}

impl<R: DeserializeOwned + Default> ExitsFile<R> {
    /// Parses an exits file from bytes: TOML, or a plain list of proxy URLs.
    ///
    /// # Errors
    /// A [`ConfigError`]; never panics on any input.
    pub fn parse(bytes: &[u8]) -> Result<Self, ConfigError> {
        if bytes.len() > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLarge);
        }
        let text = std::str::from_utf8(bytes).map_err(|_| ConfigError::NotUtf8)?;
        if is_plain_list(text) {
            return parse_plain(text);
        }
        let raw: RawFile<R> = toml::from_str(text).map_err(|error| ConfigError::Toml {
            line: error.span().map_or(0, |span| line_of(text, span.start)),
            message: error.message().to_owned(),
        })?;
        let echo = raw
            .echo
            .map(|echo| EchoTarget::new(&echo.url, &echo.spki_sha256))
            .transpose()?;
        let minter = SessionMinter::new();
        let mut exits = Vec::new();
        for raw_exit in raw.exits {
            if raw_exit.name.trim().is_empty() || raw_exit.name.chars().any(char::is_control) {
                return Err(ConfigError::BadName);
            }
            let mut proxy = ProxyUrl::parse(&raw_exit.url).map_err(|error| ConfigError::Url {
                which: raw_exit.name.clone(),
                error,
            })?;
            fill_country(&mut proxy, &raw_exit.name, raw_exit.country.as_deref())?;
            let sticky = raw_exit
                .sticky
                .as_ref()
                .map(|value| sticky(text, &raw_exit.name, raw_exit.sessions.is_some(), value))
                .transpose()?;
            if raw_exit
                .stateless_per_exit
                .is_some_and(|n| n > MAX_STATELESS_PER_EXIT)
            {
                return Err(ConfigError::BadStatelessPerExit(raw_exit.name));
            }
            let adding = raw_exit.sessions.map_or(1, |count| count as usize);
            if exits.len().saturating_add(adding) > MAX_EXITS {
                return Err(ConfigError::TooManyExits);
            }
            match raw_exit.sessions {
                None => exits.push(Exit {
                    name: raw_exit.name,
                    proxy,
                    tags: raw_exit.tags,
                    session: None,
                    proxy_ca: raw_exit.proxy_ca,
                    rotate: raw_exit.rotate,
                    stateless_per_exit: raw_exit.stateless_per_exit,
                    country: raw_exit.country,
                    asn: raw_exit.asn,
                }),
                Some(count) => {
                    let templated = proxy
                        .username
                        .as_deref()
                        .is_some_and(|user| user.contains(SESSION_PLACEHOLDER));
                    if !templated || count == 0 || count > MAX_SESSIONS {
                        return Err(ConfigError::BadSessions(raw_exit.name));
                    }
                    for slot in 1..=count {
                        exits.push(Exit {
                            name: format!("{}#{slot}", raw_exit.name),
                            proxy: proxy.clone(),
                            tags: raw_exit.tags.clone(),
                            session: Some(Session {
                                slot,
                                id: minter.mint(),
                                sticky,
                            }),
                            proxy_ca: raw_exit.proxy_ca.clone(),
                            rotate: raw_exit.rotate,
                            stateless_per_exit: raw_exit.stateless_per_exit,
                            country: raw_exit.country.clone(),
                            asn: raw_exit.asn,
                        });
                    }
                }
            }
        }
        check_names(&exits)?;
        Ok(Self {
            echo,
            exits,
            route: raw.route.unwrap_or_default(),
        })
    }
}

/// Checks an exit's `country` (two ASCII letters) and puts it in place of `{country}` in the
/// proxy user name, which needs one.
fn fill_country(
    proxy: &mut ProxyUrl,
    exit: &str,
    country: Option<&str>,
) -> Result<(), ConfigError> {
    let bad = || ConfigError::BadCountry(exit.to_owned());
    if country.is_some_and(|c| c.len() != 2 || !c.bytes().all(|b| b.is_ascii_alphabetic())) {
        return Err(bad());
    }
    if let Some(user) = &mut proxy.username {
        if user.contains(COUNTRY_PLACEHOLDER) {
            *user = user.replace(COUNTRY_PLACEHOLDER, country.ok_or_else(bad)?);
        }
    }
    Ok(())
}

/// A gateway's `sticky` window: a duration (hours allowed) longer than zero, on an entry with
/// `sessions`. A plain proxy has no session to keep, so the key there is a mistake, not a no-op.
fn sticky(
    text: &str,
    exit: &str,
    gateway: bool,
    value: &Spanned<String>,
) -> Result<Duration, ConfigError> {
    let problem = if gateway {
        match duration::parse(value.get_ref(), true) {
            Ok(window) if window.is_zero() => StickyError::Zero,
            Ok(window) => return Ok(window),
            Err(error) => StickyError::Duration(error),
        }
    } else {
        StickyError::WithoutSessions
    };
    Err(ConfigError::Sticky {
        line: line_of(text, value.span().start),
        exit: exit.to_owned(),
        problem,
    })
}

/// The 1-based line of byte `offset` in `text`, 0 when the offset is past its end.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes().get(..offset).map_or(0, |before| {
        before.iter().filter(|b| **b == b'\n').count() + 1
    })
}

fn is_plain_list(text: &str) -> bool {
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .peekable();
    lines.peek().is_some() && lines.all(|line| line.contains("://") && !line.contains('='))
}

fn parse_plain<R: Default>(text: &str) -> Result<ExitsFile<R>, ConfigError> {
    let mut exits = Vec::new();
    let mut names = HashSet::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if exits.len() >= MAX_EXITS {
            return Err(ConfigError::TooManyExits);
        }
        let proxy = ProxyUrl::parse(line).map_err(|error| ConfigError::Url {
            which: format!("line {}", index + 1),
            error,
        })?;
        let mut name = format!("{}://{}", proxy.scheme.as_str(), proxy.authority());
        if !names.insert(name.clone()) {
            name = format!("{name}#{}", index + 1);
        }
        exits.push(Exit::new(name, proxy));
    }
    check_names(&exits)?;
    Ok(ExitsFile {
        echo: None,
        exits,
        route: R::default(),
    })
}

fn check_names(exits: &[Exit]) -> Result<(), ConfigError> {
    if exits.is_empty() {
        return Err(ConfigError::Empty);
    }
    let mut names = HashSet::new();
    for exit in exits {
        if !names.insert(exit.name.as_str()) {
            return Err(ConfigError::DuplicateName(exit.name.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde::de::IgnoredAny;

    use super::*;
    use crate::ProxyScheme;

    fn parse(bytes: &[u8]) -> Result<ExitsFile<IgnoredAny>, ConfigError> {
        ExitsFile::parse(bytes)
    }

    const PIN: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    #[test]
    fn toml_file_with_tags_and_sessions() {
        let text = format!(
            r#"
[echo]
url = "https://localhost:18443/"
spki_sha256 = "{PIN}"

[[exits]]
name = "squid"
url = "http://zoo:p%40ss@127.0.0.1:13128"
tags = {{ tier = "dc", region = "eu" }}

[[exits]]
name = "gw"
url = "socks5h://cust-{{session}}:pw@127.0.0.1:11080"
sessions = 3
sticky = "90m"
"#
        );
        let file = parse(text.as_bytes()).unwrap();
        let echo = file.echo.unwrap();
        assert_eq!((echo.host.as_str(), echo.port), ("localhost", 18443));
        assert_eq!(hex::encode(echo.spki_sha256), PIN);
        let names: Vec<_> = file.exits.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["squid", "gw#1", "gw#2", "gw#3"]);
        assert_eq!(
            file.exits[0].tags.get("region").map(String::as_str),
            Some("eu")
        );
        assert_eq!(
            file.exits[0].credentials().unwrap().1.unwrap().expose(),
            "p@ss"
        );
        let ids: HashSet<_> = file.exits[1..]
            .iter()
            .map(|e| e.session.as_ref().unwrap().id.clone())
            .collect();
        assert_eq!(ids.len(), 3, "each session its own id");
        let (user, _) = file.exits[2].credentials().unwrap();
        assert!(user.starts_with("cust-") && user.len() == 5 + 16, "{user}");
        assert_eq!(file.exits[1].proxy.scheme, ProxyScheme::Socks5h);
        for gateway in &file.exits[1..] {
            let sticky = gateway.session.as_ref().and_then(|s| s.sticky);
            assert_eq!(
                sticky,
                Some(Duration::from_secs(90 * 60)),
                "{}",
                gateway.name
            );
        }
    }

    /// A gateway of two sessions on lines 1 to 4: a `sticky` appended is on line 5.
    const GATEWAY: &str =
        "[[exits]]\nname = \"gw\"\nurl = \"http://u-{session}:s3cret@h:1\"\nsessions = 2\n";

    #[test]
    fn country_fills_the_user_name_and_is_two_letters() {
        let file = parse(
            b"[[exits]]\nname = \"gw\"\nurl = \"http://u-{session}-cc-{country}:s3cret@h:1\"\n\
              sessions = 2\ncountry = \"de\"\nasn = 3320\n",
        )
        .unwrap();
        let exit = &file.exits[1];
        assert_eq!(
            (exit.country.as_deref(), exit.asn),
            (Some("de"), Some(3320))
        );
        let (user, _) = exit.credentials().unwrap();
        let id = &exit.session.as_ref().unwrap().id;
        assert_eq!(user, format!("u-{id}-cc-de"));
        assert_eq!(exit.redacted_url(), "http://u-{session}-cc-de:***@h:1");
        for bad in [
            "url = \"http://u-{country}:p@h:1\"\n",
            "url = \"http://u:p@h:1\"\ncountry = \"DEU\"\n",
            "url = \"http://u:p@h:1\"\ncountry = \"1x\"\n",
        ] {
            let error = parse(format!("[[exits]]\nname = \"x\"\n{bad}").as_bytes());
            assert!(
                matches!(&error, Err(ConfigError::BadCountry(name)) if name == "x"),
                "{bad}: {:?}",
                error.map(|_| ())
            );
        }
        let plain = parse(b"[[exits]]\nname = \"p\"\nurl = \"http://u:p@h:1\"\n").unwrap();
        assert_eq!(
            (plain.exits[0].country.as_ref(), plain.exits[0].asn),
            (None, None)
        );
    }

    #[test]
    fn stateless_per_exit_reaches_every_session_and_is_bounded() {
        let file = parse(format!("{GATEWAY}stateless_per_exit = 0\n").as_bytes()).unwrap();
        assert!(file.exits.iter().all(|e| e.stateless_per_exit == Some(0)));
        assert_eq!(
            parse(GATEWAY.as_bytes()).unwrap().exits[0].stateless_per_exit,
            None
        );
        let error = parse(format!("{GATEWAY}stateless_per_exit = 257\n").as_bytes());
        assert!(
            matches!(&error, Err(ConfigError::BadStatelessPerExit(name)) if name == "gw"),
            "{:?}",
            error.map(|_| ())
        );
        assert!(parse(format!("{GATEWAY}stateless_per_exit = -1\n").as_bytes()).is_err());
    }

    #[test]
    fn sticky_windows_take_the_command_line_grammar() {
        for (value, window) in [("90m", 5400), ("1.5h", 5400), ("600", 600), ("30s", 30)] {
            let file = parse(format!("{GATEWAY}sticky = \"{value}\"\n").as_bytes()).unwrap();
            let sticky = file.exits[0].session.as_ref().and_then(|s| s.sticky);
            assert_eq!(sticky, Some(Duration::from_secs(window)), "{value}");
        }
        let file = parse(GATEWAY.as_bytes()).unwrap();
        assert_eq!(file.exits[0].session.as_ref().unwrap().sticky, None);
    }

    #[test]
    fn a_refused_sticky_window_names_its_line_and_what_is_wrong() {
        let plain = "[[exits]]\nname = \"plain\"\nurl = \"http://u:s3cret@h:2\"\n";
        for (text, line, problem, message) in [
            (
                format!("{GATEWAY}sticky = \"90x\"\n"),
                5,
                StickyError::Duration(duration::parse("90x", true).unwrap_err()),
                "exits file, line 5: exit gw: sticky `90x`: unit must be ms, s, m or h",
            ),
            (
                format!("{GATEWAY}sticky = \"0m\"\n"),
                5,
                StickyError::Zero,
                "exits file, line 5: exit gw: sticky must be longer than zero",
            ),
            (
                format!("{GATEWAY}\n{plain}sticky = \"90m\"\n"),
                9,
                StickyError::WithoutSessions,
                "exits file, line 9: exit plain: sticky needs `sessions`: a plain proxy has no \
                 session to keep",
            ),
        ] {
            let error = parse(text.as_bytes()).err();
            assert_eq!(
                error.as_ref().map(ToString::to_string).as_deref(),
                Some(message)
            );
            let Some(ConfigError::Sticky {
                line: at,
                problem: refused,
                ..
            }) = error
            else {
                panic!("not a sticky error: {text}");
            };
            assert_eq!((at, refused), (line, problem));
        }
    }

    #[test]
    fn pin_in_curl_form() {
        // sha256//<base64> of the same 32 bytes as PIN.
        let echo = EchoTarget::new(
            "https://127.0.0.1:1",
            "sha256//ABEiM0RVZneImaq7zN3u/wARIjNEVWZ3iJmqu8zd7v8=",
        )
        .unwrap();
        assert_eq!(hex::encode(echo.spki_sha256), PIN);
        assert!(EchoTarget::new("https://h", "sha256//AAAA").is_err());
    }

    #[test]
    fn plain_list_of_urls() {
        let text = "# exits\nhttp://zoo:zoopass@127.0.0.1:13128\n\nsocks5h://127.0.0.1:11080\n";
        let file = parse(text.as_bytes()).unwrap();
        assert!(file.echo.is_none());
        let names: Vec<_> = file.exits.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            ["http://127.0.0.1:13128", "socks5h://127.0.0.1:11080"]
        );
    }

    #[test]
    fn hostile_files_are_typed_errors_without_secrets() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![0xff, 0xfe, 0x00], "not UTF-8"),
            (vec![b'#'; MAX_CONFIG_BYTES + 1], "larger"),
            (b"".to_vec(), "no exit"),
            (b"[[exits]]\nname = \"a\"\nurl = \"http://u:s3cret@h:1\"\nbogus = 1\n".to_vec(), "line"),
            (b"[[exits]\nurl = \"http://u:s3cret@h:1\"".to_vec(), "line"),
            (b"[[exits]]\nname = \"a\"\nurl = \"ftp://u:s3cret@h:1\"\n".to_vec(), "exit a"),
            (
                b"[[exits]]\nname=\"a\"\nurl=\"http://u:s3cret@h:1\"\n[[exits]]\nname=\"a\"\nurl=\"http://h:2\"\n"
                    .to_vec(),
                "duplicate",
            ),
            (b"[[exits]]\nname=\"\"\nurl=\"http://h:2\"\n".to_vec(), "non-empty"),
            (b"[[exits]]\nname=\"g\"\nurl=\"http://u:s3cret@h:2\"\nsessions=2\n".to_vec(), "sessions"),
            (b"[[exits]]\nname=\"g\"\nurl=\"http://u-{session}:s3cret@h:2\"\nsessions=0\n".to_vec(), "sessions"),
            (b"[echo]\nurl=\"http://h\"\nspki_sha256=\"00\"\n[[exits]]\nname=\"a\"\nurl=\"http://h:2\"\n".to_vec(), "https"),
            (b"[echo]\nurl=\"https://h\"\nspki_sha256=\"zz\"\n[[exits]]\nname=\"a\"\nurl=\"http://h:2\"\n".to_vec(), "sha256"),
            (b"http://u:s3cret@h:99999\n".to_vec(), "line 1"),
            (b"exits = 5\n".to_vec(), "line"),
            (format!("{GATEWAY}sticky = 90\n").into_bytes(), "line 5"),
            (format!("{GATEWAY}sticky = \"-1m\"\n").into_bytes(), "line 5"),
        ];
        for (bytes, expected) in cases {
            let error = parse(&bytes).err().map(|e| e.to_string());
            let error =
                error.unwrap_or_else(|| panic!("accepted {:?}", String::from_utf8_lossy(&bytes)));
            assert!(error.contains(expected), "{error:?} lacks {expected:?}");
            assert!(!error.contains("s3cret"), "{error:?} leaks the password");
        }
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn arbitrary_exit_entries_never_panic(name in "\\PC{0,12}", url in "\\PC{0,60}", sessions in 0u32..3000) {
            let text = format!("[[exits]]\nname = {name:?}\nurl = {url:?}\nsessions = {sessions}\n");
            let _ = parse(text.as_bytes());
        }

        #[test]
        fn arbitrary_sticky_windows_never_panic(sticky in "\\PC{0,24}", gateway in proptest::bool::ANY) {
            let entry = if gateway { GATEWAY } else { "[[exits]]\nname = \"p\"\nurl = \"http://h:1\"\n" };
            let _ = parse(format!("{entry}sticky = {sticky:?}\n").as_bytes());
        }

        #[test]
        fn any_password_survives_percent_encoding(password in "[ -~]{1,40}") {
            let encoded = percent_encoding::utf8_percent_encode(&password, percent_encoding::NON_ALPHANUMERIC);
            let url = ProxyUrl::parse(&format!("http://u:{encoded}@127.0.0.1:1")).unwrap();
            proptest::prop_assert_eq!(url.password.as_ref().map(|p| p.expose()), Some(password.as_str()));
            proptest::prop_assert_eq!(url.redacted(), "http://u:***@127.0.0.1:1");
        }
    }
}
