//! The load: `clients` concurrent clients, each looping one cycle after another for a while,
//! closed-loop (saturation) or paced to a rate over all clients; the tally of what they saw.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::{json, Value};

/// What one cycle did.
pub struct Step {
    /// How long the acquire took.
    pub acquire: Duration,
    /// The acquire got a lease and its release was accepted: one cycle.
    pub done: bool,
    /// The acquire found nothing free (or gave up): a failed acquire, not a cycle.
    pub failed: bool,
}

/// One client: its cycles, one at a time.
pub trait Cycler: Send + 'static {
    /// Acquires, then releases what it got.
    fn cycle(&mut self) -> impl Future<Output = anyhow::Result<Step>> + Send;
}

#[derive(Default)]
struct Tally {
    cycles: u64,
    failed: u64,
    other: u64,
    acquire_us: Vec<u64>,
}

/// Runs `clients` (one [`Cycler`] each) for `duration`, paced to `rate` cycles/s over all of
/// them when given. One JSON object: cycles, cycles/s, failed acquires, other answers, acquire
/// latency percentiles (ms).
///
/// # Errors
/// A client's failure, or no cycle completed.
pub async fn drive<C: Cycler>(
    clients: Vec<C>,
    duration: Duration,
    rate: Option<f64>,
) -> anyhow::Result<Value> {
    let count = clients.len();
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::with_capacity(count);
    for (c, mut client) in clients.into_iter().enumerate() {
        // Paced: each client starts its cycles `clients / rate` seconds apart, staggered.
        let period = rate.map(|r| Duration::from_secs_f64(count as f64 / r));
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut next = Instant::now()
                + period.map_or(Duration::ZERO, |p| p.mul_f64(c as f64 / count as f64));
            while Instant::now() < deadline {
                if period.is_some() {
                    tokio::time::sleep_until(next.into()).await;
                }
                let step = client.cycle().await?;
                tally
                    .acquire_us
                    .push(u64::try_from(step.acquire.as_micros()).unwrap_or(u64::MAX));
                if step.done {
                    tally.cycles += 1;
                } else if step.failed {
                    tally.failed += 1;
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
        total.failed += tally.failed;
        total.other += tally.other;
        total.acquire_us.extend(tally.acquire_us);
    }
    let seconds = started.elapsed().as_secs_f64();
    if total.cycles == 0 {
        bail!(
            "no cycle completed ({} failed acquires, {} other answers)",
            total.failed,
            total.other
        );
    }
    total.acquire_us.sort_unstable();
    let pct = |p: usize| {
        let rank = (total.acquire_us.len() * p).div_ceil(100).max(1);
        total
            .acquire_us
            .get(rank - 1)
            .map_or(0.0, |us| *us as f64 / 1000.0)
    };
    Ok(json!({
        "clients": count, "rate": rate, "seconds": seconds, "cycles": total.cycles,
        "cycles_per_s": total.cycles as f64 / seconds, "failed_acquires": total.failed,
        "other_answers": total.other,
        "acquire_ms": {"p50": pct(50), "p95": pct(95), "p99": pct(99), "max": pct(100)},
    }))
}
