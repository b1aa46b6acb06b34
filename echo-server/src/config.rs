//! Configuration of the echo server: where it listens, its certificate, its database, and every
//! limit that keeps one peer from hurting the others.
//!
//! The defaults are the ones `exitvoice serve` uses with no flags; each is a named constant so the
//! CLI help and the docs can quote it.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use exitvoice_schema::PeerPolicy;
use exitvoice_store::Database;
pub use ipnet::IpNet;

/// Default listen address: loopback only, so a fresh checkout exposes nothing.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 8443);
/// Default database file, relative to the working directory.
pub const DEFAULT_DB: &str = "exitvoice.db";
/// Default deadline for the whole TLS handshake, ClientHello read included.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default idle timeout: a connection with no bytes either way for this long is closed.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default deadline, counted from the end of the TLS handshake, for the first request's head to
/// arrive complete. Without it a peer dripping one byte per idle period (slowloris) would hold a
/// connection for ever; on HTTP/1 it also bounds every later request, from its first byte.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Default cap on the raw ClientHello records read before the handshake: 64 KiB.
pub const DEFAULT_HELLO_CAP: usize = 64 * 1024;
/// Default cap on the decrypted client bytes kept by the tap: 64 KiB.
pub const DEFAULT_CAPTURE_BYTES: usize = 64 * 1024;
/// Default maximum number of open connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Default maximum number of open connections from one IP address.
pub const DEFAULT_PER_IP_CONNECTIONS: usize = 64;
/// Default sustained rate of new connections per second from one source (IPv4 address or
/// IPv6 /64). Far above what a client or an auditor behind one gateway opens, far below the
/// handshakes per second a reconnecting flood makes the server do.
pub const DEFAULT_PER_IP_RATE: u32 = 100;
/// Default number of new connections one source may open at once after a quiet spell.
pub const DEFAULT_PER_IP_BURST: u32 = 200;
/// Default number of strikes (connections that broke the protocol or a deadline) within the
/// penalty window that put a source in the penalty box.
pub const DEFAULT_PENALTY_STRIKES: u32 = 20;
/// Default window the strikes are counted in.
pub const DEFAULT_PENALTY_WINDOW: Duration = Duration::from_secs(60);
/// Default time a penalised source is refused.
pub const DEFAULT_PENALTY_TIME: Duration = Duration::from_secs(300);
/// Default cap on a request body the server reads (and discards): 64 KiB.
pub const DEFAULT_BODY_CAP: usize = 64 * 1024;
/// Default capacity of the observation queue between connections and the writer.
pub const DEFAULT_QUEUE_SIZE: usize = 8192;
/// Default cap on the raw bytes (ClientHello records and tapped prefixes) held by queued
/// observations: 64 MiB. Without it a flood of failing connections, each queueing up to
/// 128 KiB of raw bytes, could make the 8192-slot queue hold a gigabyte.
pub const DEFAULT_QUEUE_BYTES: usize = 64 * 1024 * 1024;
/// Default largest batch the writer commits in one transaction.
pub const DEFAULT_BATCH_SIZE: usize = 256;
/// Default longest time an observation waits in the writer before its batch is committed.
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_millis(100);
/// Default retention of stored observations: 30 days.
pub const DEFAULT_RETAIN: Duration = Duration::from_secs(30 * 24 * 3600);
/// Default cap on the bytes the stored rows take: 10 GiB.
pub const DEFAULT_MAX_DB_BYTES: u64 = 10 * 1024 * 1024 * 1024;
/// Default time in-flight connections get to finish after SIGINT/SIGTERM.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Everything `exitvoice serve` needs to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Addresses to listen on (IPv4 and IPv6).
    pub listen: Vec<SocketAddr>,
    /// The store: a SQLite file (a generated certificate is kept beside it) or PostgreSQL.
    pub database: Database,
    /// PEM certificate chain; with `key`, replaces the generated self-signed certificate.
    pub cert: Option<PathBuf>,
    /// PEM private key for `cert`.
    pub key: Option<PathBuf>,
    /// When set, each connection's raw bytes and provenance are also written here.
    pub record_dir: Option<PathBuf>,
    /// Bearer token protecting `/api/observations`, if any.
    pub api_token: Option<ApiToken>,
    /// How much of each visitor's address is stored.
    pub store_peer_ip: PeerPolicy,
    /// Load balancers whose connections start with a PROXY protocol header (v1 or v2): the
    /// client address in it is the one reported, stored and rate-limited. From any other
    /// source a PROXY header is refused.
    pub proxy_protocol_from: Vec<IpNet>,
    /// Certificates from an ACME CA instead of `cert`/`key` or a self-signed one.
    pub acme: Option<crate::acme::AcmeSettings>,
    /// Where to serve the Prometheus exposition (`GET /metrics`, plain HTTP); off when `None`.
    pub metrics_listen: Option<SocketAddr>,
    /// Serve QUIC and HTTP/3 on UDP at each listen address, and send `alt-svc` on TCP.
    pub quic: bool,
    /// When the h3 downgrade ledger says `never_tries_h3`.
    pub ledger_rule: crate::ledger::NeverRule,
    /// Connection and capture limits.
    pub limits: Limits,
    /// Observation queue and writer settings.
    pub writer: WriterConfig,
    /// Time in-flight connections get to finish at shutdown.
    pub shutdown_grace: Duration,
    /// MaxMind DB files (a country or city database, an ASN one, or one with both) whose
    /// country and network of the visitor `/api/all` shows; none by default.
    pub geoip: Vec<PathBuf>,
    /// A p0f v3 signature database (`p0f.fp`) whose OS names `/api/all`'s `tcp.os` shows;
    /// none by default.
    pub p0f_db: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: vec![DEFAULT_LISTEN],
            database: Database::sqlite(DEFAULT_DB),
            cert: None,
            key: None,
            record_dir: None,
            api_token: None,
            store_peer_ip: PeerPolicy::Full,
            proxy_protocol_from: Vec::new(),
            metrics_listen: None,
            quic: true,
            ledger_rule: crate::ledger::NeverRule::default(),
            acme: None,
            limits: Limits::default(),
            writer: WriterConfig::default(),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            geoip: Vec::new(),
            p0f_db: None,
        }
    }
}

/// Limits that bound what one peer (or all of them) can make the server hold.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Open connections at most; beyond this new connections are closed at once.
    pub max_connections: usize,
    /// Open connections from one IP address at most.
    pub per_ip_connections: usize,
    /// Deadline for the whole handshake, ClientHello read included.
    pub handshake_timeout: Duration,
    /// Close a connection idle (no bytes either way) for this long.
    pub idle_timeout: Duration,
    /// Deadline after the handshake for the first request head (and, on HTTP/1, for each
    /// request head and body, from its first byte).
    pub request_timeout: Duration,
    /// Cap on the raw ClientHello records read before rustls sees them.
    pub hello_cap: usize,
    /// Bytes of decrypted client data the tap keeps per connection. The HTTP/2 parser's own
    /// caps (frames, header blocks, PRIORITY frames) are [`exitvoice_protocol::h2::MAX_FRAMES`],
    /// [`exitvoice_protocol::h2::MAX_HEADER_BLOCKS`] and [`exitvoice_protocol::h2::MAX_PRIORITY_FRAMES`].
    pub capture_bytes: usize,
    /// Cap on the request body read per request.
    pub body_cap: usize,
    /// Rate limit and penalty box on new connections per source.
    pub admission: AdmissionLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            per_ip_connections: DEFAULT_PER_IP_CONNECTIONS,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            hello_cap: DEFAULT_HELLO_CAP,
            capture_bytes: DEFAULT_CAPTURE_BYTES,
            body_cap: DEFAULT_BODY_CAP,
            admission: AdmissionLimits::default(),
        }
    }
}

/// The admission policy for new connections, per source (an IPv4 address or an IPv6 /64);
/// zero turns a part off.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdmissionLimits {
    /// New connections per second per source, sustained (0: no rate limit).
    pub rate: u32,
    /// New connections a source may open at once after a quiet spell (the bucket's size).
    pub burst: u32,
    /// Strikes within `window` that put a source in the penalty box (0: no penalty box).
    pub strikes: u32,
    /// The window the strikes are counted in.
    pub window: Duration,
    /// How long a penalised source is refused.
    pub penalty: Duration,
}

impl Default for AdmissionLimits {
    fn default() -> Self {
        Self {
            rate: DEFAULT_PER_IP_RATE,
            burst: DEFAULT_PER_IP_BURST,
            strikes: DEFAULT_PENALTY_STRIKES,
            window: DEFAULT_PENALTY_WINDOW,
            penalty: DEFAULT_PENALTY_TIME,
        }
    }
}

/// The observation queue and its batching writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterConfig {
    /// Queue capacity; a connection finding it full drops its observation (counted).
    pub queue_size: usize,
    /// Raw bytes the queued observations may hold at most; over it, observations are dropped
    /// (counted) like on a full queue.
    pub queue_bytes: usize,
    /// Most observations per transaction.
    pub batch_size: usize,
    /// Longest time the first observation of a batch waits before the batch is committed.
    pub flush_interval: Duration,
    /// Rows older than this are pruned (`None`: kept for ever).
    pub retain: Option<Duration>,
    /// While the rows take more than this many bytes, the oldest are pruned (`None`: no cap).
    pub max_db_bytes: Option<u64>,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            queue_size: DEFAULT_QUEUE_SIZE,
            queue_bytes: DEFAULT_QUEUE_BYTES,
            batch_size: DEFAULT_BATCH_SIZE,
            flush_interval: DEFAULT_FLUSH_INTERVAL,
            retain: Some(DEFAULT_RETAIN),
            max_db_bytes: Some(DEFAULT_MAX_DB_BYTES),
        }
    }
}

/// The bearer token of the observations endpoint. Its `Debug` never shows the secret.
#[derive(Clone)]
pub struct ApiToken(String);

impl ApiToken {
    /// Wraps a token; `None` when it is empty (an empty token would protect nothing).
    pub fn new(token: String) -> Option<Self> {
        (!token.is_empty()).then_some(Self(token))
    }

    /// Whether `presented` equals the token, compared in constant time (the time depends only on
    /// the lengths, never on where the bytes first differ).
    pub fn matches(&self, presented: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        bool::from(self.0.as_bytes().ct_eq(presented))
    }
}

impl fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_token_matches_only_itself_and_never_prints() {
        let token = ApiToken::new("s3cret-token".to_owned()).expect("non-empty");
        assert!(token.matches(b"s3cret-token"));
        assert!(!token.matches(b"s3cret-tokeN"));
        assert!(!token.matches(b"s3cret"));
        assert!(!format!("{token:?}").contains("s3cret"));
        assert!(ApiToken::new(String::new()).is_none());
    }
}
