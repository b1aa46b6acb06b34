//! The TCP voice: what the client host's SYN said, read back from the kernel by the echo server
//! (`TCP_SAVED_SYN`) or from a capture by `exitvoice inspect`.
//!
//! A connection relayed through a proxy exit shows the exit host's stack here, not the client's:
//! the exit opened the TCP connection the echo server accepted.

use serde::{Deserialize, Serialize};

use crate::voice::VoiceId;

/// What the SYN of one TCP connection said (IP header, TCP header and options).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpEcho {
    /// 4 or 6.
    pub ip_version: u8,
    /// The TTL (IPv4) or hop limit (IPv6) as it arrived.
    pub ttl: u8,
    /// The likely initial TTL: the smallest of 32, 64, 128 and 255 at or above `ttl`.
    pub initial_ttl: u8,
    /// `initial_ttl - ttl`: the hops the SYN likely took.
    pub hops: u8,
    /// IPv4 "don't fragment" set (always `false` for IPv6, which has no such bit).
    pub df: bool,
    /// The IPv4 identification field (`None` for IPv6).
    pub ip_id: Option<u16>,
    /// The TCP window as sent (unscaled, RFC 7323 section 2.2: a SYN's window is never scaled).
    pub window: u16,
    /// The maximum segment size option's value, when sent.
    pub mss: Option<u16>,
    /// The window scale option's shift count, when sent.
    pub window_scale: Option<u8>,
    /// The SACK-permitted option was sent.
    pub sack_permitted: bool,
    /// The timestamps option was sent.
    pub timestamps: bool,
    /// The option kinds in wire order (NOP and EOL included).
    pub options: Vec<u8>,
    /// The quirks p0f v3 names (`df`, `id+`, `ecn`, `ts1-`, …), in p0f's order.
    pub quirks: Vec<String>,
    /// Why the options did not read cleanly, when they did not (p0f's `bad` quirk then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options_error: Option<String>,
    /// The p0f v3 signature, as `p0f -r` prints it in `raw_sig`
    /// (`ver:ttl+dist:olen:mss:wsize,scale:olayout:quirks:pclass`).
    pub p0f: String,
    /// The normalized TCP voice (what stays when the path changes: `protocol/src/tcp/voice.rs`).
    pub voice_id: VoiceId,
    /// The operating system a p0f signature database names for the signature
    /// (`--p0f-db`), when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
}

/// Why a connection has no TCP voice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TcpAbsence {
    /// The server's kernel does not keep SYNs (`TCP_SAVE_SYN` is Linux-only).
    Unsupported,
    /// The kernel kept no SYN for this connection (SYN cookies were in use, or the listener
    /// did not ask for it).
    NotSaved,
    /// A PROXY-protocol connection: the SYN the kernel kept is the load balancer's.
    ProxyProtocol,
    /// The kept SYN did not parse.
    Malformed,
    /// Nothing was read: a stored row of an older server, or a capture without the SYN.
    NotCaptured,
}

impl TcpAbsence {
    /// The reason as it reads in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unsupported => "unsupported",
            Self::NotSaved => "not_saved",
            Self::ProxyProtocol => "proxy_protocol",
            Self::Malformed => "malformed",
            Self::NotCaptured => "not_captured",
        }
    }

    /// What the reason means, as the echo explains it.
    pub fn detail(self) -> &'static str {
        match self {
            Self::Unsupported => "the server's kernel keeps no SYNs (TCP_SAVE_SYN is Linux's)",
            Self::NotSaved => {
                "the kernel kept no SYN for this connection (SYN cookies were in use)"
            }
            Self::ProxyProtocol => {
                "a PROXY protocol connection: its SYN is the load balancer's, not the client's"
            }
            Self::Malformed => "the SYN the kernel kept did not parse",
            Self::NotCaptured => "no SYN was read for this connection",
        }
    }
}

impl From<TcpAbsence> for TcpAbsent {
    fn from(reason: TcpAbsence) -> Self {
        Self {
            reason,
            detail: reason.detail().to_owned(),
        }
    }
}

/// [`TcpAbsence`] with the detail the server or the parser gave.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpAbsent {
    /// Why there is no TCP voice.
    pub reason: TcpAbsence,
    /// What the server or the parser said.
    pub detail: String,
}
