//! `exitvoice audit`: flags ([`flags`]) → configuration ([`config`]) → runs, one after another
//! as `exitvoice_auditor::schedule::Runs` plans them → what is printed ([`output`]) → exit code.
//!
//! `audit` reads the exits file, probes every exit (after a direct baseline), stores the probes
//! and a labels snapshot in the database, prints a one-screen summary table, and writes the
//! labels JSON with `--labels-out`. `--once` runs once (cron, systemd timers); `--every 1h`
//! runs forever with ±10% jitter between runs, and probes the exits whose state or route just
//! changed again after `--recheck` (5 min) until they settle. `--preflight` runs once and exits
//! 0 when the pool passes, 3 when it fails. Logs go to stderr: human-readable on a TTY,
//! JSON lines otherwise. Passwords never reach logs, labels or the database (exit URLs are
//! redacted everywhere).
//!
//! Each file imports only those above it in this list: `flags`, `config`, `output`, this one.

mod config;
mod flags;
mod output;

use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use exitvoice_auditor::exposition::AuditMetrics;
use exitvoice_auditor::schedule::Runs;
use exitvoice_exposition::Listener;

use super::progress::ProbeBar;
use super::shared::init_logs;
use config::{setup, Setup};
pub use flags::Args;
use output::{preflight_table, RunOutput};

/// Exit code of a preflight whose pool fails.
const PREFLIGHT_FAILED: u8 = 3;

/// Runs `exitvoice audit`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    init_logs();
    if let Some(path) = &args.config {
        tracing::info!(config = %path.display(), "configuration file");
    }
    let Setup {
        exits,
        echo,
        config,
        thresholds,
    } = setup(&args)?;
    let store = args.database.open().await?;
    let metrics = Arc::new(AuditMetrics::default());
    if let Some(addr) = args.metrics_listen {
        let listener = Listener::bind(addr)
            .await
            .with_context(|| format!("binding the metrics listener {addr}"))?;
        println!("metrics on http://{}/metrics", listener.local_addr());
        let registry = metrics.registry();
        tokio::spawn(async move {
            // Served until the process ends.
            if let Err(error) = listener.serve(registry, std::future::pending()).await {
                tracing::error!(%error, "metrics listener failed");
            }
        });
    }
    let mut runs = Runs::new(exits, args.every, args.recheck);
    loop {
        // A progress bar on a TTY; structured logs carry the same facts otherwise.
        let bar = std::io::stderr()
            .is_terminal()
            .then(|| ProbeBar::start(Arc::clone(&config.progress)));
        let started = std::time::Instant::now();
        // --retain counts from the run's start, so a run longer than it keeps its own work.
        let prune_before =
            (!args.retain.is_zero()).then(|| exitvoice_auditor::record::rfc3339_ago(args.retain));
        let result = runs.run(&echo, &config, &store).await;
        if let Some(bar) = bar {
            bar.finish();
        }
        let report = result?;
        let pool = report.labels.header.pool.clone().unwrap_or_default();
        metrics.record_run(
            &report.outcomes,
            &pool,
            started.elapsed(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
        );
        metrics.record_claims(report.claimed, report.left_to_others);
        tracing::info!(
            run = %report.run_id,
            probes = report.outcomes.total(),
            exits_claimed = report.claimed,
            exits_left_to_others = report.left_to_others,
            violations = report.violations,
            recheck = runs.is_recheck(),
            "audit run finished"
        );
        let verdict = RunOutput::each_exit(
            &store,
            report.labels.id,
            args.labels_out.as_deref(),
            thresholds.as_ref(),
        )
        .await;
        // Another auditor published the period's snapshot: this run's own was only for its
        // output.
        if !report.labels.published {
            store.discard_labels(report.labels.id).await?;
        }
        if let Some(before) = prune_before {
            prune_past(&store, &before).await;
        }
        let verdict = verdict?;
        println!("same-exit overlaps (must be 0): {}", report.violations);
        if report.violations > 0 {
            return Ok(ExitCode::FAILURE);
        }
        if let Some(verdict) = verdict {
            print!("{}", preflight_table(&verdict));
            return Ok(if verdict.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(PREFLIGHT_FAILED)
            });
        }
        let Some(wake) = runs.plan(report.labels.unsettled) else {
            return Ok(ExitCode::SUCCESS);
        };
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// Rows deleted a statement when pruning past --retain: short enough that probes being written
/// by other auditors wait little.
const PRUNE_BATCH: u32 = 2_000;

/// Deletes the probes and labels snapshots from before `before` (RFC 3339); a failure is
/// logged, not fatal (the run's own work is stored, and the next run prunes again).
async fn prune_past(store: &exitvoice_store::Store, before: &str) {
    match store.prune_audit(before, PRUNE_BATCH).await {
        Ok(pruned) if pruned.probes + pruned.snapshots > 0 => tracing::info!(
            probes = pruned.probes,
            snapshots = pruned.snapshots,
            before,
            "pruned what is older than --retain"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "pruning what is older than --retain failed"),
    }
}
