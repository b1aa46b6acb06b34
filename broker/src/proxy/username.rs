//! The lease a proxy client asks for, written in its proxy user name, as gateways take a
//! country or a session from theirs: `class-identity-task-7f3a-country-de-origin-example.org`,
//! `task-abc-class-anonymous-gap-15`.
//!
//! The grammar, defined here once:
//!
//! - the name is `key-value` pairs joined by `-`, in any order, each key at most once;
//! - keys are case-insensitive: `class` (`identity`, `anonymous` or `stateless`, any case; the
//!   one key required), `task`, `origin`, `country` (two letters, any case), `gap` (the
//!   largest round-trip gap the exit may have, whole ms from 0 to [`MAX_GAP_MS`]: only an exit
//!   whose label measured one within it serves), `wait` (ms), and `holder`;
//! - a value is percent-decoded after the split, so a `-` inside a value is written `%2D`
//!   (`origin-my%2Dsite.example`); it must be UTF-8 without control characters, and at most
//!   [`MAX_VALUE`] bytes;
//! - `task` and `holder` keep their case; `origin` is a host name and is lower-cased.
//!
//! Anything else is refused with the part that is wrong: never a default lease for a typo.

use std::fmt;

use exitvoice_lease::{gap_limit, MAX_GAP_MS};

use crate::service::LeaseRequest;

/// The longest value accepted, in bytes after decoding (the broker's longest name).
pub const MAX_VALUE: usize = 256;

/// The longest user name read, in bytes.
pub const MAX_USER_NAME: usize = 1024;

/// A lease request as a proxy user name writes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    /// `identity`, `anonymous` or `stateless`, lower case.
    pub class: String,
    /// The task whose tunnels share one lease.
    pub task: Option<String>,
    /// The origin the tunnels go to (bans are per exit and origin).
    pub origin: Option<String>,
    /// The country the exit must leave from, upper case.
    pub country: Option<String>,
    /// The largest round-trip gap the exit may have, ms.
    pub max_gap_ms: Option<u32>,
    /// How long to wait for a free exit, ms (`None`: the proxy's `--proxy-wait`).
    pub wait_ms: Option<u64>,
    /// Who holds the lease (`None`: the client's address).
    pub holder: Option<String>,
}

/// What is wrong with a user name; its text names the part (never a password).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadUserName {
    /// Nothing, or only separators.
    #[error("the proxy user name is empty: it must name at least class-<class>")]
    Empty,
    /// Longer than [`MAX_USER_NAME`].
    #[error("the proxy user name is longer than {MAX_USER_NAME} bytes")]
    TooLong,
    /// A key with no value after it.
    #[error("key {0:?} has no value (pairs are key-value, joined by -)")]
    NoValue(String),
    /// An empty part between two separators.
    #[error("an empty part at position {0} (a - inside a value is written %2D)")]
    EmptyPart(usize),
    /// A key the grammar does not have.
    #[error("unknown key {0:?} (keys: class, task, origin, country, gap, wait, holder)")]
    UnknownKey(String),
    /// A key given twice.
    #[error("key {0:?} is given twice")]
    Twice(String),
    /// No `class` pair.
    #[error(
        "the proxy user name must name a class: class-identity, class-anonymous or class-stateless"
    )]
    NoClass,
    /// A value that does not decode, or that the key does not take.
    #[error("{key}: {why}")]
    BadValue {
        /// The key.
        key: String,
        /// What is wrong with its value.
        why: String,
    },
}

impl Asked {
    /// The request in `user`, by the grammar above.
    ///
    /// # Errors
    /// The first part that does not fit the grammar.
    pub fn parse(user: &str) -> Result<Self, BadUserName> {
        if user.len() > MAX_USER_NAME {
            return Err(BadUserName::TooLong);
        }
        if user.trim_matches('-').is_empty() {
            return Err(BadUserName::Empty);
        }
        let parts: Vec<&str> = user.split('-').collect();
        if let Some(at) = parts.iter().position(|part| part.is_empty()) {
            return Err(BadUserName::EmptyPart(at + 1));
        }
        let mut asked = Self::default();
        let mut seen: Vec<String> = Vec::new();
        for pair in parts.chunks(2) {
            let key = pair[0].to_ascii_lowercase();
            let Some(raw) = pair.get(1) else {
                return Err(BadUserName::NoValue(shown(&key)));
            };
            if seen.contains(&key) {
                return Err(BadUserName::Twice(key));
            }
            let value = decode(raw).map_err(|why| BadUserName::BadValue {
                key: shown(&key),
                why,
            })?;
            let bad = |why: String| BadUserName::BadValue {
                key: key.clone(),
                why,
            };
            match key.as_str() {
                "class" => {
                    let class = value.to_ascii_lowercase();
                    if !matches!(class.as_str(), "identity" | "anonymous" | "stateless") {
                        return Err(bad(format!(
                            "{} is not identity, anonymous or stateless",
                            quoted(&value)
                        )));
                    }
                    asked.class = class;
                }
                "task" => asked.task = Some(value),
                "holder" => asked.holder = Some(value),
                "origin" => {
                    if !value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'))
                    {
                        return Err(bad(format!("{} is not a host name", quoted(&value))));
                    }
                    asked.origin = Some(value.to_ascii_lowercase());
                }
                "country" => {
                    if value.len() != 2 || !value.bytes().all(|b| b.is_ascii_alphabetic()) {
                        return Err(bad(format!(
                            "{} is not two letters (ISO 3166-1 alpha-2)",
                            quoted(&value)
                        )));
                    }
                    asked.country = Some(value.to_ascii_uppercase());
                }
                "gap" => {
                    let ms = value
                        .parse::<u64>()
                        .ok()
                        .filter(|_| value.bytes().all(|b| b.is_ascii_digit()))
                        .and_then(gap_limit)
                        .ok_or_else(|| {
                            bad(format!(
                                "{} is not a whole number of ms from 0 to {MAX_GAP_MS}",
                                quoted(&value)
                            ))
                        })?;
                    asked.max_gap_ms = Some(ms);
                }
                "wait" => {
                    let ms = value
                        .parse::<u64>()
                        .ok()
                        .filter(|_| value.bytes().all(|b| b.is_ascii_digit()))
                        .ok_or_else(|| bad(format!("{} is not a number of ms", quoted(&value))))?;
                    asked.wait_ms = Some(ms);
                }
                _ => return Err(BadUserName::UnknownKey(shown(&key))),
            }
            seen.push(key);
        }
        if asked.class.is_empty() {
            return Err(BadUserName::NoClass);
        }
        Ok(asked)
    }

    /// The broker's request for it, held by `holder` unless the name says who.
    pub fn request(&self, holder: &str, ttl_ms: u64, wait_ms: u64) -> LeaseRequest {
        LeaseRequest {
            class: self.class.clone(),
            holder: self.holder.clone().unwrap_or_else(|| holder.to_owned()),
            task: self.task.clone(),
            origin: self.origin.clone(),
            ttl_ms: Some(ttl_ms),
            wait_ms: Some(self.wait_ms.unwrap_or(wait_ms)),
            egress: false,
            country: self.country.clone(),
            max_gap_ms: self.max_gap_ms.map(u64::from),
        }
    }
}

/// `raw` percent-decoded (RFC 3986 §2.1), as UTF-8 without control characters.
fn decode(raw: &str) -> Result<String, String> {
    let mut bytes = Vec::with_capacity(raw.len());
    let mut rest = raw.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = tail
                .get(..2)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| "a % not followed by two hex digits".to_owned())?;
            bytes.push(hex);
            rest = &tail[2..];
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 once decoded".to_owned())?;
    if text.is_empty() {
        return Err("empty once decoded".to_owned());
    }
    if text.len() > MAX_VALUE {
        return Err(format!("longer than {MAX_VALUE} bytes"));
    }
    if text.chars().any(char::is_control) {
        return Err("has control characters".to_owned());
    }
    Ok(text)
}

/// At most 40 characters of a key, for an error.
fn shown(key: &str) -> String {
    key.chars().take(40).collect()
}

/// A value quoted for an error, at most 40 characters.
fn quoted(value: &str) -> impl fmt::Display {
    format!("{:?}", value.chars().take(40).collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_in_any_order_any_key_case() {
        let asked = Asked::parse("Class-Identity-task-7f3a-COUNTRY-de-origin-Example.ORG").unwrap();
        assert_eq!(
            asked,
            Asked {
                class: "identity".into(),
                task: Some("7f3a".into()),
                origin: Some("example.org".into()),
                country: Some("DE".into()),
                max_gap_ms: None,
                wait_ms: None,
                holder: None,
            }
        );
        let again = Asked::parse("origin-example.org-country-DE-task-7f3a-class-identity");
        assert_eq!(again.unwrap(), asked);
    }

    #[test]
    fn values_are_percent_decoded_after_the_split() {
        let asked =
            Asked::parse("class-stateless-origin-my%2Dsite.example-task-A%2Fb-wait-250").unwrap();
        assert_eq!(asked.origin.as_deref(), Some("my-site.example"));
        assert_eq!(
            asked.task.as_deref(),
            Some("A/b"),
            "the task keeps its case"
        );
        assert_eq!(asked.wait_ms, Some(250));
    }

    #[test]
    fn a_gap_limit_is_whole_ms_up_to_a_minute() {
        let asked = Asked::parse("task-abc-gap-15-class-anonymous").unwrap();
        assert_eq!(asked.max_gap_ms, Some(15));
        assert_eq!(asked.request("p", 1, 1).max_gap_ms, Some(15));
        let edge = Asked::parse(&format!("class-stateless-GAP-{MAX_GAP_MS}")).unwrap();
        assert_eq!(edge.max_gap_ms, Some(MAX_GAP_MS));
        assert_eq!(
            Asked::parse("class-identity-gap-0").unwrap().max_gap_ms,
            Some(0)
        );
        assert_eq!(Asked::parse("class-identity").unwrap().max_gap_ms, None);
    }

    #[test]
    fn every_mistake_is_named() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("---", "empty"),
            ("class", "\"class\" has no value"),
            ("class-identity-task", "\"task\" has no value"),
            ("class--identity", "empty part at position 2"),
            ("class-identity-tsak-1", "unknown key \"tsak\""),
            ("class-identity-class-stateless", "\"class\" is given twice"),
            ("task-1", "must name a class"),
            ("class-identiy", "class: \"identiy\" is not identity"),
            (
                "class-identity-country-deu",
                "country: \"deu\" is not two letters",
            ),
            ("class-identity-wait-5s", "wait: \"5s\" is not a number"),
            (
                "class-identity-gap-15ms",
                "gap: \"15ms\" is not a whole number",
            ),
            (
                "class-identity-gap-%2D1",
                "gap: \"-1\" is not a whole number",
            ),
            ("class-identity-gap-+5", "gap: \"+5\" is not a whole number"),
            (
                "class-identity-gap-1.5",
                "gap: \"1.5\" is not a whole number",
            ),
            (
                "class-identity-gap-60001",
                "gap: \"60001\" is not a whole number",
            ),
            (
                "class-identity-gap-99999999999999999999",
                "gap: \"99999999999999999999\" is not a whole number",
            ),
            ("class-identity-gap-5-gap-6", "\"gap\" is given twice"),
            ("class-identity-wait-+5", "wait: \"+5\" is not a number"),
            ("class-identity-task-%zz", "task: a % not followed"),
            ("class-identity-task-%0a", "task: has control characters"),
            ("class-identity-task-%ff", "task: not UTF-8"),
            (
                "class-identity-origin-a%2Fb",
                "origin: \"a/b\" is not a host name",
            ),
        ];
        for (user, says) in cases {
            let error = Asked::parse(user).expect_err(user).to_string();
            assert!(error.contains(says), "{user:?}: {error}");
        }
        let long = format!("class-identity-task-{}", "a".repeat(MAX_VALUE + 1));
        assert!(Asked::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("longer than"));
        let longer = format!("class-identity-task-{}", "a".repeat(MAX_USER_NAME));
        assert_eq!(Asked::parse(&longer), Err(BadUserName::TooLong));
    }

    #[test]
    fn the_request_takes_the_proxy_defaults() {
        let asked = Asked::parse("class-anonymous-task-t1").unwrap();
        let request = asked.request("proxy@127.0.0.1", 5_000, 2_000);
        assert_eq!(request.class, "anonymous");
        assert_eq!(request.holder, "proxy@127.0.0.1");
        assert_eq!(request.task.as_deref(), Some("t1"));
        assert_eq!(
            (request.ttl_ms, request.wait_ms),
            (Some(5_000), Some(2_000))
        );
        let named = Asked::parse("class-anonymous-holder-w7-wait-0").unwrap();
        let request = named.request("proxy@127.0.0.1", 5_000, 2_000);
        assert_eq!((request.holder.as_str(), request.wait_ms), ("w7", Some(0)));
    }
}
