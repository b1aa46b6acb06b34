//! `proxyload`: the load driver of the broker's forward proxy (`scripts/bench-proxy.sh`). Every
//! tunnel is an HTTP `CONNECT` to a target in this process (`target`), which sends one byte at
//! once and, asked for a count, that many bytes more.
//!
//! - `proxyload ttfb --broker-proxy ADDR --exit ADDR …`: time to the target's first byte from
//!   a new connection, through the exit directly (`exit-0`), through the broker's proxy with a
//!   new lease per tunnel (`class-anonymous`), and riding a task's lease held live by one
//!   keeper tunnel (`class-anonymous-task-…`), interleaved; percentiles and the added time;
//! - `proxyload pump --proxy ADDR --user U --password P --bytes B --tunnels K --watch
//!   NAME=PID…`: B bytes from the target over K tunnels through one proxy, MB/s, and the CPU
//!   seconds per GB of each watched process;
//! - `proxyload idle --proxy ADDR --password P --tunnels N --tasks T --watch PID`: N tunnels
//!   held open at once over T tasks, the watched process's resident memory per tunnel, refusals.
//!
//! Each prints one JSON line.
#![forbid(unsafe_code)]

use std::net::SocketAddr;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use ttfb::Path;
use tunnel::Proxy;

mod idle;
mod pump;
mod target;
mod ttfb;
mod tunnel;
mod watch;

#[derive(Parser)]
#[command(about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// First-byte latency through the exit, and through the broker's proxy.
    Ttfb {
        /// The broker's proxy listener.
        #[arg(long)]
        broker_proxy: SocketAddr,
        /// The broker's token (the proxy password).
        #[arg(long, env = "EXITVOICE_BROKER_TOKEN", hide_env_values = true)]
        token: String,
        /// The exit simulator's HTTP `CONNECT` listener.
        #[arg(long)]
        exit: SocketAddr,
        /// The simulator's password.
        #[arg(long, env = "EXITSIM_PASSWORD", hide_env_values = true)]
        exit_password: String,
        /// Tunnels measured per path.
        #[arg(long, default_value_t = 2000)]
        count: usize,
        /// Tunnels per path before those measured.
        #[arg(long, default_value_t = 100)]
        warm_up: usize,
    },
    /// Bytes from the target through one proxy: MB/s and CPU per GB.
    Pump {
        #[command(flatten)]
        proxy: ProxyArgs,
        /// The user name given to the proxy.
        #[arg(long)]
        user: String,
        /// Bytes moved over all tunnels.
        #[arg(long)]
        bytes: u64,
        /// Tunnels, each moving its share.
        #[arg(long, default_value_t = 4)]
        tunnels: usize,
        /// A process whose CPU time is read before and after: `NAME=PID` (repeat).
        #[arg(long, value_parser = named_pid)]
        watch: Vec<(String, u32)>,
    },
    /// Many idle tunnels at once: memory per tunnel of the watched process.
    Idle {
        #[command(flatten)]
        proxy: ProxyArgs,
        /// Tunnels held open at once.
        #[arg(long)]
        tunnels: usize,
        /// Tasks they are spread over (`class-anonymous-task-idle<n>`), one lease each.
        #[arg(long)]
        tasks: usize,
        /// Handshakes in flight at once.
        #[arg(long, default_value_t = 128)]
        concurrency: usize,
        /// The process whose resident memory is read (the broker).
        #[arg(long)]
        watch: u32,
    },
}

/// A proxy and its password.
#[derive(clap::Args)]
struct ProxyArgs {
    /// The proxy listener.
    #[arg(long)]
    proxy: SocketAddr,
    /// Its password (the broker's token, or the exit simulator's).
    #[arg(long, env = "PROXYLOAD_PASSWORD", hide_env_values = true)]
    password: String,
}

/// `NAME=PID`.
fn named_pid(text: &str) -> Result<(String, u32), String> {
    let (name, pid) = text.split_once('=').ok_or("NAME=PID")?;
    let pid = pid.parse().map_err(|_| format!("{pid:?} is not a pid"))?;
    Ok((name.to_owned(), pid))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let target = target::start().await.context("binding the target")?;
    let summary = match Cli::parse().command {
        Command::Ttfb {
            broker_proxy,
            token,
            exit,
            exit_password,
            count,
            warm_up,
        } => {
            let task = format!("class-anonymous-task-ttfb{}", std::process::id());
            let task = Proxy::new(broker_proxy, &task, &token);
            // The task's lease stays live while this tunnel is open: each measured tunnel of
            // the task joins a lease already held.
            let mut keeper = task.open(target).await.context("the keeper tunnel")?;
            keeper.first_byte().await?;
            let paths = vec![
                Path::new("direct", Proxy::new(exit, "exit-0", &exit_password)),
                Path::new(
                    "new_lease",
                    Proxy::new(broker_proxy, "class-anonymous", &token),
                ),
                Path::new("task_lease", task),
            ];
            let summary = ttfb::run(paths, target, count, warm_up).await?;
            drop(keeper);
            summary
        }
        Command::Pump {
            proxy,
            user,
            bytes,
            tunnels,
            watch,
        } => {
            let through = Proxy::new(proxy.proxy, &user, &proxy.password);
            pump::run(&through, target, tunnels, bytes, &watch).await?
        }
        Command::Idle {
            proxy,
            tunnels,
            tasks,
            concurrency,
            watch,
        } => {
            let proxies = (0..tasks.max(1))
                .map(|n| {
                    let user = format!("class-anonymous-task-idle{n}");
                    Proxy::new(proxy.proxy, &user, &proxy.password)
                })
                .collect();
            idle::run(proxies, target, tunnels, concurrency, watch).await?
        }
    };
    println!("{summary}");
    Ok(())
}
