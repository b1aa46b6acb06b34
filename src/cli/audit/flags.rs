//! The flags of `exitvoice audit`.

use std::path::PathBuf;
use std::time::Duration;

use super::super::database::DatabaseArg;
use super::super::serve::parse_retention;
use super::super::shared::parse_duration;

/// Flags of `exitvoice audit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// TOML file whose `[audit]` table sets any option below (keys are the flags' names);
    /// flags and `EXITVOICE_*` variables take precedence over it.
    #[arg(long, value_name = "FILE")]
    pub(super) config: Option<PathBuf>,
    /// Exits file: TOML (`[echo]`, `[route]`, `[[exits]]`) or one proxy URL per line.
    #[arg(long, value_name = "FILE")]
    pub(super) exits: PathBuf,
    /// Where probes and labels are stored.
    #[command(flatten)]
    pub(super) database: DatabaseArg,
    /// Run once and exit (the default).
    #[arg(long, conflicts_with = "every")]
    pub(super) once: bool,
    /// After each run, probes and labels snapshots from longer than this before the run's
    /// start are deleted (`30d`, `12h`; `0` keeps them for ever); the latest published
    /// snapshot of each persona always stays.
    #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = parse_retention)]
    pub(super) retain: Duration,
    /// Run forever, one run every DURATION (±10% jitter): `30m`, `1h`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(super) every: Option<Duration>,
    /// With --every: exits whose drift state, route or coherence changed in a run are probed
    /// again after DURATION, until they settle, instead of waiting for the next full run.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub(super) recheck: Duration,
    /// Auditors sharing one database split the exits: each exit is claimed by one auditor at a
    /// time (and, with --every, once per period). A claim lasts DURATION unless renewed (a live
    /// auditor renews every third of it), so a dead auditor's exits are taken after that.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub(super) lease_ttl: Duration,
    /// With --every: serve Prometheus metrics (OpenMetrics text, plain HTTP) at
    /// http://ADDR/metrics: runs, probes by outcome, the latest run's exits by state, bucket and
    /// route, its duration. Off by default; not authenticated.
    #[arg(long, value_name = "ADDR", requires = "every")]
    pub(super) metrics_listen: Option<std::net::SocketAddr>,
    /// Write the labels JSON here after each run.
    #[arg(long, value_name = "FILE")]
    pub(super) labels_out: Option<PathBuf>,
    /// Samples per exit per run (default 4; 1 with --preflight).
    #[arg(long, value_name = "K")]
    pub(super) samples: Option<u32>,
    /// Most probes in flight at once.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub(super) concurrency: usize,
    /// Who probes: `rustls` (built-in client with --profile) or `chromium` (headless Chromium
    /// through a loopback shim that adds the exit's credentials).
    #[arg(long, value_name = "NAME", default_value = "rustls")]
    pub(super) persona: String,
    /// Chromium binary for `--persona chromium`.
    #[arg(long, value_name = "PATH", default_value = "chromium")]
    pub(super) chromium: PathBuf,
    /// HTTP/2 profile of the built-in persona: `chrome` or `rustls-default`.
    #[arg(long, value_name = "NAME", default_value = "chrome")]
    pub(super) profile: String,
    /// Echo server URL (overrides the exits file; needed for a plain list).
    #[arg(long, value_name = "URL", requires = "echo_pin")]
    pub(super) echo_url: Option<String>,
    /// Echo certificate SPKI pin: `sha256//<base64>` (as `serve` prints it) or 64 hex digits.
    #[arg(long, value_name = "PIN", requires = "echo_url")]
    pub(super) echo_pin: Option<String>,
    /// TCP connect limit.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub(super) connect_timeout: Duration,
    /// Proxy handshake (CONNECT / SOCKS5) limit.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub(super) tunnel_timeout: Duration,
    /// TLS handshake limit.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub(super) tls_timeout: Duration,
    /// Request + echo response limit.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub(super) response_timeout: Duration,
    /// Make no QUIC probes. By default a run sends one HTTP/3 request over UDP straight to the
    /// echo and, while that one gets through, one per exit after its first sample (through a
    /// SOCKS5 exit's UDP relay; an HTTP CONNECT exit carries no UDP and is not sent one); the
    /// labels' `h3` and `flags.h3_gap` come from them.
    #[arg(long)]
    pub(super) no_quic: bool,
    /// The QUIC probes' handshake limit: through an exit whose relay drops UDP it always runs
    /// out, so it is shorter than --tls-timeout.
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = parse_duration)]
    pub(super) quic_timeout: Duration,
    /// A MaxMind DB file (GeoLite2/GeoIP2 or DB-IP Lite country, city or ASN; IPinfo Lite);
    /// repeat for several. Each sample's egress address is looked up when it is recorded and
    /// stored with it; labels gain `geo`, `flags.geo_changed`, the pool by country and network,
    /// and `geo_mismatch` against an exit's `country` / `asn`. A replaced file is read again.
    #[arg(long, value_name = "FILE")]
    pub(super) geoip: Vec<PathBuf>,
    /// Gap between two samples of one exit (plus jitter).
    #[arg(long, value_name = "DURATION", default_value = "200ms", value_parser = parse_duration)]
    pub(super) spacing: Duration,
    /// Largest random extra gap between samples.
    #[arg(long, value_name = "DURATION", default_value = "300ms", value_parser = parse_duration)]
    pub(super) jitter: Duration,
    /// Retries of transient failures (timeouts, resets, DNS).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub(super) retries: u32,
    /// Fewer successful samples in the window than this → drift state `unknown`.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub(super) min_samples: usize,
    /// Consecutive clean probes a quarantined exit needs to leave quarantine (overrides the
    /// exits file's `[route] recover_after`, default 4).
    #[arg(long, value_name = "N")]
    pub(super) recover_after: Option<u32>,
    /// Check the pool once and exit 0 when it passes, 3 when it fails (reasons on stdout):
    /// one quick sample per exit unless --samples says otherwise.
    #[arg(long, conflicts_with = "every")]
    pub(super) preflight: bool,
    /// --preflight: least share of exits that must pass.
    #[arg(
        long,
        value_name = "SHARE",
        default_value_t = 0.8,
        requires = "preflight"
    )]
    pub(super) min_pass: f64,
    /// --preflight: least number of distinct egress addresses over the pool.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "preflight")]
    pub(super) min_unique_egress: u32,
    /// --preflight: largest p95 latency an exit may have.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "preflight")]
    pub(super) max_p95: Option<Duration>,
    /// --preflight: least share of bucket A among the exits that spoke HTTP/2.
    #[arg(long, value_name = "SHARE", requires = "preflight")]
    pub(super) min_h2_health: Option<f64>,
    /// --preflight: the operating system every exit host's TCP stack must show (`linux`,
    /// `windows`, `macos`, …), as the echo server's p0f database (`serve --p0f-db`) names it.
    #[arg(long, value_name = "OS", requires = "preflight")]
    pub(super) expect_os: Option<String>,
}
