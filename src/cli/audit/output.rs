//! What `audit` prints of a run: the one-screen summary table, the labels JSON of
//! `--labels-out` (written whole, then renamed into place), and the preflight's verdict.

use std::io::Write as _;

use anyhow::Context;
use exitvoice_auditor::preflight::{self, Thresholds};
use exitvoice_schema::{ExitLabel, LabelsJsonWriter};

use super::super::shared::AtomicFile;

/// What `audit` prints of a run's labels, and writes with `--labels-out`: one pass over the
/// stored snapshot, a page of exits at a time.
pub(super) struct RunOutput<'t> {
    labels_out: Option<LabelsJsonWriter<AtomicFile>>,
    judge: Option<preflight::Judge<'t>>,
    table: std::io::Stdout,
}

impl<'t> RunOutput<'t> {
    /// Reads snapshot `id` and prints, writes and judges each exit's label.
    pub(super) async fn each_exit(
        store: &exitvoice_store::Store,
        id: i64,
        labels_out: Option<&std::path::Path>,
        thresholds: Option<&'t Thresholds>,
    ) -> anyhow::Result<Option<preflight::Verdict>> {
        let mut reader = store
            .read_labels(id)
            .await?
            .context("the run's labels snapshot is not in the database")?;
        let labels_out = match labels_out {
            Some(path) => Some(
                LabelsJsonWriter::begin(AtomicFile::create(path)?, reader.header())
                    .with_context(|| format!("writing {}", path.display()))?,
            ),
            None => None,
        };
        let mut output = RunOutput {
            labels_out,
            judge: thresholds.map(preflight::Judge::new),
            table: std::io::stdout(),
        };
        output.row(None)?;
        while let Some(page) = reader.next_page().await? {
            for label in &page {
                output.exit(label)?;
            }
        }
        if let Some(json) = output.labels_out.take() {
            json.end().context("writing --labels-out")?.commit()?;
        }
        let pool = reader.header().pool.clone().unwrap_or_default();
        Ok(output.judge.take().map(|judge| judge.finish(&pool)))
    }

    fn exit(&mut self, label: &ExitLabel) -> anyhow::Result<()> {
        if let Some(json) = &mut self.labels_out {
            json.exit(label).context("writing --labels-out")?;
        }
        if let Some(judge) = &mut self.judge {
            judge.add(label);
        }
        self.row(Some(label))
    }

    /// Prints the summary table's head (`None`) or an exit's row.
    fn row(&mut self, label: Option<&ExitLabel>) -> anyhow::Result<()> {
        let yes = |b: bool| if b { "yes" } else { "no" };
        let cells: [String; 12] = match label {
            None => [
                "exit", "state", "bucket", "route", "tls", "h2", "alpn", "remux", "mitm",
                "samples", "errors", "p50 ms",
            ]
            .map(str::to_owned),
            Some(label) => [
                label.name.chars().take(28).collect(),
                label.state.to_string(),
                label.bucket.map_or("-".to_owned(), |b| b.to_string()),
                label.route.to_string(),
                yes(label.flags.tls_preserved).to_owned(),
                yes(label.flags.h2_preserved).to_owned(),
                yes(label.flags.alpn_preserved).to_owned(),
                yes(label.flags.remuxed).to_owned(),
                yes(label.flags.tls_intercepted).to_owned(),
                label.samples.to_string(),
                label.errors.values().sum::<u32>().to_string(),
                label
                    .latency
                    .p50_ms
                    .map_or("-".to_owned(), |v| v.to_string()),
            ],
        };
        let [exit, state, bucket, route, tls, h2, alpn, remux, mitm, samples, errors, p50] = &cells;
        writeln!(
            self.table,
            "{exit:<28} {state:<11} {bucket:<6} {route:<10} {tls:<4} {h2:<4} {alpn:<4} \
             {remux:<5} {mitm:<4} {samples:>7} {errors:>6} {p50:>7}"
        )?;
        Ok(())
    }
}

/// The preflight's verdict per exit and for the pool, as printed.
pub(super) fn preflight_table(verdict: &preflight::Verdict) -> String {
    let mut out = format!("\n{:<28} {:<7} reasons\n", "exit", "verdict");
    for exit in &verdict.exits {
        let name: String = exit.name.chars().take(28).collect();
        let (word, why) = if exit.reasons.is_empty() {
            ("pass", "-".to_owned())
        } else {
            ("FAIL", exit.reasons.join("; "))
        };
        out.push_str(&format!("{name:<28} {word:<7} {why}\n"));
    }
    let buckets: Vec<String> = verdict
        .buckets
        .iter()
        .map(|(b, n)| format!("{b}:{n}"))
        .collect();
    out.push_str(&format!(
        "pool: pass share {:.2}, tls preserved {:.2}, buckets {}, h2_health {}, unique egress {}\n",
        verdict.pass_share,
        verdict.tls_preserved_share,
        buckets.join(" "),
        verdict
            .h2_health
            .map_or("-".to_owned(), |h| format!("{h:.2}")),
        verdict.unique_egress,
    ));
    if verdict.passed() {
        out.push_str("preflight: pass\n");
    } else {
        out.push_str(&format!(
            "preflight: FAIL: {}\n",
            verdict.failures.join("; ")
        ));
    }
    out
}
