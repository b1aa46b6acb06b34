//! A run from start to end: the direct baseline, rounds of exit tasks until every selected exit
//! is done (by this run or another auditor), then the labels snapshot.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use exitvoice_exits::{EchoTarget, Exit, SessionMinter};
use exitvoice_store::{Store, StoreError};
use rand::Rng;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::baseline::probe_baseline;
use super::claims::Claims;
use super::config::RunConfig;
use super::inflight::InFlight;
use super::report::{RunError, RunReport};
use super::sample::{sample_exit, RunContext};
use super::sink::{self, Sink};
use super::snapshot::store_labels;

/// How often a run looks again at exits another auditor holds.
const LEASE_POLL: Duration = Duration::from_millis(500);

/// A run id: UTC time and 32 random bits.
pub fn new_run_id() -> String {
    format!(
        "{}-{:08x}",
        time::OffsetDateTime::now_utc().unix_timestamp(),
        rand::rng().random::<u32>()
    )
}

/// Runs one audit: baseline, samples, store, labels.
///
/// # Errors
/// Store failures; probe failures are recorded, not returned.
pub async fn run_once(
    exits: &mut [Exit],
    echo: &EchoTarget,
    config: &RunConfig,
    store: &Store,
    minter: &mut SessionMinter,
) -> Result<RunReport, RunError> {
    run(exits, None, echo, config, store, minter).await
}

/// Runs a re-check: a baseline and samples of the exits named in `only`, then the labels of
/// every exit (the others' from their stored history), so the snapshot stays whole.
///
/// # Errors
/// Store failures; probe failures are recorded, not returned.
pub async fn run_some(
    exits: &mut [Exit],
    only: &[String],
    echo: &EchoTarget,
    config: &RunConfig,
    store: &Store,
    minter: &mut SessionMinter,
) -> Result<RunReport, RunError> {
    run(exits, Some(only), echo, config, store, minter).await
}

async fn run(
    exits: &mut [Exit],
    only: Option<&[String]>,
    echo: &EchoTarget,
    config: &RunConfig,
    store: &Store,
    minter: &mut SessionMinter,
) -> Result<RunReport, RunError> {
    let run_id = new_run_id();
    let persona = config.persona();
    let selected = selected(exits, only);
    let planned = 1 + u64::from(config.samples) * u64::try_from(selected.len()).unwrap_or(u64::MAX);
    config.progress.total.store(planned, Ordering::Relaxed);
    config.progress.done.store(0, Ordering::Relaxed);
    let baseline = probe_baseline(echo, config, &run_id, &persona).await;
    store.insert_probe(&baseline).await?;

    // A re-check probes its exits again whenever they were last probed.
    let period = if only.is_some() { None } else { config.period };
    let claims = Claims::new(
        store.clone(),
        run_id.clone(),
        persona.clone(),
        config.lease_ttl,
        period,
    );
    let _keep_alive = AbortOnDrop(claims.keep_alive());
    let (sink, writer) = sink::spawn(store.clone(), config.concurrency.max(1));
    // One copy of what every exit's task reads: a task holds only its exit and these handles.
    let context = Arc::new(RunContext {
        echo: echo.clone(),
        config: config.clone(),
        run_id: run_id.clone(),
        persona,
        baseline: baseline.sample.clone(),
        quic: baseline.h3.as_ref().is_some_and(|h3| h3.udp_carried),
        claims: claims.clone(),
        semaphore: Semaphore::new(config.concurrency.max(1)),
        in_flight: InFlight::default(),
        minter: Mutex::new(std::mem::take(minter)),
    });
    let selected_count = u64::try_from(selected.len()).unwrap_or(u64::MAX);
    let claimed = rounds(exits, selected, &context, &sink).await?;
    drop(sink);
    let outcomes = writer.finish().await?;
    if let Ok(mut shared) = context.minter.lock() {
        *minter = std::mem::take(&mut *shared);
    }

    // Of the auditors sharing the database, one publishes the period's snapshot.
    let names: Vec<&str> = exits.iter().map(|e| e.name.as_str()).collect();
    let publish = claims.take_labels(&names).await?;
    let labels = store_labels(exits, config, store, publish).await?;
    Ok(RunReport {
        run_id,
        baseline,
        outcomes,
        violations: context.in_flight.violations(),
        claimed,
        left_to_others: selected_count.saturating_sub(claimed),
        labels,
    })
}

/// Indices of the exits named in `only`, or of all.
fn selected(exits: &[Exit], only: Option<&[String]>) -> Vec<usize> {
    (0..exits.len())
        .filter(|&i| only.is_none_or(|names| exits.get(i).is_some_and(|e| names.contains(&e.name))))
        .collect()
}

/// Rounds until every exit of `pending` (indices into `exits`) is done in this period, by this
/// run or another auditor: an exit another auditor holds is tried again once that auditor
/// finishes it (then it is done) or dies (then its claim expires and this run takes it).
/// Returns how many exits this run claimed.
async fn rounds(
    exits: &mut [Exit],
    mut pending: Vec<usize>,
    context: &Arc<RunContext>,
    sink: &Sink,
) -> Result<u64, RunError> {
    let mut claimed_count = 0_u64;
    loop {
        keep_not_done(exits, &mut pending, &context.claims).await?;
        if pending.is_empty() {
            return Ok(claimed_count);
        }
        let claimed = round(exits, &pending, context, sink).await?;
        claimed_count += claimed;
        if claimed == 0 {
            // Everything left is another auditor's for now.
            tokio::time::sleep(LEASE_POLL).await;
        }
    }
}

/// Keeps of `pending` the exits not done in this period, by this run or another auditor.
async fn keep_not_done(
    exits: &[Exit],
    pending: &mut Vec<usize>,
    claims: &Claims,
) -> Result<(), StoreError> {
    let names: Vec<String> = pending
        .iter()
        .filter_map(|&i| exits.get(i).map(|e| e.name.clone()))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let left: HashSet<String> = claims
        .not_done(&names)
        .await?
        .into_iter()
        .map(str::to_owned)
        .collect();
    pending.retain(|&i| exits.get(i).is_some_and(|e| left.contains(&e.name)));
    Ok(())
}

/// Tasks of one round alive at once, per probe slot ([`RunConfig::concurrency`]): enough that
/// the slots stay busy while exits wait out the spacing between their samples, few enough that
/// memory follows the probes in flight, not the pool (a waiting exit's task is ~20 KB).
const LIVE_EXITS_PER_SLOT: usize = 8;

/// One task per exit of `pending`, at most [`LIVE_EXITS_PER_SLOT`] per probe slot at once, the
/// next started as one ends; each exit comes back in its slot (its gateway session rotated after
/// failures). Returns how many exits this round claimed.
async fn round(
    exits: &mut [Exit],
    pending: &[usize],
    context: &Arc<RunContext>,
    sink: &Sink,
) -> Result<u64, RunError> {
    let live = context
        .config
        .concurrency
        .max(1)
        .saturating_mul(LIVE_EXITS_PER_SLOT);
    let mut waiting = pending.iter();
    let mut tasks = JoinSet::new();
    let mut claimed_count = 0_u64;
    loop {
        while tasks.len() < live {
            let Some((index, exit)) = waiting
                .by_ref()
                .find_map(|&i| exits.get(i).map(|exit| (i, exit.clone())))
            else {
                break;
            };
            let (context, sink) = (context.clone(), sink.clone());
            tasks.spawn(async move { (index, sample_exit(exit, context, sink).await) });
        }
        let Some(ended) = tasks.join_next().await else {
            return Ok(claimed_count);
        };
        let (index, (exit, claimed)) = ended.map_err(|_| RunError::Task)?;
        claimed_count += u64::from(claimed);
        if let Some(slot) = exits.get_mut(index) {
            *slot = exit;
        }
    }
}

/// Aborts a background task when the run ends, however it ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
