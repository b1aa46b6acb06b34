//! `brokerload`: the broker's load generator (`scripts/bench-broker.sh`).
//!
//! - `brokerload seed --database URL --exits N --out exits.toml`: an exits file of N plain
//!   exits and, in the database, a labels snapshot that admits each as `identity` (the broker
//!   is measured, not the auditor);
//! - `brokerload run --broker URL --clients 64 --seconds 10 [--rate R]`: each client keeps one
//!   HTTP/1.1 connection and loops acquire (`POST /v1/leases`, class `identity`) then release
//!   (`DELETE`, outcome `ok`); closed loop by default (saturation), or paced to R cycles/s over
//!   all clients. Prints one JSON line: cycles, cycles/s, acquire latency percentiles (ms),
//!   answers other than `201`.
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
    },
    /// Run lease + release cycles against a broker.
    Run {
        /// The broker, `http://127.0.0.1:8490`.
        #[arg(long)]
        broker: String,
        /// Its token.
        #[arg(long, env = "EXITVOICE_BROKER_TOKEN")]
        token: String,
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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Seed {
            database,
            exits,
            out,
        } => seed(&database, exits, &out).await,
        Command::Run {
            broker,
            token,
            clients,
            seconds,
            rate,
        } => run(&broker, &token, clients, Duration::from_secs(seconds), rate).await,
    }
}

async fn seed(database: &str, exits: usize, out: &PathBuf) -> anyhow::Result<()> {
    let database: exitvoice_store::Database = database.parse().context("--database")?;
    let store = exitvoice_store::Store::connect(&database).await?;
    let now =
        time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339)?;
    let mut file = std::io::BufWriter::new(std::fs::File::create(out)?);
    let mut labels = Vec::with_capacity(exits);
    for n in 0..exits {
        writeln!(
            file,
            "[[exits]]\nname = \"e-{n}\"\nurl = \"http://u:p@127.0.0.1:9\"\n"
        )?;
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

/// What one client measured.
#[derive(Default)]
struct Tally {
    cycles: u64,
    other: u64,
    acquire_us: Vec<u64>,
}

async fn run(
    broker: &str,
    token: &str,
    clients: usize,
    duration: Duration,
    rate: Option<f64>,
) -> anyhow::Result<()> {
    let authority = broker
        .strip_prefix("http://")
        .context("--broker must be http://")?
        .trim_end_matches('/')
        .to_owned();
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::with_capacity(clients);
    for c in 0..clients {
        let (authority, token) = (authority.clone(), token.to_owned());
        // Paced: each client starts its cycles `clients / rate` seconds apart, staggered.
        let period = rate.map(|r| Duration::from_secs_f64(clients as f64 / r));
        tasks.push(tokio::spawn(async move {
            let mut client = Client::connect(&authority, &token).await?;
            let mut tally = Tally::default();
            let mut next = Instant::now()
                + period.map_or(Duration::ZERO, |p| p.mul_f64(c as f64 / clients as f64));
            let body = json!({"class": "identity", "holder": format!("load-{c}"), "wait_ms": 1000});
            while Instant::now() < deadline {
                if period.is_some() {
                    tokio::time::sleep_until(next.into()).await;
                }
                let asked = Instant::now();
                let (status, lease) = client
                    .call(Method::POST, "/v1/leases", Some(body.clone()))
                    .await?;
                tally
                    .acquire_us
                    .push(u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX));
                if status != StatusCode::CREATED {
                    tally.other += 1;
                    continue;
                }
                let path = format!(
                    "/v1/leases/{}?fence={}&outcome=ok",
                    lease["lease_id"].as_str().unwrap_or(""),
                    lease["fence"]
                );
                let (status, _) = client.call(Method::DELETE, &path, None).await?;
                if status == StatusCode::OK {
                    tally.cycles += 1;
                } else {
                    tally.other += 1;
                }
                if let Some(period) = period {
                    next += period;
                }
            }
            anyhow::Ok(tally)
        }));
    }
    let mut total = Tally::default();
    for task in tasks {
        let tally = task.await??;
        total.cycles += tally.cycles;
        total.other += tally.other;
        total.acquire_us.extend(tally.acquire_us);
    }
    let seconds = started.elapsed().as_secs_f64();
    if total.cycles == 0 {
        bail!("no cycle completed ({} other answers)", total.other);
    }
    total.acquire_us.sort_unstable();
    let pct = |p: usize| {
        let rank = (total.acquire_us.len() * p).div_ceil(100).max(1);
        total
            .acquire_us
            .get(rank - 1)
            .map_or(0.0, |us| *us as f64 / 1000.0)
    };
    println!(
        "{}",
        json!({
            "clients": clients, "rate": rate, "seconds": seconds, "cycles": total.cycles,
            "cycles_per_s": total.cycles as f64 / seconds, "other_answers": total.other,
            "acquire_ms": {"p50": pct(50), "p95": pct(95), "p99": pct(99), "max": pct(100)},
        })
    );
    Ok(())
}
