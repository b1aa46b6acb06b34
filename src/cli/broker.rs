//! `exitvoice broker`: the lease broker (`exitvoice_broker`) over the exits file and the
//! auditor's labels in the database. Several instances may share one database. Plain HTTP on a
//! loopback address; TLS with `--cert/--key`, or `--tls` for a self-signed pair (the echo
//! server's loader: reused from, or written beside, the SQLite database or the exits file). A
//! non-loopback address needs both TLS and a token.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use exitvoice_broker::auth::{BrokerToken, MIN_TOKEN_CHARS};
use exitvoice_broker::lease_store::LeaseStore;
use exitvoice_broker::pool::Pool;
use exitvoice_broker::proxy::{Proxy, ProxySettings};
use exitvoice_broker::redis_leases::{Epochs, RedisLeases, RedisUrl};
use exitvoice_broker::service::{Broker, BrokerConfig};
use exitvoice_broker::sql_leases::SqlLeases;
use exitvoice_exits::ExitsFile;
use exitvoice_store::Store;

use super::database::{DatabaseArg, DatabaseText};
use super::serve::parse_retention;
use super::shared::{init_logs, parse_duration};

/// Flags of `exitvoice broker` (each also `EXITVOICE_<NAME>` and a key of `[broker]`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// TOML file whose `[broker]` table sets any option below (keys are the flags' names);
    /// flags and `EXITVOICE_*` variables take precedence over it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The exits file (the auditor's).
    #[arg(long, value_name = "FILE")]
    exits: PathBuf,
    /// The database with the auditor's labels; the broker keeps its state there too, unless
    /// `--store` names another.
    #[command(flatten)]
    database: DatabaseArg,
    /// Where the broker keeps its state (leases, fences, bans) when not in `--database`: a
    /// SQLite file or a `postgres://` URL, as `--database` takes, a `redis://` or `rediss://`
    /// URL, a Redis Cluster's `redis+cluster://host:port,host:port/`, or the sentinels of a
    /// primary as `redis+sentinel://host:port,host:port/<name>`. Prefer the environment
    /// variable for a password.
    #[arg(
        long,
        value_name = "FILE|URL",
        env = "EXITVOICE_BROKER_STORE_URL",
        hide_env_values = true
    )]
    store: Option<DatabaseText>,
    /// PEM certificates to trust for a `rediss://` (or `rediss+…://`) `--store`, instead of the
    /// system's roots.
    #[arg(long, value_name = "FILE")]
    redis_ca: Option<PathBuf>,
    /// The pool's name on a Redis `--store`: its keys start `exitvoice:{NAME}:`, one Redis
    /// Cluster slot. Brokers sharing a pool give the same name.
    #[arg(long, value_name = "NAME", default_value = "broker")]
    redis_pool: String,
    /// Where to listen. A non-loopback address needs TLS and `--broker-token`.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8490")]
    listen: SocketAddr,
    /// PEM certificate chain to serve TLS with (with `--key`).
    #[arg(long, value_name = "FILE", requires = "key")]
    cert: Option<PathBuf>,
    /// PEM private key of `--cert`.
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<PathBuf>,
    /// Serve TLS with a self-signed certificate, made on first start and kept beside the SQLite
    /// database (or the exits file); its pin is printed for workers to check.
    #[arg(long, conflicts_with_all = ["cert", "key"])]
    tls: bool,
    /// The bearer token every request but `/healthz` must carry (at least 16 characters).
    /// Prefer the environment variable, which keeps it out of `ps`.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "EXITVOICE_BROKER_TOKEN",
        hide_env_values = true
    )]
    broker_token: Option<String>,
    /// Whose labels count: `rustls/chrome` (the auditor's default), `rustls/rustls-default`,
    /// `chromium`.
    #[arg(long, default_value = "rustls/chrome")]
    persona: String,
    /// A lease's time to live when the request names none.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    default_ttl: Duration,
    /// The longest time to live a request may ask for.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    max_ttl: Duration,
    /// The longest life of a lease, renewals included (a gateway's stays below its `sticky`
    /// window by a tenth of it).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_duration)]
    max_life: Duration,
    /// The longest `wait_ms` a request may ask for.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    max_wait: Duration,
    /// Labels whose newest probe is older admit nothing.
    #[arg(long, value_name = "DURATION", default_value = "2h", value_parser = parse_duration)]
    labels_max_age: Duration,
    /// How often the labels are read again (a quarantined exit's leases are revoked then).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    labels_refresh: Duration,
    /// Stateless leases that may share one exit.
    #[arg(long, value_name = "N", default_value_t = 2)]
    stateless_per_exit: u32,
    /// Stateless leases one exit may carry for one origin at once (0: no cap of its own, only
    /// `--stateless-per-exit`).
    #[arg(long, value_name = "N", default_value_t = 0)]
    stateless_per_origin: u32,
    /// The first ban's length (doubled for each repeat, with jitter).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_duration)]
    ban_ttl: Duration,
    /// `timeout`/`error` outcomes in a row that ban an exit.
    #[arg(long, value_name = "N", default_value_t = 3)]
    error_streak: u32,
    /// Leases that ended longer ago than this are deleted (`1d`, `12h`; `0` keeps them for
    /// ever). `GET /v1/exits` reports the last hour; fences and retired session ids are kept
    /// apart and never pruned.
    #[arg(long, value_name = "DURATION", default_value = "1d", value_parser = parse_retention)]
    retain: Duration,
    /// This instance's name in metrics (default: `<host>-<pid>`).
    #[arg(long, value_name = "NAME")]
    instance: Option<String>,
    /// Units this instance holds in reserve (leases of its own in the store, renewed) to grant
    /// from while the store is out of reach; no other instance grants them meanwhile. 0: none,
    /// and an outage answers 503.
    #[arg(long, value_name = "N", default_value_t = 0)]
    reserve: usize,
    /// How long the reserve's leases run between renewals: the longest outage the reserve
    /// bridges (its sub-leases end a second before).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    reserve_ttl: Duration,
    /// A MaxMind DB file, as `audit --geoip` takes (repeat for several): it places the egress
    /// check's address (instead of the echo's databases), and gives a country to the exits
    /// whose labels have none, for leases that ask for one. A replaced file is read again.
    #[arg(long, value_name = "FILE")]
    geoip: Vec<std::path::PathBuf>,
    /// Also serve a forward proxy here (repeat for several): HTTP `CONNECT`, absolute-form
    /// `http://` and SOCKS5 on one port, TLS to the proxy with the API's `--cert/--key` or
    /// `--tls`. The proxy user name is the lease request (`class-identity-task-t1`, see the
    /// README), the password the broker token. `ADDR=USER` also leases USER for clients that
    /// send no credentials (a browser), on loopback only. Off loopback it needs
    /// `--broker-token`.
    #[arg(long, value_name = "ADDR[=USER]", value_parser = exitvoice_broker::proxy::parse_listen)]
    proxy_listen: Vec<(SocketAddr, Option<exitvoice_broker::proxy::username::Asked>)>,
    /// How long a task's lease outlives its last proxy tunnel: a tunnel of the task within it
    /// rides the same lease (same exit, same gateway session).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    task_idle: Duration,
    /// A proxy tunnel that moves no byte for this long is closed (and stops holding its lease).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    tunnel_idle: Duration,
    /// How long a proxy request waits for a free exit when its user name names no `wait`.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    proxy_wait: Duration,
    /// The longest a proxy client may take to send its request (TLS to the proxy included):
    /// a slower one is closed, nothing leased.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    proxy_handshake: Duration,
}

/// Runs `exitvoice broker` until interrupted.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    init_logs();
    if let Some(path) = &args.config {
        tracing::info!(config = %path.display(), "configuration file");
    }
    let token = match args.broker_token {
        Some(token) => Some(BrokerToken::new(token).with_context(|| {
            format!("--broker-token must be at least {MIN_TOKEN_CHARS} characters (e.g. `openssl rand -hex 16`)")
        })?),
        None => None,
    };
    let tls = args.tls || args.cert.is_some();
    let guarded = tls && token.is_some();
    if !(args.listen.ip().is_loopback() || guarded) {
        bail!(
            "--listen {}: a non-loopback address needs TLS (--cert/--key or --tls) and \
             --broker-token: workers' leases carry proxy credentials",
            args.listen
        );
    }
    if let Some((address, _)) = args
        .proxy_listen
        .iter()
        .find(|(address, _)| !address.ip().is_loopback() && token.is_none())
    {
        bail!("--proxy-listen {address}: a non-loopback address needs --broker-token, the proxy's password");
    }
    let bytes =
        std::fs::read(&args.exits).with_context(|| format!("reading {}", args.exits.display()))?;
    let file = ExitsFile::<serde::de::IgnoredAny>::parse(&bytes)
        .with_context(|| format!("{}", args.exits.display()))?;
    if file.exits.is_empty() {
        bail!("{}: no exits to lease", args.exits.display());
    }
    let database = args.database.parse()?;
    let store = super::database::open(&database).await?;
    let tls = if tls {
        let beside = database.sqlite_path().map_or_else(
            || args.exits.with_extension("toml.broker"),
            std::path::Path::to_path_buf,
        );
        let identity = exitvoice_echo::cert::load_or_generate(
            args.cert.as_deref(),
            args.key.as_deref(),
            &beside,
        )
        .context("the broker's certificate")?;
        println!("exitvoice broker: certificate pin {}", identity.pin);
        Some(exitvoice_broker::tls::config(identity.chain, identity.key).context("TLS")?)
    } else {
        None
    };
    let instance = args.instance.unwrap_or_else(|| {
        let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    });
    let config = BrokerConfig {
        persona: args.persona,
        default_ttl: args.default_ttl,
        max_ttl: args.max_ttl,
        max_life: args.max_life,
        max_wait: args.max_wait,
        labels_max_age: args.labels_max_age,
        labels_refresh: args.labels_refresh,
        stateless_per_exit: args.stateless_per_exit,
        stateless_per_origin: (args.stateless_per_origin > 0).then_some(args.stateless_per_origin),
        ban_ttl: args.ban_ttl,
        error_streak: args.error_streak,
        retain: args.retain,
        reserve: args.reserve,
        reserve_ttl: args.reserve_ttl,
        instance,
        echo: file.echo.clone(),
        geo: super::shared::open_geo(&args.geoip)?,
    };
    let exits = file.exits.len();
    let pool = Pool::new(file.exits);
    let mut proxies = Vec::new();
    for (address, fixed) in &args.proxy_listen {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("--proxy-listen {address}"))?;
        println!(
            "exitvoice broker: forward proxy on {}{}",
            listener.local_addr()?,
            if fixed.is_some() {
                " (a fixed lease without credentials)"
            } else {
                ""
            }
        );
        proxies.push((listener, fixed.clone()));
    }
    let front = Front {
        token,
        tls: tls.clone(),
        proxies,
        settings: ProxySettings {
            task_idle: args.task_idle,
            tunnel_idle: args.tunnel_idle,
            wait: args.proxy_wait,
            handshake: args.proxy_handshake,
            ..ProxySettings::default()
        },
    };
    let (router, refresher) = match &args.store {
        Some(state) if RedisUrl::names_redis(state.as_str()) => {
            let url: RedisUrl = state.as_str().parse().context("--store")?;
            let ca = match &args.redis_ca {
                Some(path) => Some(
                    std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
                ),
                None => None,
            };
            let epochs = Epochs {
                store: store.clone(),
                hold: config.longest_told_ttl(),
            };
            let leases = RedisLeases::connect(&url, ca, &args.redis_pool, epochs)
                .await
                .with_context(|| format!("connecting to {url}"))?;
            start(leases, store, pool, config, front, &args.exits).await?
        }
        Some(state) => {
            let state: exitvoice_store::Database = state.as_str().parse().context("--store")?;
            let leases = super::database::open(&state).await?;
            let leases = SqlLeases::open(leases, config.longest_told_ttl()).await?;
            start(leases, store, pool, config, front, &args.exits).await?
        }
        None => {
            let leases = SqlLeases::open(store.clone(), config.longest_told_ttl()).await?;
            start(leases, store, pool, config, front, &args.exits).await?
        }
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let served = match tls {
        Some(config) => {
            println!("exitvoice broker: {exits} units, listening on https://{addr}/v1/leases");
            exitvoice_broker::tls::serve(listener, router, config, shutdown).await;
            Ok(())
        }
        None => {
            println!("exitvoice broker: {exits} units, listening on http://{addr}/v1/leases");
            axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await
        }
    };
    refresher.abort();
    served.context("serving the broker")?;
    Ok(ExitCode::SUCCESS)
}

/// The broker keeping its state in `leases`, its labels read once: the router to serve, and
/// the task that reads them again every `--labels-refresh` (and `exits` at each SIGHUP).
async fn start<S: LeaseStore>(
    leases: S,
    store: Store,
    pool: Pool,
    config: BrokerConfig,
    front: Front,
    exits: &Path,
) -> anyhow::Result<(axum::Router, tokio::task::JoinHandle<()>)> {
    let durability = leases.durability().await;
    tracing::info!(
        settings = %durability.settings,
        crash_loses = %durability.crash,
        failover_loses = %durability.failover,
        hold_s = config.longest_told_ttl().as_secs(),
        "the lease store: what a crash or a failover of it would lose. A store that comes back \
         older is detected, and grants wait for the hold: no exit is handed out twice"
    );
    let broker = Arc::new(Broker::new(leases, store, pool, config));
    broker.refresh().await.context("reading the labels")?;
    broker.keep_reserve().await;
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("listening for SIGHUP")?;
    let refresher = tokio::spawn({
        let (broker, exits) = (broker.clone(), exits.to_owned());
        async move {
            let refreshing = broker.clone().refresh_forever();
            tokio::pin!(refreshing);
            loop {
                tokio::select! {
                    () = &mut refreshing => break,
                    hangup = hangups.recv() => match hangup {
                        Some(()) => reload(&broker, &exits).await,
                        None => break,
                    },
                }
            }
        }
    });
    if !front.proxies.is_empty() {
        let proxy = Proxy::start(
            broker.clone(),
            front.token.clone(),
            front.tls,
            front.settings,
        );
        for (listener, fixed) in front.proxies {
            tokio::spawn(proxy.clone().serve(listener, fixed));
        }
    }
    Ok((
        exitvoice_broker::api::router(broker, front.token),
        refresher,
    ))
}

/// What the broker serves its clients with: the token, TLS, and the proxy's listeners.
struct Front {
    token: Option<BrokerToken>,
    tls: Option<Arc<rustls::ServerConfig>>,
    proxies: Vec<(
        tokio::net::TcpListener,
        Option<exitvoice_broker::proxy::username::Asked>,
    )>,
    settings: ProxySettings,
}

/// Reads `exits` again into `broker` (SIGHUP). A file that does not read or parse, or names
/// no exit, leaves the pool as it was.
async fn reload<S: LeaseStore>(broker: &Broker<S>, exits: &Path) {
    let parsed = std::fs::read(exits)
        .with_context(|| format!("reading {}", exits.display()))
        .and_then(|bytes| {
            ExitsFile::<serde::de::IgnoredAny>::parse(&bytes)
                .with_context(|| format!("{}", exits.display()))
        });
    match parsed {
        Ok(file) if !file.exits.is_empty() => {
            let units = file.exits.len();
            match broker.reload(file.exits).await {
                Ok(revoked) => tracing::info!(units, revoked, "exits file reloaded"),
                Err(error) => {
                    tracing::warn!(%error, units, "exits file reloaded; writing it failed")
                }
            }
        }
        Ok(_) => tracing::warn!("exits file names no exit: the pool stays as it was"),
        Err(error) => tracing::warn!("exits file not reloaded: {error:#}"),
    }
}
