//! `exitsim`: one process acting as many proxy exits on loopback, for audits at scale.
//!
//! Exit `n` is the user name `exit-<n>` (one shared password) on one HTTP `CONNECT` port and,
//! optionally, one SOCKS5 port: 10,000 exits cost 10,000 counters, not 10,000 listeners. Each
//! tunnel really forwards the client's bytes to its target (loopback targets only), so the echo
//! server sees the auditor's own TLS and HTTP/2, as through a tunnelling proxy such as squid.
//!
//! Per exit it counts tunnels opened and the most open at once (a tunnel is open from the
//! proxy's success reply until its client closed its side), and the same per gateway session id
//! (`exit-<n>-sessid-<id>`): `GET /stats` on `--stats` (add
//! `?exits=1` for the per-exit list), and one `stats {…}` JSON line on stdout at SIGINT/SIGTERM.
//! The library (`src/lib.rs`) holds the exits; this file is the command line.
//!
//! Run with `scripts/bench-audit-scale.sh`, or by hand:
//!
//! ```sh
//! exitsim serve --exits 10000 --http 127.0.0.1:0 --socks 127.0.0.1:0 --stats 127.0.0.1:0 \
//!   --exits-out exits.toml --echo-url https://127.0.0.1:8443 --echo-pin sha256//…
//! ```

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use exitvoice_exitsim::{exits_file, Simulator};

/// Flags of `exitsim`.
#[derive(Debug, Parser)]
#[command(about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the exits until SIGINT or SIGTERM, then print their stats.
    Serve(ServeArgs),
    /// Write the exits file for exits served elsewhere to stdout.
    Exits(ExitsArgs),
}

/// The exits and their password.
#[derive(Debug, clap::Args)]
struct Common {
    /// Exits simulated: user names `exit-0` to `exit-<N-1>`.
    #[arg(long, value_name = "N", default_value_t = 1_000)]
    exits: usize,
    /// The password every exit requires (letters, digits, `-._~`).
    #[arg(long, value_name = "TEXT", default_value = "exitsim", value_parser = url_safe)]
    password: String,
}

/// Flags of `exitsim serve`.
#[derive(Debug, clap::Args)]
struct ServeArgs {
    #[command(flatten)]
    common: Common,
    /// The HTTP `CONNECT` listener.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    http: SocketAddr,
    /// A SOCKS5 listener too.
    #[arg(long, value_name = "ADDR")]
    socks: Option<SocketAddr>,
    /// The stats listener (`GET /stats`).
    #[arg(long, value_name = "ADDR")]
    stats: Option<SocketAddr>,
    /// Write the exits file for the bound listeners here (needs --echo-url and --echo-pin).
    #[arg(long, value_name = "FILE", requires_all = ["echo_url", "echo_pin"])]
    exits_out: Option<PathBuf>,
    /// The echo server's `https://host:port`, for the exits file.
    #[arg(long, value_name = "URL")]
    echo_url: Option<String>,
    /// The echo certificate's pin, for the exits file.
    #[arg(long, value_name = "PIN")]
    echo_pin: Option<String>,
}

/// Flags of `exitsim exits`.
#[derive(Debug, clap::Args)]
struct ExitsArgs {
    #[command(flatten)]
    common: Common,
    /// The HTTP `CONNECT` listener of the simulator.
    #[arg(long, value_name = "ADDR", required_unless_present = "socks")]
    http: Option<SocketAddr>,
    /// The SOCKS5 listener of the simulator.
    #[arg(long, value_name = "ADDR")]
    socks: Option<SocketAddr>,
    /// The echo server's `https://host:port`.
    #[arg(long, value_name = "URL")]
    echo_url: String,
    /// The echo certificate's pin (hex or `sha256//<base64>`).
    #[arg(long, value_name = "PIN")]
    echo_pin: String,
}

/// Passwords go into URLs unescaped, so only RFC 3986 unreserved characters are taken.
fn url_safe(text: &str) -> Result<String, String> {
    let unreserved = |c: char| c.is_ascii_alphanumeric() || "-._~".contains(c);
    if !text.is_empty() && text.chars().all(unreserved) {
        Ok(text.to_owned())
    } else {
        Err("letters, digits and -._~ only".to_owned())
    }
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Exits(args) => {
            let spec = exits_file::Spec {
                exits: args.common.exits,
                http: args.http,
                socks: args.socks,
                password: &args.common.password,
                echo_url: &args.echo_url,
                echo_pin: &args.echo_pin,
            };
            exits_file::write(&mut std::io::stdout().lock(), &spec)?;
            Ok(())
        }
        Command::Serve(args) => tokio::runtime::Runtime::new()?.block_on(serve(args)),
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let sim = Simulator::start(
        args.common.exits,
        args.common.password.clone(),
        args.http,
        args.socks,
    )
    .await
    .context("binding the exits' listeners")?;
    println!("http CONNECT exits on {}", sim.http);
    if let Some(socks) = sim.socks {
        println!("socks5 exits on {socks}");
    }
    if let Some(addr) = args.stats {
        let bound = sim
            .serve_stats(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        println!("stats on http://{bound}/stats");
    }
    if let (Some(path), Some(echo_url), Some(echo_pin)) =
        (&args.exits_out, &args.echo_url, &args.echo_pin)
    {
        let spec = exits_file::Spec {
            exits: args.common.exits,
            http: Some(sim.http),
            socks: sim.socks,
            password: &args.common.password,
            echo_url,
            echo_pin,
        };
        let mut file = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        exits_file::write(&mut file, &spec)?;
        std::io::Write::flush(&mut file)?;
        println!("exits file {}", path.display());
    }
    println!("ready: {} exits", args.common.exits);
    shutdown_signal().await?;
    println!("stats {}", serde_json::to_string(&sim.snapshot(false))?);
    Ok(())
}

async fn shutdown_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result?,
        _ = term.recv() => {}
    }
    Ok(())
}
