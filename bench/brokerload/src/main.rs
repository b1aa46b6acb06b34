//! `brokerload`: the broker's load generator (`scripts/bench-broker.sh`).
//!
//! - `brokerload seed --database URL --exits N --out exits.toml`: an exits file of N plain
//!   exits and, in the database, a labels snapshot that admits each as `identity` (the broker
//!   is measured, not the auditor); with `--exitsim ADDR --exit-password PW`, exit `e-<n>` is
//!   the simulator's `exit-<n>` on ADDR, so tunnels through the broker's proxy really open;
//! - `brokerload run --broker URL --clients 64 --seconds 10 [--rate R]`: each client keeps one
//!   HTTP/1.1 connection and loops acquire (`POST /v1/leases`, class `identity`) then release
//!   (`DELETE`, outcome `ok`); closed loop by default (saturation), or paced to R cycles/s over
//!   all clients. Prints one JSON line:
//!   cycles, cycles/s, acquire latency percentiles (ms), answers other than `201`;
//! - `brokerload hold --broker URL --count N`: leases N exits and keeps them (ten minutes);
//! - `brokerload store --store URL --units N [--hold H]`: the same cycles through the broker's
//!   store layer, without HTTP, on a pool of its own (Redis, SQLite or PostgreSQL);
//! - `brokerload baseline --redis URL --units N [--hold H]`: the published Redis broker's
//!   algorithm on the same Redis, the side-by-side figure ([`baseline`]). Failed acquires (none
//!   free, or 20 tries spent) are counted apart from cycles.
#![forbid(unsafe_code)]

use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

use drive::{drive, Cycler, Step};
use exitvoice_broker::redis_leases::{Epochs, RedisLeases, RedisUrl};
use exitvoice_broker::sql_leases::SqlLeases;

mod baseline;
mod drive;
mod store_layer;

#[derive(Parser)]
#[command(about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write the exits file and a labels snapshot admitting every exit.
    Seed {
        /// The broker's database (SQLite file or `postgres://…`).
        #[arg(long)]
        database: String,
        /// Exits in the pool.
        #[arg(long)]
        exits: usize,
        /// Where the exits file goes.
        #[arg(long)]
        out: PathBuf,
        /// The exits are `exit-<n>` of the `exitsim` HTTP `CONNECT` listener here (default: a
        /// port nothing listens on, for leases that open no tunnel).
        #[arg(long, requires = "exit_password")]
        exitsim: Option<std::net::SocketAddr>,
        /// The simulator's password.
        #[arg(long, env = "EXITSIM_PASSWORD", hide_env_values = true)]
        exit_password: Option<String>,
    },
    /// Run lease + release cycles against a broker.
    Run {
        #[command(flatten)]
        broker: BrokerArgs,
        /// Concurrent clients, one connection each.
        #[arg(long, default_value_t = 64)]
        clients: usize,
        /// How long to run.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Cycles per second over all clients (default: as fast as the broker answers).
        #[arg(long)]
        rate: Option<f64>,
    },
    /// Lease exits for ten minutes and keep them: the pool's share leased during later runs.
    Hold {
        #[command(flatten)]
        broker: BrokerArgs,
        /// How many.
        #[arg(long)]
        count: usize,
    },
    /// Run acquire + release cycles through the broker's store layer, without HTTP.
    Store {
        /// `redis://…` or `rediss://…`, a SQLite file, or `postgres://…`.
        #[arg(long)]
        store: String,
        #[command(flatten)]
        load: Load,
    },
    /// Run the published Redis broker's acquire + release against a Redis server.
    Baseline {
        /// `redis://…`.
        #[arg(long)]
        redis: String,
        #[command(flatten)]
        load: Load,
    },
}

/// The broker `run` and `hold` talk to.
#[derive(clap::Args)]
struct BrokerArgs {
    /// The broker, `http://127.0.0.1:8490`.
    #[arg(long)]
    broker: String,
    /// Its token.
    #[arg(long, env = "EXITVOICE_BROKER_TOKEN")]
    token: String,
}

/// The pool and the load of `store` and `baseline`.
#[derive(clap::Args)]
struct Load {
    /// Exits in the pool (written fresh).
    #[arg(long)]
    units: usize,
    /// Exits leased (and never released) before the run.
    #[arg(long, default_value_t = 0)]
    hold: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// How long to run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Cycles per second over all clients (default: as fast as the store answers).
    #[arg(long)]
    rate: Option<f64>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Seed {
            database,
            exits,
            out,
            exitsim,
            exit_password,
        } => {
            let via = exitsim.zip(exit_password);
            seed(&database, exits, &out, via.as_ref()).await
        }
        Command::Run {
            broker,
            clients,
            seconds,
            rate,
        } => run(&broker, clients, Duration::from_secs(seconds), rate).await,
        Command::Hold { broker, count } => {
            let mut client = Client::connect(&authority(&broker.broker)?, &broker.token).await?;
            hold(&mut client, count).await
        }
        Command::Store { store, load } => store_layer(&store, &load).await,
        Command::Baseline { redis, load } => {
            let clients = baseline::prepare(&redis, load.units, load.hold, load.clients).await?;
            let duration = Duration::from_secs(load.seconds);
            println!("{}", drive(clients, duration, load.rate).await?);
            Ok(())
        }
    }
}

/// `brokerload store`: a pool of its own in `store` (for Redis, its epochs in a SQLite file
/// removed after the run).
async fn store_layer(store: &str, load: &Load) -> anyhow::Result<()> {
    let duration = Duration::from_secs(load.seconds);
    let summary = if RedisUrl::names_redis(store) {
        let url: RedisUrl = store.parse()?;
        let dir = tempfile::tempdir()?;
        let epochs = Epochs {
            store: exitvoice_store::Store::open(&dir.path().join("epochs.db")).await?,
            hold: Duration::from_secs(3600),
        };
        let pool = format!("load-{:08x}", rand::random::<u32>());
        let leases = RedisLeases::connect(&url, None, &pool, epochs).await?;
        let clients = store_layer::prepare(leases, load.units, load.hold, load.clients).await?;
        drive(clients, duration, load.rate).await?
    } else {
        let database: exitvoice_store::Database = store.parse().context("--store")?;
        let store = exitvoice_store::Store::connect(&database).await?;
        let leases = SqlLeases::open(store, Duration::from_secs(600)).await?;
        let clients = store_layer::prepare(leases, load.units, load.hold, load.clients).await?;
        drive(clients, duration, load.rate).await?
    };
    println!("{summary}");
    Ok(())
}

/// Writes the exits file and the labels; with `via`, exit `e-<n>` is `exit-<n>` of the exit
/// simulator at that address, with that password.
async fn seed(
    database: &str,
    exits: usize,
    out: &PathBuf,
    via: Option<&(std::net::SocketAddr, String)>,
) -> anyhow::Result<()> {
    let database: exitvoice_store::Database = database.parse().context("--database")?;
    let store = exitvoice_store::Store::connect(&database).await?;
    let now =
        time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339)?;
    let mut file = std::io::BufWriter::new(std::fs::File::create(out)?);
    let mut labels = Vec::with_capacity(exits);
    for n in 0..exits {
        let url = match via {
            Some((addr, password)) => format!("http://exit-{n}:{password}@{addr}"),
            None => "http://u:p@127.0.0.1:9".to_owned(),
        };
        writeln!(file, "[[exits]]\nname = \"e-{n}\"\nurl = \"{url}\"\n")?;
        labels.push(json!({
            "name": format!("e-{n}"), "route": "identity", "last_probe_at": now, "url": "",
            "tags": {}, "egress_ips": [], "state": "stable", "changed_at": null, "bucket": "A",
            "voices": [], "route_reason": "seeded", "samples": 4, "errors": {}, "history": [],
            "latency": {"p50_ms": null, "p95_ms": null},
            "flags": {"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false,
                      "remuxed": false, "not_proxied": false, "tls_reoriginated": false},
        }));
    }
    file.flush()?;
    let doc = serde_json::from_value(json!({
        "schema_version": 2, "generated_at": now, "persona": "rustls/chrome",
        "baseline": null, "exits": labels,
    }))?;
    store.insert_labels(&doc).await?;
    Ok(())
}

/// One client's connection to the broker.
struct Client {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    authority: String,
    token: String,
}

impl Client {
    async fn connect(authority: &str, token: &str) -> anyhow::Result<Self> {
        let stream = tokio::net::TcpStream::connect(authority).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        Ok(Self {
            sender,
            authority: authority.to_owned(),
            token: token.to_owned(),
        })
    }

    async fn call(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(StatusCode, Value)> {
        self.sender.ready().await?;
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.authority)
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(Full::new(
                body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string())),
            ))?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let bytes = response.into_body().collect().await?.to_bytes();
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }
}

impl Cycler for Client {
    async fn cycle(&mut self) -> anyhow::Result<Step> {
        let body = json!({"class": "identity", "holder": "load", "wait_ms": 1000});
        let asked = Instant::now();
        let (status, lease) = self.call(Method::POST, "/v1/leases", Some(body)).await?;
        let acquire = asked.elapsed();
        if status != StatusCode::CREATED {
            return Ok(Step {
                acquire,
                done: false,
                failed: false,
            });
        }
        let path = format!(
            "/v1/leases/{}?fence={}&outcome=ok",
            lease["lease_id"].as_str().unwrap_or(""),
            lease["fence"]
        );
        let (status, _) = self.call(Method::DELETE, &path, None).await?;
        Ok(Step {
            acquire,
            done: status == StatusCode::OK,
            failed: false,
        })
    }
}

/// Leases `count` exits through the broker for ten minutes, never released: the pool's share
/// that stays leased during later runs.
async fn hold(client: &mut Client, count: usize) -> anyhow::Result<()> {
    let body = json!({"class": "identity", "holder": "held", "ttl_ms": 600_000});
    for _ in 0..count {
        let (status, answer) = client
            .call(Method::POST, "/v1/leases", Some(body.clone()))
            .await?;
        if status != StatusCode::CREATED {
            bail!("holding a lease: {status} {answer}");
        }
    }
    Ok(())
}

/// `host:port` of an `http://` broker URL.
fn authority(broker: &str) -> anyhow::Result<String> {
    Ok(broker
        .strip_prefix("http://")
        .context("--broker must be http://")?
        .trim_end_matches('/')
        .to_owned())
}

async fn run(
    broker: &BrokerArgs,
    clients: usize,
    duration: Duration,
    rate: Option<f64>,
) -> anyhow::Result<()> {
    let authority = authority(&broker.broker)?;
    let mut connected = Vec::with_capacity(clients);
    for _ in 0..clients {
        connected.push(Client::connect(&authority, &broker.token).await?);
    }
    let summary = drive(connected, duration, rate).await?;
    println!("{summary}");
    Ok(())
}
