//! Runs: a direct baseline, then K samples per exit, under limits.
//!
//! - Every sample is its own probe (new connection, new token), spaced by
//!   [`RunConfig::spacing`] plus up to [`RunConfig::jitter`] of random delay.
//! - The samples of one exit run one after another, so no two probes ever share an exit (or a
//!   gateway session) at once; an in-flight registry counts violations anyway, and the count is
//!   reported (it must be 0).
//! - A global semaphore caps concurrent probes ([`RunConfig::concurrency`]).
//! - Transient failures (timeouts, resets, DNS) are retried with exponential backoff, at most
//!   [`RunConfig::retries`] times; auth, refusals, TLS and bad echoes are not.
//! - A gateway session that fails gets a fresh session id; the failed id is never used again.
//! - Records go to the store as their probes finish ([`sink`]); a run keeps per exit only the
//!   exit itself, and the labels are computed afterwards from each exit's stored window, one
//!   exit at a time, so memory grows with the exits by what a label needs, not by the probes.

mod lease;
mod outcomes;
mod sink;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use exitvoice_exits::dial::Timeouts;
use exitvoice_exits::error::ProbeError;
use exitvoice_exits::{EchoTarget, Exit, SessionMinter};
use exitvoice_schema::{
    ExitLabel, LabelsDoc, ProbeFailure, ProbeRecord, Sample, LABELS_SCHEMA_VERSION,
};
use exitvoice_store::{Store, StoreError};
use rand::Rng;
use tokio::sync::Semaphore;

use crate::drift::DriftConfig;
use crate::labels::{self, ExitInfo, Prior, RouteRule};
use crate::pool;
use crate::probe::chromium::ChromiumConfig;
use crate::probe::{self, H2Profile, ProbeOutcome};
use crate::record::{self, now_rfc3339, ProbeContext};

pub use outcomes::Outcomes;

/// Tunables of a run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Samples per exit per run (default 4).
    pub samples: u32,
    /// Most probes in flight at once, over all exits.
    pub concurrency: usize,
    /// Per-phase limits.
    pub timeouts: Timeouts,
    /// Gap between two samples of the same exit.
    pub spacing: Duration,
    /// Random extra gap, uniform in `0..=jitter`.
    pub jitter: Duration,
    /// Retries of a transient failure.
    pub retries: u32,
    /// First retry delay; doubles each retry.
    pub backoff: Duration,
    /// Who sends the probes.
    pub persona: Persona,
    /// The h2 profile the built-in persona sends.
    pub profile: H2Profile,
    /// Drift classifier tunables.
    pub drift: DriftConfig,
    /// The route rule.
    pub route: RouteRule,
    /// Probe counters a progress display can read while the run goes on.
    pub progress: Arc<Progress>,
    /// How long an auditor's claim on an exit lasts unless renewed (a live run renews its
    /// claims every third of it): how soon another auditor takes the exits of one that died.
    pub lease_ttl: Duration,
    /// With `--every`, the period: an exit probed (by any auditor on the database) in the last
    /// 80 % of it is not probed again. Without, every exit is probed.
    pub period: Option<Duration>,
    /// Whether a run makes QUIC probes (HTTP/3 over UDP): one direct, then one per exit after
    /// its first sample while the direct one gets through (`audit --no-quic` turns them off).
    pub quic: bool,
    /// The QUIC probes' handshake limit (in place of [`Timeouts::tls`]): through an exit that
    /// drops UDP it always runs out, once per exit per run, so it is short.
    pub quic_timeout: Duration,
}

impl RunConfig {
    /// The limits of a QUIC probe.
    fn quic_timeouts(&self) -> Timeouts {
        Timeouts {
            tls: self.quic_timeout,
            ..self.timeouts
        }
    }
}

/// Counters of the current run: probes planned and finished (baseline included).
#[derive(Debug, Default)]
pub struct Progress {
    /// Probes finished so far.
    pub done: AtomicU64,
    /// Probes planned.
    pub total: AtomicU64,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            samples: 4,
            concurrency: 8,
            timeouts: Timeouts::default(),
            spacing: Duration::from_millis(200),
            jitter: Duration::from_millis(300),
            retries: 2,
            backoff: Duration::from_millis(250),
            persona: Persona::Rustls,
            profile: H2Profile::chrome(),
            drift: DriftConfig::default(),
            route: RouteRule::default(),
            progress: Arc::default(),
            lease_ttl: Duration::from_secs(60),
            period: None,
            quic: true,
            quic_timeout: Duration::from_secs(3),
        }
    }
}

impl RunConfig {
    /// The persona name stored with each probe: `rustls/<profile>` or `chromium`.
    pub fn persona(&self) -> String {
        match self.persona {
            Persona::Rustls => format!("rustls/{}", self.profile.name),
            Persona::Chromium(_) => "chromium".to_owned(),
        }
    }
}

/// Who sends the probes. Labels are kept per persona.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Persona {
    /// The built-in rustls client with the run's [`H2Profile`].
    Rustls,
    /// Real headless Chromium through a forwarding shim.
    Chromium(ChromiumConfig),
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The run id.
    pub run_id: String,
    /// The baseline probe.
    pub baseline: ProbeRecord,
    /// The run's exit probes by outcome (the records themselves are in the store).
    pub outcomes: Outcomes,
    /// Times two probes were in flight through the same exit or session. Must be 0.
    pub violations: u64,
    /// Exits this run claimed and probed.
    pub claimed: u64,
    /// Exits of the run that other auditors on the database probed (or had probed in the
    /// period) instead.
    pub left_to_others: u64,
    /// The labels after the run.
    pub labels: LabelsDoc,
}

/// Why a run could not complete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A probe task panicked or was cancelled.
    #[error("a probe task ended abnormally")]
    Task,
}

/// Keys of the exits (and gateway sessions) with a probe in flight.
#[derive(Debug, Default)]
struct InFlight {
    keys: Mutex<HashSet<String>>,
    violations: AtomicU64,
}

struct InFlightGuard<'a> {
    registry: &'a InFlight,
    key: String,
}

impl InFlight {
    fn enter(&self, key: String) -> InFlightGuard<'_> {
        let fresh = self
            .keys
            .lock()
            .map(|mut keys| keys.insert(key.clone()))
            .unwrap_or(true);
        if !fresh {
            self.violations.fetch_add(1, Ordering::Relaxed);
        }
        InFlightGuard {
            registry: self,
            key,
        }
    }
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut keys) = self.registry.keys.lock() {
            keys.remove(&self.key);
        }
    }
}

fn in_flight_key(exit: &Exit) -> String {
    match &exit.session {
        Some(session) => format!("{}\u{0}{}", exit.redacted_url(), session.id),
        None => exit.name.clone(),
    }
}

/// A run id: UTC time and 32 random bits.
pub fn new_run_id() -> String {
    format!(
        "{}-{:08x}",
        time::OffsetDateTime::now_utc().unix_timestamp(),
        rand::rng().random::<u32>()
    )
}

/// A sample's probe, retried while it fails transiently: the outcome of its last attempt, and
/// the failures of the attempts before it (each its own connection through the exit).
async fn probe_with_retries(
    exit: Option<&Exit>,
    echo: &EchoTarget,
    config: &RunConfig,
    token: &str,
) -> (Result<ProbeOutcome, ProbeError>, Vec<ProbeFailure>) {
    let mut retried = Vec::new();
    loop {
        let result = match &config.persona {
            Persona::Rustls => {
                probe::probe(exit, echo, &config.profile, token, &config.timeouts).await
            }
            Persona::Chromium(chromium) => {
                probe::chromium::probe(exit, echo, token, &config.timeouts, chromium).await
            }
        };
        let attempt = u32::try_from(retried.len()).unwrap_or(u32::MAX);
        match result {
            Err(error) if error.class().is_transient() && attempt < config.retries => {
                let delay = config.backoff.saturating_mul(1 << attempt.min(16));
                tracing::debug!(
                    exit = exit.map_or("direct", |e| e.name.as_str()),
                    class = %error.class(),
                    attempt,
                    "transient probe failure, retrying"
                );
                retried.push(record::failure(&error));
                tokio::time::sleep(delay).await;
            }
            other => return (other, retried),
        }
    }
}

fn jittered(base: Duration, jitter: Duration) -> Duration {
    let extra = u64::try_from(jitter.as_millis()).unwrap_or(u64::MAX);
    base + Duration::from_millis(if extra == 0 {
        0
    } else {
        rand::rng().random_range(0..=extra)
    })
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

/// The exits whose label changed since `previous`: a new exit, another drift state, another
/// route, or coherence kept or lost. Under `--every` they are probed again after `--recheck` until they settle.
pub fn unsettled(previous: Option<&LabelsDoc>, current: &LabelsDoc) -> Vec<String> {
    let before: HashMap<&str, &ExitLabel> = previous
        .iter()
        .flat_map(|doc| &doc.exits)
        .map(|label| (label.name.as_str(), label))
        .collect();
    current
        .exits
        .iter()
        .filter(|label| {
            let before = before.get(label.name.as_str());
            let kept = |l: &ExitLabel| l.coherence.as_ref().map(|c| c.kept);
            before.is_none_or(|b| {
                b.state != label.state || b.route != label.route || kept(b) != kept(label)
            })
        })
        .map(|label| label.name.clone())
        .collect()
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
    let selected: Vec<usize> = (0..exits.len())
        .filter(|&i| only.is_none_or(|names| exits.get(i).is_some_and(|e| names.contains(&e.name))))
        .collect();

    let planned = 1 + u64::from(config.samples) * u64::try_from(selected.len()).unwrap_or(u64::MAX);
    config.progress.total.store(planned, Ordering::Relaxed);
    config.progress.done.store(0, Ordering::Relaxed);
    let token = probe::new_token();
    let started_at = now_rfc3339();
    let (outcome, retried) = probe_with_retries(None, echo, config, &token).await;
    config.progress.done.fetch_add(1, Ordering::Relaxed);
    if let Err(error) = &outcome {
        tracing::warn!(class = %error.class(), error = %error, "direct baseline failed");
    }
    let mut baseline = record::record(
        ProbeContext {
            run_id: &run_id,
            exit: None,
            token: &token,
            persona: &persona,
            started_at,
        },
        outcome,
        None,
    );
    baseline.retried = retried;
    if config.quic {
        let h3 = probe::h3::probe(None, echo, &probe::new_token(), &config.quic_timeouts()).await;
        if let Some(error) = &h3.error {
            tracing::warn!(class = %error.class, error = %error.message, "direct QUIC probe failed");
        }
        baseline.h3 = Some(h3);
    }
    store.insert_probe(&baseline).await?;

    // A re-check probes its exits again whenever they were last probed.
    let period = if only.is_some() { None } else { config.period };
    let leases = lease::Leases::new(
        store.clone(),
        run_id.clone(),
        persona.clone(),
        config.lease_ttl,
        period,
    );
    let _keep_alive = AbortOnDrop(leases.keep_alive());
    let semaphore = Arc::new(Semaphore::new(config.concurrency.max(1)));
    let in_flight = Arc::new(InFlight::default());
    let shared_minter = Arc::new(Mutex::new(std::mem::take(minter)));
    let (sink, writer) = sink::spawn(store.clone(), config.concurrency.max(1));
    // One copy of what every exit's task reads: a task holds only its exit and these handles.
    let shared = Arc::new(Shared {
        echo: echo.clone(),
        config: config.clone(),
        run_id: run_id.clone(),
        persona: persona.clone(),
        baseline: baseline.sample.clone(),
        quic: baseline.h3.as_ref().is_some_and(|h3| h3.udp_carried),
        leases: leases.clone(),
    });
    // Rounds until every exit is done in this period, by this run or another auditor: an exit
    // another auditor holds is tried again once that auditor finishes it (then it is done) or
    // dies (then its lease expires and this run takes it).
    let selected_count = u64::try_from(selected.len()).unwrap_or(u64::MAX);
    let mut claimed_count = 0_u64;
    let mut pending = selected;
    loop {
        let names: Vec<String> = pending
            .iter()
            .filter_map(|&i| exits.get(i).map(|e| e.name.clone()))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let left: HashSet<String> = leases
            .not_done(&names)
            .await?
            .into_iter()
            .map(str::to_owned)
            .collect();
        pending.retain(|&i| exits.get(i).is_some_and(|e| left.contains(&e.name)));
        if pending.is_empty() {
            break;
        }
        let mut tasks = Vec::with_capacity(pending.len());
        for exit in pending.iter().filter_map(|&i| exits.get(i)) {
            tasks.push(tokio::spawn(sample_exit(
                exit.clone(),
                shared.clone(),
                semaphore.clone(),
                in_flight.clone(),
                shared_minter.clone(),
                sink.clone(),
            )));
        }
        let mut claimed_any = false;
        for (&index, task) in pending.iter().zip(tasks) {
            let (exit, claimed) = task.await.map_err(|_| RunError::Task)?;
            claimed_any |= claimed;
            claimed_count += u64::from(claimed);
            if let Some(slot) = exits.get_mut(index) {
                *slot = exit;
            }
        }
        if !claimed_any {
            // Everything left is another auditor's for now.
            tokio::time::sleep(LEASE_POLL).await;
        }
    }
    drop(sink);
    let outcomes = writer.finish().await?;
    if let Ok(mut shared) = shared_minter.lock() {
        *minter = std::mem::take(&mut *shared);
    }
    let labels = compute_labels(exits, config, store).await?;
    // Of the auditors sharing the database, one stores the period's snapshot.
    let names: Vec<&str> = exits.iter().map(|e| e.name.as_str()).collect();
    if leases.take_labels(&names).await? {
        store.insert_labels(&labels).await?;
    }
    Ok(RunReport {
        run_id,
        baseline,
        outcomes,
        violations: in_flight.violations.load(Ordering::Relaxed),
        claimed: claimed_count,
        left_to_others: selected_count.saturating_sub(claimed_count),
        labels,
    })
}

/// What every exit's task of a run reads.
struct Shared {
    echo: EchoTarget,
    config: RunConfig,
    run_id: String,
    persona: String,
    baseline: Option<Sample>,
    /// The run's direct QUIC probe got through: exits get theirs.
    quic: bool,
    leases: lease::Leases,
}

/// How often a run looks again at exits another auditor holds.
const LEASE_POLL: Duration = Duration::from_millis(500);

/// Aborts a background task when the run ends, however it ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The samples of one exit, one after another, each record handed to the store's writer as
/// soon as it is made, if this run can claim the exit (no other auditor holds it, and it was
/// not done in this period). Returns the exit (its gateway session rotated after failures)
/// and whether it was claimed.
async fn sample_exit(
    mut exit: Exit,
    shared: Arc<Shared>,
    semaphore: Arc<Semaphore>,
    in_flight: Arc<InFlight>,
    minter: Arc<Mutex<SessionMinter>>,
    sink: sink::Sink,
) -> (Exit, bool) {
    let config = &shared.config;
    // The token of the first sample that reached the echo: at the end, the Chromium persona
    // asks the echo's ledger about the identity it made.
    let mut first_token = None;
    for sample in 0..config.samples {
        if sample > 0 {
            tokio::time::sleep(jittered(config.spacing, config.jitter)).await;
        }
        let Ok(_permit) = semaphore.acquire().await else {
            break;
        };
        // Claimed once a probe slot is free, not before: a run does not hold exits it is not
        // probing yet, which other auditors could be.
        if sample == 0 {
            match shared.leases.claim_exit(&exit.name).await {
                Ok(true) => {}
                Ok(false) => return (exit, false),
                Err(error) => {
                    tracing::warn!(exit = %exit.name, %error, "claiming the exit failed");
                    return (exit, false);
                }
            }
        }
        let token = probe::new_token();
        let started_at = now_rfc3339();
        let (outcome, retried) = {
            let _guard = in_flight.enter(in_flight_key(&exit));
            // Boxed: a probe's state (TLS client, HTTP/2 writer, buffers) exists only while the
            // probe runs, instead of inside each of the run's many waiting tasks.
            Box::pin(probe_with_retries(
                Some(&exit),
                &shared.echo,
                config,
                &token,
            ))
            .await
        };
        config.progress.done.fetch_add(1, Ordering::Relaxed);
        let failed = match &outcome {
            Ok(_) => {
                tracing::info!(exit = %exit.name, sample, "probe ok");
                first_token.get_or_insert_with(|| token.clone());
                false
            }
            Err(error) => {
                tracing::warn!(
                    exit = %exit.name,
                    url = %exit.redacted_url(),
                    sample,
                    class = %error.class(),
                    error = %error,
                    "probe failed"
                );
                true
            }
        };
        let mut record = record::record(
            ProbeContext {
                run_id: &shared.run_id,
                exit: Some(&exit),
                token: &token,
                persona: &shared.persona,
                started_at,
            },
            outcome,
            shared.baseline.as_ref(),
        );
        record.retried = retried;
        if sample == 0 && shared.quic {
            let token = probe::new_token();
            let h3 = Box::pin(probe::h3::probe(
                Some(&exit),
                &shared.echo,
                &token,
                &config.quic_timeouts(),
            ))
            .await;
            tracing::info!(exit = %exit.name, via = ?h3.via, carried = h3.udp_carried, "QUIC probe");
            record.h3 = Some(h3);
        }
        if sample + 1 == config.samples && matches!(config.persona, Persona::Chromium(_)) {
            if let Some(token) = &first_token {
                match probe::ledger::verdict(&shared.echo, token, &config.timeouts).await {
                    Ok(verdict) => record.ledger = Some(verdict),
                    Err(error) => {
                        tracing::warn!(exit = %exit.name, %error, "reading the echo's h3 ledger failed");
                    }
                }
            }
        }
        if !sink.store(record).await {
            break;
        }
        // A failed gateway session is retired; the slot gets a fresh id.
        if failed {
            if let Ok(mut minter) = minter.lock() {
                minter.rotate(&mut exit);
            }
        }
    }
    if let Err(error) = shared.leases.finish_exit(&exit.name).await {
        tracing::warn!(exit = %exit.name, %error, "marking the exit done failed");
    }
    (exit, true)
}

/// Labels of `exits` from the stored history (the last `drift.window` probes of each, more for
/// the history and the recovery streak), each compared with the persona's latest baseline and
/// carrying on from the persona's previous labels snapshot (quarantine, transition).
///
/// # Errors
/// Store failures.
pub async fn compute_labels(
    exits: &[Exit],
    config: &RunConfig,
    store: &Store,
) -> Result<LabelsDoc, StoreError> {
    let persona = config.persona();
    let window = config
        .drift
        .window
        .max(labels::HISTORY_LEN)
        .max(usize::try_from(config.route.recover_after).unwrap_or(usize::MAX));
    let window = u32::try_from(window).unwrap_or(u32::MAX);
    let baselines = store.recent_probes(None, &persona, 8).await?;
    let baseline_record = baselines.iter().rev().find(|r| r.sample.is_some());
    let baseline_sample = baseline_record.and_then(|r| r.sample.as_ref());
    // Without QUIC probes, older ones would only be stale.
    let baseline_h3 = baselines
        .iter()
        .rev()
        .find_map(|r| r.h3.as_ref())
        .filter(|_| config.quic);
    let previous = store.latest_labels_of(&persona).await?;
    let previous: HashMap<&str, &ExitLabel> = previous
        .iter()
        .flat_map(|doc| &doc.exits)
        .map(|label| (label.name.as_str(), label))
        .collect();
    let mut out = Vec::with_capacity(exits.len());
    for exit in exits {
        let records = store
            .recent_probes(Some(&exit.name), &persona, window)
            .await?;
        let info = ExitInfo {
            name: exit.name.clone(),
            url: exit.redacted_url(),
            tags: exit.tags.clone(),
            rotate: exit.rotate,
        };
        let prior = Prior {
            baseline: baseline_sample,
            previous: previous.get(exit.name.as_str()).copied(),
            baseline_h3,
        };
        out.push(labels::label(
            &info,
            &records,
            &config.route,
            config.drift,
            prior,
        ));
    }
    Ok(LabelsDoc {
        schema_version: LABELS_SCHEMA_VERSION,
        generated_at: now_rfc3339(),
        persona: Some(persona),
        baseline: baseline_record.and_then(labels::baseline_of),
        pool: Some(pool::summary(&out)),
        exits: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_counts_overlaps_only() {
        let registry = InFlight::default();
        {
            let _a = registry.enter("x".into());
            let _b = registry.enter("y".into());
        }
        let _c = registry.enter("x".into());
        assert_eq!(registry.violations.load(Ordering::Relaxed), 0);
        let _d = registry.enter("x".into());
        assert_eq!(registry.violations.load(Ordering::Relaxed), 1);
    }

    /// A loopback listener that counts connections and answers each with `reply` (or holds it
    /// silent when `reply` is empty).
    async fn counting_proxy(reply: &'static [u8]) -> (u16, Arc<AtomicU64>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let count = Arc::new(AtomicU64::new(0));
        let counter = count.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::Relaxed);
                if !reply.is_empty() {
                    let mut buf = [0u8; 1024];
                    let _ = socket.read(&mut buf).await;
                    let _ = socket.write_all(reply).await;
                }
                held.push(socket);
            }
        });
        (port, count)
    }

    #[tokio::test]
    async fn only_transient_failures_are_retried() {
        let config = RunConfig {
            retries: 2,
            backoff: Duration::from_millis(10),
            timeouts: Timeouts {
                tunnel: Duration::from_millis(150),
                ..Timeouts::default()
            },
            ..RunConfig::default()
        };
        let echo = EchoTarget::new("https://127.0.0.1:9", &"00".repeat(32)).unwrap();
        let exit_for = |port: u16| {
            Exit::new(
                "x",
                exitvoice_exits::ProxyUrl::parse(&format!("http://u:p@127.0.0.1:{port}")).unwrap(),
            )
        };

        let (silent, attempts) = counting_proxy(b"").await;
        let (outcome, retried) =
            probe_with_retries(Some(&exit_for(silent)), &echo, &config, "t").await;
        assert_eq!(
            outcome.unwrap_err().class(),
            exitvoice_exits::error::ErrorClass::Timeout
        );
        assert_eq!(attempts.load(Ordering::Relaxed), 3, "1 try + 2 retries");
        // The two retried attempts are kept as evidence, each its own connection.
        let classes: Vec<&str> = retried.iter().map(|f| f.class.as_str()).collect();
        assert_eq!(classes, ["timeout", "timeout"]);

        let (auth, attempts) =
            counting_proxy(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n").await;
        let (outcome, retried) =
            probe_with_retries(Some(&exit_for(auth)), &echo, &config, "t").await;
        assert_eq!(
            outcome.unwrap_err().class(),
            exitvoice_exits::error::ErrorClass::ProxyAuth
        );
        assert!(retried.is_empty());
        assert_eq!(
            attempts.load(Ordering::Relaxed),
            1,
            "auth failures are not retried"
        );

        // A tunnel that opens and then stays silent: a timeout of the TLS phase.
        let (mute, _) = counting_proxy(b"HTTP/1.1 200 Connection established\r\n\r\n").await;
        let config = RunConfig {
            retries: 0,
            timeouts: Timeouts {
                tls: Duration::from_millis(150),
                ..Timeouts::default()
            },
            ..RunConfig::default()
        };
        let error = probe_with_retries(Some(&exit_for(mute)), &echo, &config, "t")
            .await
            .0
            .unwrap_err();
        assert_eq!(error.class(), exitvoice_exits::error::ErrorClass::Timeout);
        assert_eq!(error.phase(), Some(exitvoice_exits::error::Phase::Tls));
    }

    #[test]
    fn unsettled_exits_are_new_or_changed() {
        let label = |name: &str, state: &str, route: &str| {
            serde_json::json!({
                "name": name, "url": "u", "tags": {}, "egress_ips": [], "state": state,
                "changed_at": null, "bucket": null,
                "flags": {"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false},
                "voices": [], "route": route, "route_reason": "r", "samples": 1, "errors": {},
                "latency": {"p50_ms": null, "p95_ms": null}, "last_probe_at": null,
                "history": [],
            })
        };
        let doc = |exits: Vec<serde_json::Value>| -> LabelsDoc {
            serde_json::from_value(serde_json::json!({
                "schema_version": 2, "generated_at": "t", "baseline": null, "exits": exits,
            }))
            .unwrap()
        };
        let before = doc(vec![
            label("same", "stable", "identity"),
            label("state", "unknown", "anonymous"),
            label("route", "stable", "anonymous"),
        ]);
        let after = doc(vec![
            label("same", "stable", "identity"),
            label("state", "stable", "anonymous"),
            label("route", "stable", "quarantine"),
            label("new", "unknown", "anonymous"),
        ]);
        assert_eq!(unsettled(Some(&before), &after), ["state", "route", "new"]);
        let mut dropped = after.clone();
        dropped.exits[0].coherence = Some(exitvoice_schema::ExitCoherence {
            newest: exitvoice_schema::Coherence {
                score: 0.5,
                reasons: vec!["alpn_h2_spoke_http1".into()],
                tls_family: None,
                http_family: None,
                ua_family: None,
            },
            baseline_score: Some(1.0),
            kept: false,
        });
        assert_eq!(unsettled(Some(&after), &dropped), ["same"]);
        assert_eq!(unsettled(Some(&after), &after), Vec::<String>::new());
        assert_eq!(unsettled(None, &before).len(), 3);
    }

    #[test]
    fn jitter_stays_in_range() {
        for _ in 0..100 {
            let d = jittered(Duration::from_millis(100), Duration::from_millis(50));
            assert!(d >= Duration::from_millis(100) && d <= Duration::from_millis(150));
        }
    }
}
