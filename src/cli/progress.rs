//! What a terminal shows while `audit` probes: an `indicatif` bar with the probes done, their
//! rate and the time left. Log lines are written through the same `MultiProgress`, which clears
//! the bar, writes the line and draws the bar again below it, so a warning never lands inside
//! the bar's line. Off a terminal nothing is drawn and the logs go to stderr as they are.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use exitvoice_auditor::schedule::Progress;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// The process's bars. Global because the log subscriber that writes through them is.
fn bars() -> &'static MultiProgress {
    static BARS: OnceLock<MultiProgress> = OnceLock::new();
    // Draws on stderr, and only when stderr is a terminal.
    BARS.get_or_init(MultiProgress::new)
}

/// Log output: stderr, with any bar cleared for the line and drawn again after it.
pub(crate) struct ThroughBars;

impl std::io::Write for ThroughBars {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // The subscriber formats an event whole, then writes it in one call.
        bars().suspend(|| std::io::stderr().write_all(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// How often the bar reads the run's counters.
const TICK: Duration = Duration::from_millis(200);

/// A run's probes as a bar, while the run lasts.
pub(crate) struct ProbeBar {
    bar: ProgressBar,
    progress: Arc<Progress>,
    ticker: tokio::task::JoinHandle<()>,
}

impl ProbeBar {
    /// Shows `progress` (the run's counters) until [`ProbeBar::finish`].
    pub(crate) fn start(progress: Arc<Progress>) -> Self {
        let style =
            ProgressStyle::with_template("probes {pos}/{len} [{wide_bar}] {per_sec:1}, {eta} left")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        let bar = bars().add(ProgressBar::new(0).with_style(style));
        let ticker = {
            let (bar, progress) = (bar.clone(), Arc::clone(&progress));
            tokio::spawn(async move {
                loop {
                    bar.set_length(progress.total.load(Ordering::Relaxed));
                    bar.set_position(progress.done.load(Ordering::Relaxed));
                    tokio::time::sleep(TICK).await;
                }
            })
        };
        Self {
            bar,
            progress,
            ticker,
        }
    }

    /// Removes the bar and says how many probes the run made, and in what time.
    pub(crate) fn finish(self) {
        self.ticker.abort();
        let done = self.progress.done.load(Ordering::Relaxed);
        let took = self.bar.elapsed();
        self.bar.finish_and_clear();
        bars().remove(&self.bar);
        bars().suspend(|| eprintln!("probes done: {done} in {}", humanize(took)));
    }
}

/// `2m 05s`, `14s`, `0.8s`.
fn humanize(took: Duration) -> String {
    let secs = took.as_secs();
    match secs {
        0 => format!("{:.1}s", took.as_secs_f64()),
        1..60 => format!("{secs}s"),
        _ => format!("{}m {:02}s", secs / 60, secs % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_time_reads_in_minutes_and_seconds() {
        assert_eq!(humanize(Duration::from_millis(800)), "0.8s");
        assert_eq!(humanize(Duration::from_secs(14)), "14s");
        assert_eq!(humanize(Duration::from_secs(125)), "2m 05s");
    }
}
