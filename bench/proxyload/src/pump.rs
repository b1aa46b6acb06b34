//! Relay throughput: a few tunnels through one relay, each carrying its share of the bytes
//! from the target to the client, and what the watched processes spent meanwhile.

use std::net::SocketAddr;
use std::time::Instant;

use anyhow::{bail, ensure};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::tunnel::Proxy;
use crate::watch;

/// Bytes read per call by the client.
const READ: usize = 64 * 1024;

/// Opens `tunnels` tunnels through `proxy` to `target`, then asks each for `bytes / tunnels`
/// and reads them all. Bytes, seconds, MB/s, and per watched process (`name`, pid) its CPU
/// seconds and CPU seconds per GB (10⁹ bytes) over the transfer.
///
/// # Errors
/// A tunnel that fails, or a short transfer.
pub async fn run(
    proxy: &Proxy,
    target: SocketAddr,
    tunnels: usize,
    bytes: u64,
    watched: &[(String, u32)],
) -> anyhow::Result<Value> {
    let share = bytes / tunnels.max(1) as u64;
    let mut open = Vec::with_capacity(tunnels);
    for _ in 0..tunnels {
        let mut tunnel = proxy.open(target).await?;
        tunnel.first_byte().await?;
        ensure!(
            tunnel.early.is_empty(),
            "the target sent more than its byte"
        );
        open.push(tunnel);
    }
    let before: Vec<f64> = watched
        .iter()
        .map(|(_, pid)| watch::cpu_seconds(*pid))
        .collect::<anyhow::Result<_>>()?;
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(tunnels);
    for mut tunnel in open {
        tasks.push(tokio::spawn(async move {
            tunnel.stream.write_all(&share.to_be_bytes()).await?;
            let mut buf = vec![0; READ];
            let mut got = 0u64;
            loop {
                let n = tunnel.stream.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                got += n as u64;
            }
            anyhow::Ok(got)
        }));
    }
    let mut moved = 0;
    for task in tasks {
        moved += task.await??;
    }
    let seconds = started.elapsed().as_secs_f64();
    if moved != share * tunnels as u64 {
        bail!("moved {moved} bytes of {}", share * tunnels as u64);
    }
    let gb = moved as f64 / 1e9;
    let mut cpu = serde_json::Map::new();
    for ((name, pid), before) in watched.iter().zip(before) {
        let spent = watch::cpu_seconds(*pid)? - before;
        cpu.insert(
            name.clone(),
            json!({"cpu_s": spent, "cpu_s_per_gb": spent / gb}),
        );
    }
    Ok(json!({
        "tunnels": tunnels, "bytes": moved, "seconds": seconds,
        "mb_per_s": moved as f64 / 1e6 / seconds, "cpu": cpu,
    }))
}
