//! Many idle tunnels at once: each opened, its first byte read, then held silent; the watched
//! process's resident memory before and after, and every tunnel checked still open at the end.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::tunnel::{Proxy, Tunnel};
use crate::watch;

/// How long the memory is left to settle once every tunnel is open.
const SETTLE: Duration = Duration::from_secs(2);

/// Opens `tunnels` tunnels to `target`, tunnel `i` through `proxies[i % proxies.len()]` (one
/// per task), `concurrency` handshakes at a time, each task's first tunnel before the others
/// (it takes the lease the others ride); holds them [`SETTLE`], then reads the memory of `pid`
/// and checks each tunnel is still open. Refused tunnels are counted, not fatal.
///
/// # Errors
/// `pid`'s memory cannot be read.
pub async fn run(
    proxies: Vec<Proxy>,
    target: SocketAddr,
    tunnels: usize,
    concurrency: usize,
    pid: u32,
) -> anyhow::Result<Value> {
    let rss_before = watch::rss_kib(pid)?;
    let tcp_before = watch::tcp_mem_pages()?;
    let started = Instant::now();
    let first = proxies.len().min(tunnels);
    let mut held = open(&proxies, 0..first, target, concurrency).await;
    held.extend(open(&proxies, first..tunnels, target, concurrency).await);
    let opening = started.elapsed().as_secs_f64();
    let (open_tunnels, errors): (Vec<_>, Vec<_>) = held.into_iter().partition(Result::is_ok);
    let mut open_tunnels: Vec<Tunnel> = open_tunnels.into_iter().filter_map(Result::ok).collect();
    let first_error = errors
        .into_iter()
        .find_map(Result::err)
        .map(|e| format!("{e:#}"));
    tokio::time::sleep(SETTLE).await;
    let rss_after = watch::rss_kib(pid)?;
    let tcp_after = watch::tcp_mem_pages()?;
    let mut closed = 0;
    let mut probe = [0; 1];
    for tunnel in &mut open_tunnels {
        match tunnel.stream.try_read(&mut probe) {
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            _ => closed += 1,
        }
    }
    let opened = open_tunnels.len();
    let per_tunnel =
        |after: u64, before: u64| (after as f64 - before as f64) * 1024.0 / opened.max(1) as f64;
    Ok(json!({
        "tunnels": tunnels, "opened": opened, "refused": tunnels - opened,
        "closed_while_idle": closed, "first_refusal": first_error, "tasks": proxies.len(),
        "opening_s": opening, "rss_kib_before": rss_before, "rss_kib_after": rss_after,
        "rss_bytes_per_tunnel": per_tunnel(rss_after, rss_before),
        "tcp_mem_pages_before": tcp_before, "tcp_mem_pages_after": tcp_after,
    }))
}

/// Opens tunnels `range`, `concurrency` at a time: each open (first byte read) or why not.
async fn open(
    proxies: &[Proxy],
    range: std::ops::Range<usize>,
    target: SocketAddr,
    concurrency: usize,
) -> Vec<anyhow::Result<Tunnel>> {
    let gate = Arc::new(Semaphore::new(concurrency.max(1)));
    let mut tasks = Vec::with_capacity(range.len());
    for i in range {
        let proxy = proxies[i % proxies.len()].clone();
        let gate = gate.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await?;
            let mut tunnel = proxy.open(target).await?;
            tunnel.first_byte().await?;
            anyhow::Ok(tunnel)
        }));
    }
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(task.await.map_err(anyhow::Error::from).and_then(|r| r));
    }
    out
}
