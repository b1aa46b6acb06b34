//! Probe records: what one probe through one exit (or the direct baseline) found.
//!
//! A record holds only redacted exit URLs and never a credential; the full echo the server
//! answered is kept as JSON so later analysis needs no re-probe.

use serde::{Deserialize, Serialize};

use crate::coherence::Coherence;
use crate::echo::Echo;
use crate::voice::{Bucket, VoiceId};

/// Version of the probe record JSON. Bump when a field changes meaning or is removed.
pub const PROBE_SCHEMA_VERSION: u32 = 1;

/// One probe: one connection through one exit to the echo server, with a unique token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// [`PROBE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Id of the audit run the probe belongs to.
    pub run_id: String,
    /// Exit name; `None` for the direct baseline.
    pub exit: Option<String>,
    /// Redacted exit URL (password `***`); `None` for the baseline.
    pub exit_url: Option<String>,
    /// The gateway session id the probe used (minted by the auditor), for session exits.
    #[serde(default)]
    pub session: Option<String>,
    /// The unique token the request carried.
    pub token: String,
    /// Persona that sent the probe, e.g. `rustls/chrome`.
    pub persona: String,
    /// When the probe started, RFC 3339 UTC.
    pub started_at: String,
    /// Wall time from dial to the full echo, milliseconds; `None` on failure.
    pub latency_ms: Option<u64>,
    /// The failure, if the probe failed.
    pub error: Option<ProbeFailure>,
    /// What the probe saw, if it succeeded.
    pub sample: Option<Sample>,
    /// The failures of this sample's earlier attempts, oldest first: each was its own
    /// connection through the exit, retried as transient. Evidence like any other connection
    /// (a balancer's failing backend must not hide behind the retry that lands on the next
    /// one); empty when the first attempt decided, and in records written before this field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retried: Vec<ProbeFailure>,
    /// The run's QUIC probe of this exit (or of the baseline), kept with its first sample's
    /// record; `None` on the other records, and when the run made none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h3: Option<H3Probe>,
    /// For the Chromium persona, on an exit's last sample of a run: what the echo's h3 ledger
    /// says of the identity its samples made (egress address and Chromium's TLS voice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<LedgerVerdict>,
}

/// The echo's h3 downgrade ledger on one client identity (`/api/ledger?token=`): does the
/// client, told by `alt-svc` that the origin speaks HTTP/3, ever come back over it?
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerVerdict {
    /// `pending`, `attempted_h3`, `h3_ok`, `quic_elsewhere`, `never_tries_h3` or `expired`.
    pub verdict: String,
    /// The echo's reason, with its counts.
    pub why: String,
    /// The identity's TCP connections after the first `alt-svc`.
    pub tcp_connections_after_alt_svc: u32,
    /// QUIC connection attempts matched to it.
    pub quic_attempts: u32,
}

/// How a QUIC probe's datagrams travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UdpPath {
    /// Straight to the echo (the baseline).
    Direct,
    /// Through the exit's SOCKS5 UDP relay (`UDP ASSOCIATE`, RFC 1928 section 7).
    Socks5UdpAssociate,
    /// An HTTP `CONNECT` exit carries a TCP stream only: UDP is not carried, by construction,
    /// and no probe is sent.
    HttpConnect,
}

/// One QUIC probe: an HTTP/3 request to the echo over UDP, with its own token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct H3Probe {
    /// How the datagrams went.
    pub via: UdpPath,
    /// The echo answered the probe's token over HTTP/3: UDP went through both ways.
    pub udp_carried: bool,
    /// The token sent; `None` when nothing was sent ([`UdpPath::HttpConnect`]).
    pub token: Option<String>,
    /// Wall time from the first datagram (or the SOCKS5 negotiation) to the full echo.
    pub latency_ms: Option<u64>,
    /// Why the probe failed, when it was sent and failed.
    pub error: Option<ProbeFailure>,
    /// The address the echo saw the QUIC connection come from.
    pub egress_ip: Option<String>,
    /// The TLS voice of the QUIC ClientHello, as the echo saw it.
    pub tls_voice_id: Option<String>,
    /// The QUIC voice (`quicv2_…`: version, connection ids, Initial layout, transport parameters).
    pub quic_voice_id: Option<String>,
    /// The HTTP/3 voice (`h3v1_…`: SETTINGS and field order).
    pub http3_voice_id: Option<String>,
    /// The certificate was not the pinned one.
    pub tls_intercepted: bool,
}

impl H3Probe {
    /// A probe that carried nothing over `via`, with no detail yet.
    pub fn not_carried(via: UdpPath) -> Self {
        Self {
            via,
            udp_carried: false,
            token: None,
            latency_ms: None,
            error: None,
            egress_ip: None,
            tls_voice_id: None,
            quic_voice_id: None,
            http3_voice_id: None,
            tls_intercepted: false,
        }
    }

    /// The voices an exit must keep for its HTTP/3 to be the client's own: TLS, QUIC, HTTP/3.
    pub fn voices(&self) -> [Option<&str>; 3] {
        [
            self.tls_voice_id.as_deref(),
            self.quic_voice_id.as_deref(),
            self.http3_voice_id.as_deref(),
        ]
    }
}

/// A failed probe: class (counted in labels), phase, and a message without secrets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeFailure {
    /// `dns`, `connect_refused`, `timeout`, `proxy_auth`, `proxy_refused`, `tls`, `bad_echo`, `io`.
    pub class: String,
    /// The phase of a timeout or I/O error: `connect`, `tunnel`, `tls`, `response`.
    pub phase: Option<String>,
    /// Human-readable detail (never a credential).
    pub message: String,
}

/// What a successful probe saw, client side and echo side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The address the echo server saw the connection come from.
    pub egress_ip: String,
    /// TLS voice the echo computed.
    pub tls_voice: Option<VoiceId>,
    /// HTTP/2 voice the echo computed, if h2 was spoken.
    pub h2_voice: Option<VoiceId>,
    /// HTTP/1 voice the echo computed, if HTTP/1.x was spoken.
    pub h1_voice: Option<VoiceId>,
    /// Bucket the echo assigned.
    pub bucket: Option<Bucket>,
    /// Browser profile the echo matched.
    pub profile: Option<String>,
    /// ALPN the auditor's TLS client saw negotiated.
    pub alpn: Option<String>,
    /// HTTP/2 stream id of the request at the echo (re-mux evidence).
    pub stream_id: Option<u32>,
    /// Index of the request on its connection at the echo.
    pub request_index: u32,
    /// The echo certificate was not the pinned one (an interceptor answered).
    pub tls_intercepted: bool,
    /// sha256 of the SPKI of the certificate the auditor was shown, hex.
    pub cert_spki_sha256: String,
    /// Issuer of that certificate (for interceptors: whose CA).
    pub cert_issuer: Option<String>,
    /// TLS voice equal to the direct baseline's; `None` without a baseline.
    pub tls_preserved: Option<bool>,
    /// HTTP/2 voice equal to the direct baseline's; `None` without a baseline.
    pub h2_preserved: Option<bool>,
    /// ALPN offered, negotiated and spoken (as the echo saw them) all equal to the direct
    /// baseline's; `None` without a baseline (and in records written before this field).
    #[serde(default)]
    pub alpn_preserved: Option<bool>,
    /// The request arrived re-multiplexed: at another HTTP/2 stream id than the direct
    /// baseline's first request, or not as the first request on its connection (index > 1);
    /// `None` without a baseline (and in records written before this field).
    #[serde(default)]
    pub remuxed: Option<bool>,
    /// How coherent the echo's story is (families and reasons); `None` in records written
    /// before it.
    #[serde(default)]
    pub coherence: Option<Coherence>,
    /// The country and network of `egress_ip` when the sample was recorded (`audit --geoip`),
    /// kept with it so history stays true when the database changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geo: Option<crate::geo::Place>,
    /// The echo as received.
    pub echo: Echo,
}

impl Sample {
    /// The HTTP voice: HTTP/2 if spoken, else HTTP/1.
    fn http_voice(&self) -> Option<&VoiceId> {
        self.h2_voice.as_ref().or(self.h1_voice.as_ref())
    }

    /// The sample's voice for drift: TLS voice and HTTP voice together, `tls+http`.
    pub fn voice(&self) -> String {
        let tls = self.tls_voice.as_ref().map_or("-", |v| v.0.as_str());
        let http = self.http_voice().map_or("-", |v| v.0.as_str());
        format!("{tls}+{http}")
    }

    /// Whether this sample's voices can be compared with `other`'s for drift: not when either
    /// layer's voice comes from another normalization version ([`VoiceId::comparable`]).
    pub fn voiced_like(&self, other: &Sample) -> bool {
        let both = |a: Option<&VoiceId>, b: Option<&VoiceId>| match (a, b) {
            (Some(a), Some(b)) => a.comparable(b),
            _ => true,
        };
        both(self.tls_voice.as_ref(), other.tls_voice.as_ref())
            && both(self.http_voice(), other.http_voice())
    }
}
