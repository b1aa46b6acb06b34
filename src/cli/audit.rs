//! `exitvoice audit` and `exitvoice labels`.
//!
//! `audit` reads the exits file, probes every exit (after a direct baseline), stores the probes
//! and a labels snapshot in the database, prints a one-screen summary table, and writes the
//! labels JSON with `--labels-out`. `--once` runs once (cron, systemd timers); `--every 1h`
//! runs forever with ±10% jitter between runs, and probes the exits whose state or route just
//! changed again after `--recheck` (5 min) until they settle. `--preflight` runs once and exits
//! 0 when the pool passes, 3 when it fails. Logs go to stderr: human-readable on a TTY,
//! JSON lines otherwise. Passwords never reach logs, labels or the database (exit URLs are
//! redacted everywhere).

use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use super::database::DatabaseArg;
use super::progress::ProbeBar;
use super::serve::parse_retention;
use anyhow::Context;
use exitvoice_auditor::drift::DriftConfig;
use exitvoice_auditor::exposition::{self, AuditMetrics};
use exitvoice_auditor::labels::RouteRule;
use exitvoice_auditor::pool::{place_label, Placing};
use exitvoice_auditor::preflight::{self, Thresholds};
use exitvoice_auditor::probe::chromium::ChromiumConfig;
use exitvoice_auditor::probe::H2Profile;
use exitvoice_auditor::schedule::{self, Persona, RunConfig};
use exitvoice_exits::dial::Timeouts;
use exitvoice_exits::{EchoTarget, ExitsFile, SessionMinter};
use exitvoice_geo::{GeoIp, Refreshed};
use exitvoice_schema::{ExitLabel, LabelsJsonWriter};
use rand::Rng;

/// Flags of `exitvoice audit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// TOML file whose `[audit]` table sets any option below (keys are the flags' names);
    /// flags and `EXITVOICE_*` variables take precedence over it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Exits file: TOML (`[echo]`, `[route]`, `[[exits]]`) or one proxy URL per line.
    #[arg(long, value_name = "FILE")]
    exits: PathBuf,
    /// Where probes and labels are stored.
    #[command(flatten)]
    database: DatabaseArg,
    /// Run once and exit (the default).
    #[arg(long, conflicts_with = "every")]
    once: bool,
    /// After each run, probes and labels snapshots from longer than this before the run's
    /// start are deleted (`30d`, `12h`; `0` keeps them for ever); the latest published
    /// snapshot of each persona always stays.
    #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = parse_retention)]
    retain: Duration,
    /// Run forever, one run every DURATION (±10% jitter): `30m`, `1h`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    every: Option<Duration>,
    /// With --every: exits whose drift state, route or coherence changed in a run are probed
    /// again after DURATION, until they settle, instead of waiting for the next full run.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    recheck: Duration,
    /// Auditors sharing one database split the exits: each exit is claimed by one auditor at a
    /// time (and, with --every, once per period). A claim lasts DURATION unless renewed (a live
    /// auditor renews every third of it), so a dead auditor's exits are taken after that.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    lease_ttl: Duration,
    /// With --every: serve Prometheus metrics (OpenMetrics text, plain HTTP) at
    /// http://ADDR/metrics: runs, probes by outcome, the latest run's exits by state, bucket and
    /// route, its duration. Off by default; not authenticated.
    #[arg(long, value_name = "ADDR", requires = "every")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Write the labels JSON here after each run.
    #[arg(long, value_name = "FILE")]
    labels_out: Option<PathBuf>,
    /// Samples per exit per run (default 4; 1 with --preflight).
    #[arg(long, value_name = "K")]
    samples: Option<u32>,
    /// Most probes in flight at once.
    #[arg(long, value_name = "N", default_value_t = 8)]
    concurrency: usize,
    /// Who probes: `rustls` (built-in client with --profile) or `chromium` (headless Chromium
    /// through a loopback shim that adds the exit's credentials).
    #[arg(long, value_name = "NAME", default_value = "rustls")]
    persona: String,
    /// Chromium binary for `--persona chromium`.
    #[arg(long, value_name = "PATH", default_value = "chromium")]
    chromium: PathBuf,
    /// HTTP/2 profile of the built-in persona: `chrome` or `rustls-default`.
    #[arg(long, value_name = "NAME", default_value = "chrome")]
    profile: String,
    /// Echo server URL (overrides the exits file; needed for a plain list).
    #[arg(long, value_name = "URL", requires = "echo_pin")]
    echo_url: Option<String>,
    /// Echo certificate SPKI pin: `sha256//<base64>` (as `serve` prints it) or 64 hex digits.
    #[arg(long, value_name = "PIN", requires = "echo_url")]
    echo_pin: Option<String>,
    /// TCP connect limit.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    connect_timeout: Duration,
    /// Proxy handshake (CONNECT / SOCKS5) limit.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    tunnel_timeout: Duration,
    /// TLS handshake limit.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    tls_timeout: Duration,
    /// Request + echo response limit.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    response_timeout: Duration,
    /// Make no QUIC probes. By default a run sends one HTTP/3 request over UDP straight to the
    /// echo and, while that one gets through, one per exit after its first sample (through a
    /// SOCKS5 exit's UDP relay; an HTTP CONNECT exit carries no UDP and is not sent one); the
    /// labels' `h3` and `flags.h3_gap` come from them.
    #[arg(long)]
    no_quic: bool,
    /// The QUIC probes' handshake limit: through an exit whose relay drops UDP it always runs
    /// out, so it is shorter than --tls-timeout.
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = parse_duration)]
    quic_timeout: Duration,
    /// A MaxMind DB file (GeoLite2/GeoIP2 or DB-IP Lite country, city or ASN; IPinfo Lite);
    /// repeat for several. Each sample's egress address is looked up when it is recorded and
    /// stored with it; labels gain `geo`, `flags.geo_changed`, the pool by country and network,
    /// and `geo_mismatch` against an exit's `country` / `asn`. A replaced file is read again.
    #[arg(long, value_name = "FILE")]
    geoip: Vec<PathBuf>,
    /// Gap between two samples of one exit (plus jitter).
    #[arg(long, value_name = "DURATION", default_value = "200ms", value_parser = parse_duration)]
    spacing: Duration,
    /// Largest random extra gap between samples.
    #[arg(long, value_name = "DURATION", default_value = "300ms", value_parser = parse_duration)]
    jitter: Duration,
    /// Retries of transient failures (timeouts, resets, DNS).
    #[arg(long, value_name = "N", default_value_t = 2)]
    retries: u32,
    /// Fewer successful samples in the window than this → drift state `unknown`.
    #[arg(long, value_name = "N", default_value_t = 3)]
    min_samples: usize,
    /// Consecutive clean probes a quarantined exit needs to leave quarantine (overrides the
    /// exits file's `[route] recover_after`, default 4).
    #[arg(long, value_name = "N")]
    recover_after: Option<u32>,
    /// Check the pool once and exit 0 when it passes, 3 when it fails (reasons on stdout):
    /// one quick sample per exit unless --samples says otherwise.
    #[arg(long, conflicts_with = "every")]
    preflight: bool,
    /// --preflight: least share of exits that must pass.
    #[arg(
        long,
        value_name = "SHARE",
        default_value_t = 0.8,
        requires = "preflight"
    )]
    min_pass: f64,
    /// --preflight: least number of distinct egress addresses over the pool.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "preflight")]
    min_unique_egress: u32,
    /// --preflight: largest p95 latency an exit may have.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "preflight")]
    max_p95: Option<Duration>,
    /// --preflight: least share of bucket A among the exits that spoke HTTP/2.
    #[arg(long, value_name = "SHARE", requires = "preflight")]
    min_h2_health: Option<f64>,
    /// --preflight: the operating system every exit host's TCP stack must show (`linux`,
    /// `windows`, `macos`, …), as the echo server's p0f database (`serve --p0f-db`) names it.
    #[arg(long, value_name = "OS", requires = "preflight")]
    expect_os: Option<String>,
}

/// Exit code of a preflight whose pool fails.
const PREFLIGHT_FAILED: u8 = 3;

/// Flags of `exitvoice labels`.
#[derive(Debug, clap::Args)]
pub struct LabelsArgs {
    /// The database `audit` wrote.
    #[command(flatten)]
    database: DatabaseArg,
    /// Write the labels here instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// `json` (the snapshot as stored), or `csv`: one row per exit (name, redacted url, route,
    /// reasons, state, bucket, egress, success rate, p50/p95 latency, last probe), RFC 4180,
    /// with formula-like cells made text by a leading `'`.
    #[arg(long, value_enum, default_value_t = LabelsFormat::Json)]
    format: LabelsFormat,
    /// A MaxMind DB file, as `audit --geoip` takes (repeat for several): exits whose labels
    /// have no places (audited without `--geoip`) are placed by their egress addresses now,
    /// and the pool counted by country and network. Routes and `geo_changed` stay the audit's.
    #[arg(long, value_name = "FILE")]
    geoip: Vec<PathBuf>,
}

/// How `labels` prints the snapshot.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum LabelsFormat {
    Json,
    Csv,
}

/// `250ms`, `10s`, `2m`, `1h`, or a bare number of seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    exitvoice_exits::duration::parse(text, true).map_err(|e| e.to_string())
}

/// Logs to stderr: human-readable on a TTY (warnings only), written through the progress bar
/// so that it is drawn again below them; JSON lines otherwise.
pub(crate) fn init_logs() {
    let filter = |default| {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default))
    };
    let builder = tracing_subscriber::fmt();
    let _ = if std::io::stderr().is_terminal() {
        // On a TTY the progress bar replaces the per-probe info logs.
        builder
            .with_env_filter(filter("warn"))
            .with_writer(|| super::progress::ThroughBars)
            .try_init()
    } else {
        builder
            .with_env_filter(filter("info"))
            .with_writer(std::io::stderr)
            .json()
            .try_init()
    };
}

/// A file written beside its path and renamed into place once whole: a reader never sees
/// half a file.
struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
}

impl AtomicFile {
    fn create(path: &std::path::Path) -> anyhow::Result<Self> {
        let tmp = path.with_extension("tmp");
        let file =
            std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
        Ok(Self {
            path: path.to_owned(),
            tmp,
            out: std::io::BufWriter::new(file),
        })
    }

    fn commit(mut self) -> anyhow::Result<()> {
        self.out
            .flush()
            .with_context(|| format!("writing {}", self.tmp.display()))?;
        std::fs::rename(&self.tmp, &self.path)
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

impl std::io::Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// What `audit` prints of a run's labels, and writes with `--labels-out`: one pass over the
/// stored snapshot, a page of exits at a time.
struct RunOutput<'t> {
    labels_out: Option<LabelsJsonWriter<AtomicFile>>,
    judge: Option<preflight::Judge<'t>>,
    table: std::io::Stdout,
}

impl<'t> RunOutput<'t> {
    /// Reads snapshot `id` and prints, writes and judges each exit's label.
    async fn each_exit(
        store: &exitvoice_store::Store,
        id: i64,
        labels_out: Option<&std::path::Path>,
        thresholds: Option<&'t Thresholds>,
    ) -> anyhow::Result<Option<preflight::Verdict>> {
        let mut reader = store
            .read_labels(id)
            .await?
            .context("the run's labels snapshot is not in the database")?;
        let labels_out = match labels_out {
            Some(path) => Some(
                LabelsJsonWriter::begin(AtomicFile::create(path)?, reader.header())
                    .with_context(|| format!("writing {}", path.display()))?,
            ),
            None => None,
        };
        let mut output = RunOutput {
            labels_out,
            judge: thresholds.map(preflight::Judge::new),
            table: std::io::stdout(),
        };
        output.row(None)?;
        while let Some(page) = reader.next_page().await? {
            for label in &page {
                output.exit(label)?;
            }
        }
        if let Some(json) = output.labels_out.take() {
            json.end().context("writing --labels-out")?.commit()?;
        }
        let pool = reader.header().pool.clone().unwrap_or_default();
        Ok(output.judge.take().map(|judge| judge.finish(&pool)))
    }

    fn exit(&mut self, label: &ExitLabel) -> anyhow::Result<()> {
        if let Some(json) = &mut self.labels_out {
            json.exit(label).context("writing --labels-out")?;
        }
        if let Some(judge) = &mut self.judge {
            judge.add(label);
        }
        self.row(Some(label))
    }

    /// Prints the summary table's head (`None`) or an exit's row.
    fn row(&mut self, label: Option<&ExitLabel>) -> anyhow::Result<()> {
        let yes = |b: bool| if b { "yes" } else { "no" };
        let cells: [String; 12] = match label {
            None => [
                "exit", "state", "bucket", "route", "tls", "h2", "alpn", "remux", "mitm",
                "samples", "errors", "p50 ms",
            ]
            .map(str::to_owned),
            Some(label) => [
                label.name.chars().take(28).collect(),
                label.state.to_string(),
                label.bucket.map_or("-".to_owned(), |b| b.to_string()),
                label.route.to_string(),
                yes(label.flags.tls_preserved).to_owned(),
                yes(label.flags.h2_preserved).to_owned(),
                yes(label.flags.alpn_preserved).to_owned(),
                yes(label.flags.remuxed).to_owned(),
                yes(label.flags.tls_intercepted).to_owned(),
                label.samples.to_string(),
                label.errors.values().sum::<u32>().to_string(),
                label
                    .latency
                    .p50_ms
                    .map_or("-".to_owned(), |v| v.to_string()),
            ],
        };
        let [exit, state, bucket, route, tls, h2, alpn, remux, mitm, samples, errors, p50] = &cells;
        writeln!(
            self.table,
            "{exit:<28} {state:<11} {bucket:<6} {route:<10} {tls:<4} {h2:<4} {alpn:<4} \
             {remux:<5} {mitm:<4} {samples:>7} {errors:>6} {p50:>7}"
        )?;
        Ok(())
    }
}

fn preflight_table(verdict: &preflight::Verdict) -> String {
    let mut out = format!("\n{:<28} {:<7} reasons\n", "exit", "verdict");
    for exit in &verdict.exits {
        let name: String = exit.name.chars().take(28).collect();
        let (word, why) = if exit.reasons.is_empty() {
            ("pass", "-".to_owned())
        } else {
            ("FAIL", exit.reasons.join("; "))
        };
        out.push_str(&format!("{name:<28} {word:<7} {why}\n"));
    }
    let buckets: Vec<String> = verdict
        .buckets
        .iter()
        .map(|(b, n)| format!("{b}:{n}"))
        .collect();
    out.push_str(&format!(
        "pool: pass share {:.2}, tls preserved {:.2}, buckets {}, h2_health {}, unique egress {}\n",
        verdict.pass_share,
        verdict.tls_preserved_share,
        buckets.join(" "),
        verdict
            .h2_health
            .map_or("-".to_owned(), |h| format!("{h:.2}")),
        verdict.unique_egress,
    ));
    if verdict.passed() {
        out.push_str("preflight: pass\n");
    } else {
        out.push_str(&format!(
            "preflight: FAIL: {}\n",
            verdict.failures.join("; ")
        ));
    }
    out
}

/// Runs `exitvoice audit`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    init_logs();
    if let Some(path) = &args.config {
        tracing::info!(config = %path.display(), "configuration file");
    }
    let bytes =
        std::fs::read(&args.exits).with_context(|| format!("reading {}", args.exits.display()))?;
    let file = ExitsFile::<RouteRule>::parse(&bytes)?;
    let echo = match (&args.echo_url, &args.echo_pin) {
        (Some(url), Some(pin)) => EchoTarget::new(url, pin)?,
        _ => file.echo.clone().context(
            "no echo server: add [echo] to the exits file or pass --echo-url/--echo-pin",
        )?,
    };
    let profile = H2Profile::named(&args.profile).with_context(|| {
        format!(
            "unknown profile {:?} (chrome, rustls-default)",
            args.profile
        )
    })?;
    let persona = match args.persona.as_str() {
        "rustls" => Persona::Rustls,
        "chromium" => Persona::Chromium(ChromiumConfig {
            binary: args.chromium.clone(),
            ..ChromiumConfig::default()
        }),
        other => anyhow::bail!("unknown persona {other:?} (rustls, chromium)"),
    };
    if args.lease_ttl < Duration::from_secs(1) {
        anyhow::bail!("--lease-ttl must be at least 1s");
    }
    let config = RunConfig {
        persona,
        samples: args
            .samples
            .unwrap_or(if args.preflight { 1 } else { 4 })
            .max(1),
        concurrency: args.concurrency.max(1),
        timeouts: Timeouts {
            connect: args.connect_timeout,
            tunnel: args.tunnel_timeout,
            tls: args.tls_timeout,
            response: args.response_timeout,
        },
        spacing: args.spacing,
        jitter: args.jitter,
        retries: args.retries,
        profile,
        drift: DriftConfig {
            min_samples: args.min_samples,
            ..DriftConfig::default()
        },
        route: RouteRule {
            recover_after: args.recover_after.unwrap_or(file.route.recover_after),
            ..file.route.clone()
        },
        lease_ttl: args.lease_ttl,
        period: args.every,
        quic: !args.no_quic,
        quic_timeout: args.quic_timeout,
        geo: open_geo(&args.geoip)?,
        ..RunConfig::default()
    };
    let store = args.database.open().await?;
    let metrics = Arc::new(AuditMetrics::default());
    if let Some(addr) = args.metrics_listen {
        let (listener, local) = exposition::bind(addr)
            .await
            .with_context(|| format!("binding the metrics listener {addr}"))?;
        println!("metrics on http://{local}/metrics");
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            if let Err(error) = exposition::serve(listener, metrics).await {
                tracing::error!(%error, "metrics listener failed");
            }
        });
    }
    let mut exits = file.exits;
    let mut minter = SessionMinter::new();
    // `None`: a full run; `Some(names)`: a re-check of the exits whose label just changed.
    let mut recheck: Option<Vec<String>> = None;
    let mut next_full = tokio::time::Instant::now();
    loop {
        // A progress bar on a TTY; structured logs carry the same facts otherwise.
        let bar = std::io::stderr()
            .is_terminal()
            .then(|| ProbeBar::start(Arc::clone(&config.progress)));
        let started = std::time::Instant::now();
        // --retain counts from the run's start, so a run longer than it keeps its own work.
        let prune_before =
            (!args.retain.is_zero()).then(|| exitvoice_auditor::record::rfc3339_ago(args.retain));
        let result = match &recheck {
            None => schedule::run_once(&mut exits, &echo, &config, &store, &mut minter).await,
            Some(names) => {
                schedule::run_some(&mut exits, names, &echo, &config, &store, &mut minter).await
            }
        };
        if let Some(bar) = bar {
            bar.finish();
        }
        let report = result?;
        let pool = report.labels.header.pool.clone().unwrap_or_default();
        metrics.record_run(
            &report.outcomes,
            &pool,
            started.elapsed(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
        );
        metrics.record_claims(report.claimed, report.left_to_others);
        tracing::info!(
            run = %report.run_id,
            probes = report.outcomes.total(),
            exits_claimed = report.claimed,
            exits_left_to_others = report.left_to_others,
            violations = report.violations,
            recheck = recheck.is_some(),
            "audit run finished"
        );
        let thresholds = Thresholds {
            min_pass: args.min_pass,
            min_unique_egress: args.min_unique_egress,
            max_p95_ms: args
                .max_p95
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            min_h2_health: args.min_h2_health,
            expect_os: args.expect_os.clone(),
        };
        let verdict = RunOutput::each_exit(
            &store,
            report.labels.id,
            args.labels_out.as_deref(),
            args.preflight.then_some(&thresholds),
        )
        .await;
        // Another auditor published the period's snapshot: this run's own was only for its
        // output.
        if !report.labels.published {
            store.discard_labels(report.labels.id).await?;
        }
        if let Some(before) = prune_before {
            prune_past(&store, &before).await;
        }
        let verdict = verdict?;
        println!("same-exit overlaps (must be 0): {}", report.violations);
        if report.violations > 0 {
            return Ok(ExitCode::FAILURE);
        }
        if let Some(verdict) = verdict {
            print!("{}", preflight_table(&verdict));
            return Ok(if verdict.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(PREFLIGHT_FAILED)
            });
        }
        let Some(every) = args.every else {
            return Ok(ExitCode::SUCCESS);
        };
        if recheck.is_none() {
            let spread = every.as_secs_f64() * 0.1;
            let wait = every.as_secs_f64() + rand::rng().random_range(-spread..=spread);
            next_full += Duration::from_secs_f64(wait.max(1.0));
        }
        // Exits whose state, route or coherence just changed are probed again after --recheck, until they
        // settle, as long as that comes before the next full run.
        let unsettled = report.labels.unsettled;
        let now = tokio::time::Instant::now();
        let (wake, next) = if !unsettled.is_empty() && now + args.recheck < next_full {
            (now + args.recheck, Some(unsettled))
        } else {
            (next_full.max(now), None)
        };
        recheck = next;
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// Rows deleted a statement when pruning past --retain: short enough that probes being written
/// by other auditors wait little.
const PRUNE_BATCH: u32 = 2_000;

/// Deletes the probes and labels snapshots from before `before` (RFC 3339); a failure is
/// logged, not fatal (the run's own work is stored, and the next run prunes again).
async fn prune_past(store: &exitvoice_store::Store, before: &str) {
    match store.prune_audit(before, PRUNE_BATCH).await {
        Ok(pruned) if pruned.probes + pruned.snapshots > 0 => tracing::info!(
            probes = pruned.probes,
            snapshots = pruned.snapshots,
            before,
            "pruned what is older than --retain"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "pruning what is older than --retain failed"),
    }
}

/// Runs `exitvoice labels`.
pub async fn labels(args: LabelsArgs) -> anyhow::Result<ExitCode> {
    // A database that does not read stops the command before the store is opened.
    let geo = (!args.geoip.is_empty())
        .then(|| GeoIp::open(&args.geoip))
        .transpose()?;
    let store = args.database.open().await?;
    let id = store
        .latest_labels_id()
        .await?
        .context("no labels yet: run `exitvoice audit` first")?;
    let mut reader = store.read_labels(id).await?.context(SNAPSHOT_GONE)?;
    let mut header = reader.header().clone();
    // The pool's places are counted again over every exit before the first one is written.
    if let Some(geo) = &geo {
        let mut placing = Placing::default();
        while let Some(mut page) = reader.next_page().await? {
            for label in &mut page {
                placing.place(label, geo);
            }
        }
        placing.recount(header.pool.as_mut(), geo);
    }
    let mut file = args.out.as_deref().map(AtomicFile::create).transpose()?;
    let mut stdout = std::io::BufWriter::new(std::io::stdout());
    let out: &mut dyn std::io::Write = match &mut file {
        Some(file) => file,
        None => &mut stdout,
    };
    match export(&store, id, &header, geo.as_ref(), args.format, out).await {
        Ok(()) => {}
        // A reader that stops early (`| head`) is not an error of ours.
        Err(error) if file.is_none() && broken_pipe(&error) => {}
        Err(error) => return Err(error),
    }
    if let Some(file) = file {
        file.commit()?;
    }
    Ok(ExitCode::SUCCESS)
}

const SNAPSHOT_GONE: &str = "the labels snapshot left the database while it was read";

/// Writes snapshot `id` as `format` with `header` (its pool counted again under `--geoip`), a
/// page of exits at a time.
async fn export(
    store: &exitvoice_store::Store,
    id: i64,
    header: &exitvoice_schema::LabelsDoc,
    geo: Option<&GeoIp>,
    format: LabelsFormat,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    enum Writer<'o> {
        Json(LabelsJsonWriter<&'o mut dyn std::io::Write>),
        Csv(Box<exitvoice_schema::LabelsCsvWriter<&'o mut dyn std::io::Write>>),
    }
    let mut reader = store.read_labels(id).await?.context(SNAPSHOT_GONE)?;
    let mut writer = match format {
        LabelsFormat::Json => Writer::Json(LabelsJsonWriter::begin(out, header)?),
        LabelsFormat::Csv => Writer::Csv(Box::new(exitvoice_schema::LabelsCsvWriter::new(out)?)),
    };
    while let Some(mut page) = reader.next_page().await? {
        for label in &mut page {
            if let Some(geo) = geo {
                place_label(label, geo);
            }
            match &mut writer {
                Writer::Json(json) => json.exit(label)?,
                Writer::Csv(csv) => csv.exit(label)?,
            }
        }
    }
    let out = match writer {
        Writer::Json(json) => json.end()?,
        Writer::Csv(csv) => csv.end()?,
    };
    Ok(out.flush()?)
}

/// Whether `error` is a write to a reader that went away.
fn broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The `--geoip` databases (a file that does not read is an error naming it), read again every
/// minute when they change.
pub(crate) fn open_geo(paths: &[PathBuf]) -> anyhow::Result<Option<Arc<GeoIp>>> {
    if paths.is_empty() {
        return Ok(None);
    }
    let geo = Arc::new(GeoIp::open(paths)?);
    exitvoice_geo::spawn_refresh(&geo, Duration::from_secs(60), |outcome| match outcome {
        Refreshed::Reloaded(source) => {
            tracing::info!(file = %source.file, build_date = %source.build_date, "geo database read again");
        }
        Refreshed::Failed(error) => {
            tracing::warn!(%error, "geo database changed but did not read; its last good contents stay");
        }
    });
    Ok(Some(geo))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("1d").is_err());
    }
}
