//! Time to the target's first byte: a new connection, `CONNECT`, the `200`, the byte; through
//! the exit directly and through the broker's proxy, interleaved tunnel by tunnel so that
//! whatever else the machine does falls on each path alike.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::tunnel::Proxy;

/// One path to the target and the first-byte times seen through it.
pub struct Path {
    pub name: &'static str,
    pub proxy: Proxy,
    times_us: Vec<u64>,
}

impl Path {
    pub fn new(name: &'static str, proxy: Proxy) -> Self {
        Self {
            name,
            proxy,
            times_us: Vec::new(),
        }
    }

    /// Opens one tunnel, waits for the first byte and closes: how long it took.
    async fn once(&self, target: SocketAddr) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let mut tunnel = self.proxy.open(target).await?;
        tunnel.first_byte().await?;
        Ok(started.elapsed())
    }

    /// The p-th percentile, ms.
    fn percentile(&self, p: usize) -> f64 {
        let rank = (self.times_us.len() * p).div_ceil(100).max(1);
        self.times_us
            .get(rank - 1)
            .map_or(0.0, |us| *us as f64 / 1000.0)
    }
}

/// `warm_up` then `count` tunnels per path, the paths taken in turn (their order rotating, so
/// none always follows another). Percentiles per path (ms), and each later path's added time
/// over the first (p50 over p50, p99 over p99).
///
/// # Errors
/// Any tunnel that fails: the latency of a refused tunnel means nothing.
pub async fn run(
    mut paths: Vec<Path>,
    target: SocketAddr,
    count: usize,
    warm_up: usize,
) -> anyhow::Result<Value> {
    for round in 0..warm_up + count {
        for k in 0..paths.len() {
            let at = (round + k) % paths.len();
            let path = &mut paths[at];
            let took = path
                .once(target)
                .await
                .map_err(|error| anyhow::anyhow!("{} tunnel {round}: {error:#}", path.name))?;
            if round >= warm_up {
                path.times_us
                    .push(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
            }
        }
    }
    for path in &mut paths {
        path.times_us.sort_unstable();
    }
    let (p50, p99) = (paths[0].percentile(50), paths[0].percentile(99));
    let mut out = serde_json::Map::new();
    for path in &paths {
        out.insert(
            path.name.to_owned(),
            json!({
                "p50_ms": path.percentile(50), "p99_ms": path.percentile(99),
                "max_ms": path.percentile(100),
                "added_p50_ms": path.percentile(50) - p50, "added_p99_ms": path.percentile(99) - p99,
            }),
        );
    }
    Ok(json!({"tunnels_per_path": count, "paths": out}))
}
