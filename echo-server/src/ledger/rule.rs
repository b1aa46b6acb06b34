//! The rule of the h3 downgrade ledger (docs/quic.md, "The h3 downgrade ledger"): what is
//! counted of one client identity as its TCP and HTTP/3 requests and QUIC attempts come, and the
//! verdict those counts give (`never_tries_h3` and the others). Pure: times are Unix
//! milliseconds given by the caller, so the rule is tested without a clock.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// `ma` of the `alt-svc` we send, in milliseconds (RFC 7838 section 3.1).
pub const ALT_SVC_MAX_AGE_MS: i64 = 86_400_000;
/// When a client that keeps coming back over TCP `never_tries_h3` (docs/quic.md, the verdict
/// table): `returns` TCP connections after the first `alt-svc`, each at least `spacing_ms` after
/// the one counted before it (Chrome races QUIC only for a new connection, so quick reloads say
/// little), the last at least `span_ms` after that `alt-svc`, all within `ma`, and no QUIC attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeverRule {
    /// Spaced TCP returns needed.
    pub returns: u32,
    /// Least time between two counted returns (the first counts from the `alt-svc`).
    pub spacing_ms: i64,
    /// Least time from the first `alt-svc` to the last counted return.
    pub span_ms: i64,
}

impl Default for NeverRule {
    /// The documented rule: 3 returns, 2 s apart, over 60 s.
    fn default() -> Self {
        Self {
            returns: 3,
            spacing_ms: 2_000,
            span_ms: 60_000,
        }
    }
}

/// A TCP request, as the ledger needs it.
#[derive(Clone, Copy, Debug)]
pub struct TcpVisit<'a> {
    /// The client's IP.
    pub ip: IpAddr,
    /// The TLS voice of its connection.
    pub tls_voice_id: &'a str,
    /// Its connection's id.
    pub conn_id: &'a str,
    /// Its probe token.
    pub token: Option<&'a str>,
    /// When, Unix ms.
    pub time_ms: i64,
    /// Whether its answer carries `alt-svc`.
    pub alt_svc: bool,
}

/// An HTTP/3 request, as the ledger needs it.
#[derive(Clone, Copy, Debug)]
pub struct H3Visit<'a> {
    /// The client's IP.
    pub ip: IpAddr,
    /// Its probe token.
    pub token: Option<&'a str>,
    /// The QUIC voice of its connection.
    pub quic_voice_id: Option<&'a str>,
    /// When, Unix ms.
    pub time_ms: i64,
}

/// What the ledger knows of one identity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The client's IP over TCP.
    pub client_ip: IpAddr,
    /// The TLS voice of its TCP connections.
    pub tls_voice_id: String,
    /// Probe tokens its TCP requests carried, first seen first.
    pub tokens: Vec<String>,
    /// First TCP request.
    pub first_tcp_ms: i64,
    /// Last TCP request.
    pub last_tcp_ms: i64,
    /// TCP requests seen.
    pub tcp_requests: u32,
    /// Distinct TCP connections seen.
    pub tcp_connections: u32,
    /// When the first `alt-svc` went to it (`None` with QUIC off).
    pub alt_svc_first_ms: Option<i64>,
    /// TCP connections opened after the first `alt-svc`.
    pub tcp_connections_after_alt_svc: u32,
    /// Of those, the ones at least the rule's spacing after the one counted before.
    #[serde(default)]
    pub spaced_returns: u32,
    /// The last spaced return.
    #[serde(default)]
    pub last_spaced_return_ms: Option<i64>,
    /// The first QUIC connection attempt from its IP after `alt-svc` (a client Initial that
    /// quinn took as a new connection).
    pub first_quic_attempt_ms: Option<i64>,
    /// QUIC connection attempts from its IP after `alt-svc`.
    pub quic_attempts: u32,
    /// Its first HTTP/3 request.
    pub first_h3_ms: Option<i64>,
    /// HTTP/3 requests matched to it.
    pub h3_requests: u32,
    /// The source IP of its HTTP/3 requests (may differ from `client_ip`).
    pub quic_src_ip: Option<IpAddr>,
    /// The QUIC voice of its first HTTP/3 connection.
    pub quic_voice_id: Option<String>,
    /// The last TCP connection seen, to count distinct ones.
    #[serde(skip)]
    last_conn_id: String,
    /// When the entry last changed.
    #[serde(default)]
    pub updated_ms: i64,
}

/// The ledger's verdict on an identity at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// `alt-svc` sent; not enough TCP returns yet.
    Pending,
    /// A QUIC connection attempt came from its IP after `alt-svc`, but no HTTP/3 request (yet).
    AttemptedH3,
    /// An HTTP/3 request came from its IP (or with its token).
    H3Ok,
    /// An HTTP/3 request carried its token from another IP: UDP leaves by another path.
    QuicElsewhere,
    /// Spaced TCP returns after the first `alt-svc` as the [`NeverRule`] says, within `ma`,
    /// and no QUIC attempt.
    NeverTriesH3,
    /// `ma` passed without enough evidence, or no `alt-svc` was ever sent (QUIC off).
    Expired,
}

impl Entry {
    /// A new identity's entry, before its first TCP request is counted.
    pub(super) fn new(visit: &TcpVisit<'_>) -> Self {
        Self {
            client_ip: visit.ip,
            tls_voice_id: visit.tls_voice_id.to_owned(),
            tokens: Vec::new(),
            first_tcp_ms: visit.time_ms,
            last_tcp_ms: visit.time_ms,
            tcp_requests: 0,
            tcp_connections: 0,
            alt_svc_first_ms: None,
            tcp_connections_after_alt_svc: 0,
            spaced_returns: 0,
            last_spaced_return_ms: None,
            first_quic_attempt_ms: None,
            quic_attempts: 0,
            first_h3_ms: None,
            h3_requests: 0,
            quic_src_ip: None,
            quic_voice_id: None,
            last_conn_id: String::new(),
            updated_ms: visit.time_ms,
        }
    }

    /// Counts a TCP request of this identity; a new connection spaced as `rule` says after the
    /// one counted before is a spaced return.
    pub(super) fn count_tcp(&mut self, visit: &TcpVisit<'_>, rule: &NeverRule) {
        self.last_tcp_ms = visit.time_ms;
        self.updated_ms = visit.time_ms;
        self.tcp_requests += 1;
        if self.last_conn_id != visit.conn_id {
            self.tcp_connections += 1;
            if let Some(alt_svc) = self.alt_svc_first_ms {
                self.tcp_connections_after_alt_svc += 1;
                let since = visit.time_ms - self.last_spaced_return_ms.unwrap_or(alt_svc);
                if since >= rule.spacing_ms {
                    self.spaced_returns += 1;
                    self.last_spaced_return_ms = Some(visit.time_ms);
                }
            }
            // In place: the id's buffer is reused.
            self.last_conn_id.clear();
            self.last_conn_id.push_str(visit.conn_id);
        }
        if visit.alt_svc && self.alt_svc_first_ms.is_none() {
            self.alt_svc_first_ms = Some(visit.time_ms);
        }
        if let Some(token) = visit.token {
            if !self.tokens.iter().any(|t| t == token) && self.tokens.len() < 16 {
                self.tokens.push(token.to_owned());
            }
        }
    }

    /// Counts an HTTP/3 request when it is this identity's: one with a token is the identity's
    /// whose TCP requests carried it, and no other's (a token no TCP request carried is another
    /// client's probe, the auditor's own QUIC probe among them); one without is the identity's
    /// of its IP that was sent `alt-svc` within `ma`. Says whether it counted.
    pub(super) fn count_h3(&mut self, visit: &H3Visit<'_>) -> bool {
        let matches = if let Some(token) = visit.token {
            self.tokens.iter().any(|t| t == token)
        } else {
            self.client_ip == visit.ip
                && self
                    .alt_svc_first_ms
                    .is_some_and(|at| visit.time_ms - at <= ALT_SVC_MAX_AGE_MS)
        };
        if matches {
            self.h3_requests += 1;
            self.first_h3_ms.get_or_insert(visit.time_ms);
            self.quic_src_ip.get_or_insert(visit.ip);
            if self.quic_voice_id.is_none() {
                self.quic_voice_id = visit.quic_voice_id.map(str::to_owned);
            }
            self.updated_ms = visit.time_ms;
        }
        matches
    }

    /// Counts a QUIC connection attempt from `ip` when this identity is of that IP and was sent
    /// `alt-svc` before it, within `ma` (an Initial carries no probe token). Says whether it
    /// counted.
    pub(super) fn count_quic_attempt(&mut self, ip: IpAddr, time_ms: i64) -> bool {
        let after_alt_svc = self
            .alt_svc_first_ms
            .is_some_and(|at| (0..=ALT_SVC_MAX_AGE_MS).contains(&(time_ms - at)));
        let matches = self.client_ip == ip && after_alt_svc;
        if matches {
            self.quic_attempts += 1;
            self.first_quic_attempt_ms.get_or_insert(time_ms);
            self.updated_ms = time_ms;
        }
        matches
    }

    /// The verdict at `now_ms` under `rule`, and why.
    pub fn verdict(&self, now_ms: i64, rule: &NeverRule) -> (Verdict, String) {
        if let Some(src) = self.quic_src_ip {
            if src != self.client_ip {
                return (
                    Verdict::QuicElsewhere,
                    format!(
                        "HTTP/3 with its token came from {src}, TCP from {}",
                        self.client_ip
                    ),
                );
            }
            return (
                Verdict::H3Ok,
                format!("{} HTTP/3 request(s) after alt-svc", self.h3_requests),
            );
        }
        if let Some(at) = self.first_quic_attempt_ms {
            let after = self.alt_svc_first_ms.map_or(0, |sent| at - sent);
            return (
                Verdict::AttemptedH3,
                format!(
                    "{} QUIC attempt(s), the first {after} ms after alt-svc",
                    self.quic_attempts
                ),
            );
        }
        let Some(alt_svc) = self.alt_svc_first_ms else {
            return (
                Verdict::Expired,
                "no alt-svc was sent (QUIC off)".to_owned(),
            );
        };
        let span = self.last_spaced_return_ms.map_or(0, |last| last - alt_svc);
        if self.spaced_returns >= rule.returns && span >= rule.span_ms {
            return (
                Verdict::NeverTriesH3,
                format!(
                    "{} TCP connections after alt-svc ({} spaced, over {} s), no QUIC attempt",
                    self.tcp_connections_after_alt_svc,
                    self.spaced_returns,
                    span / 1_000
                ),
            );
        }
        if now_ms - alt_svc > ALT_SVC_MAX_AGE_MS {
            return (Verdict::Expired, "alt-svc's max age passed".to_owned());
        }
        (
            Verdict::Pending,
            format!(
                "{} of {} spaced TCP returns after alt-svc, over {} of {} s",
                self.spaced_returns,
                rule.returns,
                span / 1_000,
                rule.span_ms / 1_000
            ),
        )
    }
}
