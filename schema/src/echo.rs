//! The JSON echo the server answers with, and that the auditor reads back.
//!
//! This is the contract between `exitvoice-echo` and `exitvoice-auditor`: the auditor never sees
//! the echo server's parser types, only these. Field names follow the common echo services where
//! the meaning is the same (`ja3`, `ja3_hash`, `ja4`, `akamai_fingerprint`, …). Parser detail
//! (the full ClientHello, the frame log) travels as opaque JSON in `detail` fields, so it can
//! grow without a schema bump.

use serde::{Deserialize, Serialize};

pub use crate::alpn::{Alpn, Spoken};
use crate::coherence::Coherence;
use crate::raw_json::RawJson;
use crate::round_trip::RoundTrips;
use crate::tcp::{TcpAbsent, TcpEcho};
use crate::voice::{Bucket, VoiceId};

/// Version of the echo JSON shape. Bump when a field changes meaning or is removed.
pub const ECHO_SCHEMA_VERSION: u32 = 1;

/// Everything the echo server saw for one request on one connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Echo {
    /// [`ECHO_SCHEMA_VERSION`] of the server that wrote it.
    pub schema_version: u32,
    /// When the request arrived, RFC 3339 UTC.
    pub time: String,
    /// The TCP peer as the server saw it (for the auditor: the exit's egress address).
    pub peer: Peer,
    /// The probe token, when the request carried one (`/probe/<token>` or `?token=`).
    pub token: Option<String>,
    /// Request method and path as received.
    pub method: String,
    /// Path and query as received.
    pub path: String,
    /// ALPN offered by the client, chosen by the server, and the protocol the client spoke.
    pub alpn: Alpn,
    /// What the SYN of the connection said (for a client behind a proxy exit: the exit host's
    /// stack); `None` when there was none to read (absent in echoes of older servers).
    #[serde(default)]
    pub tcp: Option<TcpEcho>,
    /// Why `tcp` is `None`, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_absent: Option<TcpAbsent>,
    /// The connection's round trips and their gap ([`crate::round_trip`]); absent in echoes
    /// of older servers and in the one-layer routes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<RoundTrips>,
    /// The TLS layer; `None` only if the ClientHello could not be parsed.
    pub tls: Option<TlsEcho>,
    /// Present when the connection spoke HTTP/2.
    pub http2: Option<Http2Echo>,
    /// Present when the connection spoke HTTP/1.x.
    pub http1: Option<Http1Echo>,
    /// Where this request sits on its connection.
    pub request: RequestPosition,
    /// The HTTP/2 bucket (A–D); `None` when the client did not offer h2.
    pub bucket: Option<Bucket>,
    /// Name of the known browser profile the HTTP/2 voice matches, if any.
    pub profile: Option<String>,
    /// How coherent the request's story is ([`crate::coherence`]), with the User-Agent's
    /// family: in the live `/api/all` and `/probe/<token>` answers only (not stored; absent in
    /// echoes of older servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coherence: Option<Coherence>,
    /// The visitor's country and network, when the server was given geo databases
    /// (`--geoip`): looked up as it answers, not stored; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geo: Option<crate::EchoGeo>,
}

/// A socket address, split so JSON consumers need not parse it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    /// IP address, v4 or v6, without brackets.
    pub ip: String,
    /// TCP port.
    pub port: u16,
}

/// How much of a visitor's address the echo server stores (`--store-peer-ip`). The echo
/// answered to the client always carries its full address: it is the client's own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerPolicy {
    /// Address and port, as seen (self-hosted audits need the exits' egress addresses).
    #[default]
    Full,
    /// The network only: IPv4 `/24`, IPv6 `/48`, as `203.0.113.0/24`; port 0.
    Prefix,
    /// Nothing: empty address, port 0.
    None,
}

impl PeerPolicy {
    /// The peer as this policy stores it.
    pub fn apply(self, addr: std::net::SocketAddr) -> Peer {
        use std::net::IpAddr;
        match self {
            Self::Full => Peer {
                ip: addr.ip().to_string(),
                port: addr.port(),
            },
            Self::Prefix => {
                let ip = match addr.ip().to_canonical() {
                    IpAddr::V4(v4) => {
                        let [a, b, c, _] = v4.octets();
                        format!("{a}.{b}.{c}.0/24")
                    }
                    IpAddr::V6(v6) => {
                        let mut segments = v6.segments();
                        segments[3..].fill(0);
                        format!("{}/48", std::net::Ipv6Addr::from(segments))
                    }
                };
                Peer { ip, port: 0 }
            }
            Self::None => Peer {
                ip: String::new(),
                port: 0,
            },
        }
    }
}

impl std::str::FromStr for PeerPolicy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "full" => Ok(Self::Full),
            "prefix" => Ok(Self::Prefix),
            "none" => Ok(Self::None),
            other => Err(format!("{other:?}: expected full, prefix or none")),
        }
    }
}

/// TLS fingerprints of the connection's ClientHello.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsEcho {
    /// JA3 string (salesforce/ja3).
    pub ja3: String,
    /// md5 of `ja3`, lowercase hex.
    pub ja3_hash: String,
    /// JA3 with the extension list sorted ascending (JA3N).
    pub ja3n: String,
    /// md5 of `ja3n`.
    pub ja3n_hash: String,
    /// JA4 (FoxIO, BSD-3).
    pub ja4: String,
    /// JA4, raw (unhashed) form.
    pub ja4_r: String,
    /// JA4, original (wire) order.
    pub ja4_o: String,
    /// JA4, raw and original order.
    pub ja4_ro: String,
    /// Normalized TLS voice (stable across GREASE, permutation, resumption, padding).
    pub voice_id: VoiceId,
    /// Hash of the raw non-GREASE extension order (changes per connection for Chrome).
    pub order_id: String,
    /// Whether the hello tried to resume (pre_shared_key offered or a non-empty session ticket).
    pub resumed: bool,
    /// The parsed ClientHello, as the echo server models it.
    #[serde(default)]
    pub detail: RawJson,
}

/// HTTP/2 fingerprints of the connection's first frames.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Http2Echo {
    /// Canonical Akamai string `S|WU|P|PS`.
    pub akamai_fingerprint: String,
    /// md5 of `akamai_fingerprint`.
    pub akamai_fingerprint_hash: String,
    /// Normalized HTTP/2 voice.
    pub voice_id: VoiceId,
    /// Pseudo-header order of this request, as names (`:method`, …).
    pub pseudo_header_order: Vec<String>,
    /// Regular header names of this request, wire order.
    pub header_order: Vec<String>,
    /// The frame log, settings, priorities and header representations, as the server models them.
    #[serde(default)]
    pub detail: RawJson,
}

/// The connection-level half of [`Http2Echo`]: what the preface, SETTINGS, WINDOW_UPDATE,
/// PRIORITY and first HEADERS say, the same for every request on the connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Http2Connection {
    /// Canonical Akamai string `S|WU|P|PS`.
    pub akamai_fingerprint: String,
    /// md5 of `akamai_fingerprint`.
    pub akamai_fingerprint_hash: String,
    /// Normalized HTTP/2 voice.
    pub voice_id: VoiceId,
    /// Name of the known browser profile the connection matches, if any.
    pub profile: Option<String>,
    /// The connection opened with its own preface and a non-ACK SETTINGS as first frame.
    pub own_preface_and_settings: bool,
    /// The frame log up to the first request, settings, priorities, the first request's header
    /// representations, the Akamai variants and the voice description.
    #[serde(default)]
    pub detail: RawJson,
}

/// HTTP/1.x fingerprint of the request head.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Http1Echo {
    /// The request line as received, without CRLF.
    pub request_line: String,
    /// Header names in original case and order.
    pub header_order: Vec<String>,
    /// Normalized HTTP/1 voice.
    pub voice_id: VoiceId,
}

/// Position of the request on its connection: the evidence for bucket C (re-mux).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestPosition {
    /// HTTP/2 stream id, when the connection spoke h2.
    pub stream_id: Option<u32>,
    /// 1 for the first request on the connection, 2 for the second, …
    pub index: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_policy_keeps_all_the_network_or_nothing() {
        let v4: std::net::SocketAddr = "203.0.113.77:4242".parse().expect("addr");
        let v6: std::net::SocketAddr = "[2001:db8:aa:bb:cc::1]:443".parse().expect("addr");
        let mapped: std::net::SocketAddr = "[::ffff:198.51.100.9]:80".parse().expect("addr");
        let peer = |ip: &str, port| Peer {
            ip: ip.to_owned(),
            port,
        };
        assert_eq!(PeerPolicy::Full.apply(v4), peer("203.0.113.77", 4242));
        assert_eq!(PeerPolicy::Prefix.apply(v4), peer("203.0.113.0/24", 0));
        assert_eq!(PeerPolicy::Prefix.apply(v6), peer("2001:db8:aa::/48", 0));
        assert_eq!(PeerPolicy::Prefix.apply(mapped), peer("198.51.100.0/24", 0));
        assert_eq!(PeerPolicy::None.apply(v6), peer("", 0));
        assert_eq!("prefix".parse(), Ok(PeerPolicy::Prefix));
        assert!("half".parse::<PeerPolicy>().is_err());
    }
}
