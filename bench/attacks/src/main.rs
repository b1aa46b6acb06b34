//! `attack`: runs one attack against a loopback echo server with a legitimate client measured
//! side by side, and prints one JSON line. `attack baseline` measures the client alone.
//!
//! Run with `bench/attacks/run.sh` (it builds this, starts the server, samples its memory).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use exitvoice_attacks::{legit, run, Attack, Params, Target};

/// Flags of `attack`.
#[derive(Debug, Parser)]
struct Args {
    /// An attack name (slow-hello, slow-preface, big-hello, priority, settings, continuation,
    /// hpack-bomb, rapid-reset, idle) or `baseline`.
    name: String,
    /// The server (loopback only).
    #[arg(long, default_value = "127.0.0.1:8443")]
    addr: SocketAddr,
    /// Connections at once.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Frames, bytes or hellos per connection.
    #[arg(long, default_value_t = 10_000)]
    count: usize,
    /// Seconds the attack (and the legitimate client beside it) runs.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Attacker source addresses, 127.0.0.1 upwards.
    #[arg(long, default_value_t = 1)]
    sources: usize,
    /// Pause between bytes of the slow attacks, in milliseconds.
    #[arg(long, default_value_t = 500)]
    interval_ms: u64,
    /// One connection per attacker: do not reconnect when the server closes it.
    #[arg(long)]
    once: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let target = Target::new(args.addr)?;
    let duration = Duration::from_secs(args.seconds);
    if args.name == "baseline" {
        let client = legit(&target, duration).await;
        println!(
            "{}",
            serde_json::json!({"attack": "baseline", "legit_ok": client.ok,
                "legit_failed": client.failed, "legit_rate": client.rate()})
        );
        return Ok(());
    }
    let attack: Attack = args.name.parse()?;
    let params = Params {
        connections: args.connections,
        count: args.count,
        duration,
        sources: args.sources,
        interval: Duration::from_millis(args.interval_ms),
        reconnect: !args.once,
    };
    let attacking = {
        let target = target.clone();
        tokio::spawn(async move { run(attack, &target, params).await })
    };
    // Let the attack get going before measuring the legitimate client.
    tokio::time::sleep(duration / 5).await;
    let client = legit(&target, duration * 3 / 5).await;
    let report = attacking.await?;
    println!(
        "{}",
        serde_json::json!({"attack": attack.name(), "connected": report.connected,
            "failed": report.failed, "sent": report.sent,
            "closed_by_server": report.closed_by_server, "legit_ok": client.ok,
            "legit_failed": client.failed, "legit_rate": client.rate()})
    );
    Ok(())
}
