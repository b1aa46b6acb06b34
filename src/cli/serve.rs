//! `exitvoice serve`: flags → [`exitvoice_echo::Config`] → run until SIGINT/SIGTERM.
//!
//! With no flags it runs on the embedded defaults: `127.0.0.1:8443`, `./exitvoice.db`, and a
//! self-signed certificate generated beside the database on first start.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use exitvoice_echo::acme::{self, AcmeSettings};
use exitvoice_echo::cert::CertSource;
use exitvoice_echo::config::{self, AdmissionLimits, ApiToken, IpNet, Limits, WriterConfig};
use exitvoice_echo::ledger::NeverRule;
use exitvoice_echo::{Config, Server};
use exitvoice_schema::PeerPolicy;

use super::database::DatabaseArg;

/// Flags of `exitvoice serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// TOML file whose `[serve]` table sets any option below (keys are the flags' names);
    /// flags and `EXITVOICE_*` variables take precedence over it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to listen on, IPv4 or IPv6 (`[::1]:8443`); repeat for several.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8443")]
    listen: Vec<SocketAddr>,
    /// A generated certificate is kept beside a SQLite file (for PostgreSQL: `exitvoice.pg.*`
    /// in the working directory).
    #[command(flatten)]
    database: DatabaseArg,
    /// PEM certificate chain (leaf first); needs --key. Without both, a self-signed certificate
    /// is generated on first start and reused.
    #[arg(long, value_name = "FILE", requires = "key")]
    cert: Option<PathBuf>,
    /// PEM private key of --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<PathBuf>,
    /// Also write each connection's raw bytes as DIR/<conn-id>.hello.bin, .prefix.bin and .json.
    #[arg(long, value_name = "DIR")]
    record_dir: Option<PathBuf>,
    /// Bearer token required by /api/observations (never logged); prefer the environment
    /// variable EXITVOICE_API_TOKEN or the config file, which keep it out of `ps`.
    #[arg(long, value_name = "TOKEN")]
    api_token: Option<String>,
    /// How much of each visitor's address is stored: `full` (address and port), `prefix`
    /// (IPv4 /24, IPv6 /48) or `none`. The echo answered to a client always shows its own full
    /// address.
    #[arg(long, value_name = "full|prefix|none", default_value = "full")]
    store_peer_ip: PeerPolicy,
    /// A load balancer's address range (`192.0.2.0/24`, `127.0.0.1/32`; repeat for several)
    /// whose connections start with a PROXY protocol v1 or v2 header: the client address in it
    /// is reported, stored and rate-limited. From other sources a PROXY header is refused.
    #[arg(long, value_name = "CIDR")]
    proxy_protocol_from: Vec<IpNet>,
    /// Get the certificate from an ACME CA for this name (repeat for several), through the
    /// TLS-ALPN-01 challenge on the listening port (which must be the name's port 443); cached
    /// in `<db>.acme/`, renewed before expiry without a restart. Replaces --cert/--key.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["cert", "key"])]
    acme_domain: Vec<String>,
    /// Contact of the ACME account (`mailto:ops@example.com`); repeat for several.
    #[arg(long, value_name = "URL", requires = "acme_domain")]
    acme_contact: Vec<String>,
    /// The ACME CA's directory URL.
    #[arg(long, value_name = "URL", default_value = acme::LETS_ENCRYPT, conflicts_with = "acme_staging")]
    acme_directory: String,
    /// Use Let's Encrypt's staging directory (certificates browsers do not trust; for trials).
    #[arg(long, requires = "acme_domain")]
    acme_staging: bool,
    /// A PEM root to trust for the ACME directory's HTTPS, beside the public roots (a private
    /// CA).
    #[arg(long, value_name = "FILE", requires = "acme_domain")]
    acme_directory_ca: Option<PathBuf>,
    /// Serve QUIC and HTTP/3 on UDP at each listen address's port, and advertise it on TCP with
    /// `alt-svc: h3=":PORT"; ma=86400` (the default; the flag only undoes an earlier --no-quic).
    #[arg(long, overrides_with = "no_quic")]
    quic: bool,
    /// TCP only: no UDP listener, no `alt-svc`.
    #[arg(long, overrides_with = "quic")]
    no_quic: bool,
    /// The h3 ledger counts a client's TCP return after `alt-svc` only this long after the one
    /// it counted before; three counted returns and no QUIC attempt make `never_tries_h3`.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    ledger_spacing: Duration,
    /// ... and only once the last counted return is this long after the first `alt-svc`.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    ledger_span: Duration,
    /// Serve Prometheus metrics (OpenMetrics text, plain HTTP) at http://ADDR/metrics. Off by
    /// default; keep it on loopback or a private network: it is not authenticated.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Most open connections; more are closed at once.
    #[arg(long, value_name = "N", default_value_t = config::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Most open connections from one IP address.
    #[arg(long, value_name = "N", default_value_t = config::DEFAULT_PER_IP_CONNECTIONS)]
    per_ip_connections: usize,
    /// Most new connections per second from one source (an IPv4 address or an IPv6 /64),
    /// sustained; faster ones are reset before the handshake. 0 turns the limit off.
    #[arg(long, value_name = "N", default_value_t = config::DEFAULT_PER_IP_RATE)]
    per_ip_rate: u32,
    /// New connections one source may open at once after a quiet spell.
    #[arg(long, value_name = "N", default_value_t = config::DEFAULT_PER_IP_BURST)]
    per_ip_burst: u32,
    /// Strikes (connections that sent no valid ClientHello, missed the handshake or request
    /// deadline, or broke TLS or HTTP) within --penalty-window that put their source in the
    /// penalty box: its new connections are reset for --penalty-time. 0 turns it off.
    #[arg(long, value_name = "N", default_value_t = config::DEFAULT_PENALTY_STRIKES)]
    penalty_strikes: u32,
    /// Window the strikes are counted in.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    penalty_window: Duration,
    /// How long a source in the penalty box is refused.
    #[arg(long, value_name = "DURATION", default_value = "300s", value_parser = parse_duration)]
    penalty_time: Duration,
    /// Deadline for the whole TLS handshake, ClientHello read included (`10s`, `500ms`).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    handshake_timeout: Duration,
    /// Close a connection with no bytes either way for this long.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    idle_timeout: Duration,
    /// Deadline after the handshake for the first request head to arrive complete (on HTTP/1,
    /// also for every request head and body, from its first byte): stops peers that drip bytes
    /// to dodge the idle timeout.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    request_timeout: Duration,
    /// Most bytes of ClientHello records read before the handshake.
    #[arg(long, value_name = "BYTES", default_value_t = config::DEFAULT_HELLO_CAP)]
    hello_cap: usize,
    /// Most decrypted client bytes kept per connection.
    #[arg(long, value_name = "BYTES", default_value_t = config::DEFAULT_CAPTURE_BYTES)]
    capture_bytes: usize,
    /// Most request body bytes read per request (larger bodies get 413).
    #[arg(long, value_name = "BYTES", default_value_t = config::DEFAULT_BODY_CAP)]
    body_cap: usize,
    /// Observation queue capacity; when full, observations are dropped (counted), never waited on.
    #[arg(long, value_name = "N", default_value_t = config::DEFAULT_QUEUE_SIZE)]
    queue_size: usize,
    /// Most raw bytes (ClientHellos, tapped prefixes) held by queued observations; beyond it,
    /// observations are dropped (counted) as on a full queue.
    #[arg(long, value_name = "BYTES", default_value_t = config::DEFAULT_QUEUE_BYTES)]
    queue_bytes: usize,
    /// Most observations committed per transaction.
    #[arg(long, value_name = "N", default_value_t = config::DEFAULT_BATCH_SIZE)]
    batch_size: usize,
    /// Longest time an observation waits before its batch is committed.
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = parse_duration)]
    flush_interval: Duration,
    /// Stored observations older than this are pruned, a small batch at a time (`30d`, `12h`,
    /// `90m`; `0` keeps them for ever).
    #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = parse_retention)]
    retain: Duration,
    /// While the stored rows take more than this, the oldest are pruned (`10GiB`, `500MiB`,
    /// `2000000`; `0`: no cap). Freed pages are reused, the file does not shrink. SQLite only:
    /// on PostgreSQL only --retain prunes.
    #[arg(long, value_name = "BYTES", default_value = "10GiB", value_parser = parse_bytes)]
    max_db_size: u64,
    /// A MaxMind DB file (GeoLite2/GeoIP2 or DB-IP Lite country, city or ASN; IPinfo Lite);
    /// repeat for several: `/api/all` and the fingerprint page show the visitor's country and
    /// network, each from the first file that knows it, and name the files. Looked up as the
    /// echo answers, never stored; a file replaced or rewritten is read again without a restart.
    #[arg(long, value_name = "FILE")]
    geoip: Vec<PathBuf>,
    /// A p0f v3 signature database (`p0f.fp`, e.g. Debian's `/etc/p0f/p0f.fp`; none is
    /// shipped): `/api/all`'s `tcp.os` and the fingerprint page name the OS it gives each
    /// connection's SYN. Named as the echo answers, never stored.
    #[arg(long, value_name = "FILE")]
    p0f_db: Option<PathBuf>,
    /// Time open connections get to finish after SIGINT/SIGTERM before the queue is drained.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    shutdown_grace: Duration,
}

/// `250ms`, `10s`, `2m`, or a bare number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    exitvoice_exits::duration::parse(text, false).map_err(|e| e.to_string())
}

/// A retention: `30d`, or any duration the scheduler takes (`12h`, `90m`, `0`).
pub(super) fn parse_retention(text: &str) -> Result<Duration, String> {
    match text.strip_suffix('d') {
        Some(days) => days
            .parse::<u64>()
            .map(|days| Duration::from_secs(days * 24 * 3600))
            .map_err(|_| format!("`{text}`: expected whole days like 30d")),
        None => exitvoice_exits::duration::parse(text, true).map_err(|e| e.to_string()),
    }
}

/// A size in bytes: a plain number, or with `KiB`, `MiB`, `GiB` or `TiB`.
fn parse_bytes(text: &str) -> Result<u64, String> {
    let units = [
        ("KiB", 1_u64 << 10),
        ("MiB", 1 << 20),
        ("GiB", 1 << 30),
        ("TiB", 1 << 40),
    ];
    let (number, scale) = units
        .iter()
        .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n, *scale)))
        .unwrap_or((text, 1));
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("`{text}`: expected bytes like 10GiB, 500MiB or 2000000"))
}

/// Where ACME keeps its account and certificates: `<db>.acme/`, beside the database (the state
/// directory under systemd).
fn acme_cache(db: &std::path::Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".acme");
    PathBuf::from(name)
}

impl Args {
    fn into_config(self) -> anyhow::Result<Config> {
        let database = self.database.parse()?;
        // The size cap reads SQLite's free pages; PostgreSQL's space is its operators' to size
        // (pruning by age applies to both).
        let size_cap = database.sqlite_path().is_some() && self.max_db_size > 0;
        let acme_cache = acme_cache(&database.state_base());
        Ok(Config {
            listen: self.listen,
            database,
            cert: self.cert,
            key: self.key,
            record_dir: self.record_dir,
            api_token: self.api_token.and_then(ApiToken::new),
            store_peer_ip: self.store_peer_ip,
            proxy_protocol_from: self.proxy_protocol_from,
            metrics_listen: self.metrics_listen,
            quic: !self.no_quic,
            ledger_rule: NeverRule {
                spacing_ms: i64::try_from(self.ledger_spacing.as_millis()).unwrap_or(i64::MAX),
                span_ms: i64::try_from(self.ledger_span.as_millis()).unwrap_or(i64::MAX),
                ..NeverRule::default()
            },
            acme: (!self.acme_domain.is_empty()).then(|| AcmeSettings {
                domains: self.acme_domain,
                contact: self.acme_contact,
                directory: if self.acme_staging {
                    acme::LETS_ENCRYPT_STAGING.to_owned()
                } else {
                    self.acme_directory
                },
                directory_ca: self.acme_directory_ca,
                cache: acme_cache,
            }),
            limits: Limits {
                max_connections: self.max_connections,
                per_ip_connections: self.per_ip_connections,
                handshake_timeout: self.handshake_timeout,
                idle_timeout: self.idle_timeout,
                request_timeout: self.request_timeout,
                hello_cap: self.hello_cap,
                capture_bytes: self.capture_bytes,
                body_cap: self.body_cap,
                admission: AdmissionLimits {
                    rate: self.per_ip_rate,
                    burst: self.per_ip_burst,
                    strikes: self.penalty_strikes,
                    window: self.penalty_window,
                    penalty: self.penalty_time,
                },
            },
            writer: WriterConfig {
                queue_size: self.queue_size,
                queue_bytes: self.queue_bytes,
                batch_size: self.batch_size,
                flush_interval: self.flush_interval,
                retain: (!self.retain.is_zero()).then_some(self.retain),
                max_db_bytes: size_cap.then_some(self.max_db_size),
            },
            shutdown_grace: self.shutdown_grace,
            geoip: self.geoip,
            p0f_db: self.p0f_db,
        })
    }
}

/// Runs `exitvoice serve`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, not in journald or a log file.
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
    if let Some(path) = &args.config {
        println!("exitvoice serve: config {}", path.display());
    }
    let server = Server::bind(args.into_config()?).await?;
    // stdout carries the facts a user (or a test) needs, one per line.
    for addr in server.local_addrs() {
        println!("exitvoice serve: listening on https://{addr}");
    }
    for addr in server.quic_addrs() {
        println!("exitvoice serve: HTTP/3 on udp {addr}");
    }
    if let Some(addr) = server.metrics_addr() {
        println!("exitvoice serve: metrics on http://{addr}/metrics");
    }
    let origin = match server.cert_source() {
        CertSource::Acme(domains) => format!("ACME for {}", domains.join(", ")),
        CertSource::Generated(path) => format!("generated {}", path.display()),
        CertSource::Reused(path) => format!("self-signed {}", path.display()),
        _ => "from --cert".to_owned(),
    };
    println!(
        "exitvoice serve: certificate pin {} ({origin})",
        server.pin()
    );
    server.run(shutdown_signal()).await;
    println!("exitvoice serve: stopped");
    Ok(ExitCode::SUCCESS)
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_bare_seconds() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("10h").is_err());
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn retention_takes_days_and_sizes_take_binary_units() {
        assert_eq!(parse_retention("30d"), Ok(Duration::from_secs(2_592_000)));
        assert_eq!(parse_retention("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_retention("0"), Ok(Duration::ZERO));
        assert!(parse_retention("1.5d").is_err());
        assert_eq!(parse_bytes("10GiB"), Ok(10 << 30));
        assert_eq!(parse_bytes("500MiB"), Ok(500 << 20));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("10GB").is_err());
        assert!(parse_bytes("99999999999TiB").is_err());
    }
}
