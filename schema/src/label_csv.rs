//! The labels as CSV, one row per exit with what a spreadsheet reader needs, for
//! `exitvoice labels --format csv` and the dashboard's `/exits.csv`. Quoting is RFC 4180's
//! (the `csv` crate). Every cell is text a spreadsheet must not run: one that starts with `=`,
//! `+`, `-`, `@`, a tab or a carriage return gets a leading `'` (OWASP, "CSV Injection"), so an
//! exit named `=HYPERLINK(…)` stays its name.

use crate::label::{ExitLabel, LabelsDoc};

/// The columns, in order.
pub const CSV_COLUMNS: [&str; 18] = [
    "name",
    "url",
    "route",
    "reasons",
    "state",
    "bucket",
    "egress",
    "country",
    "asn",
    "organization",
    "success_rate",
    "latency_p50_ms",
    "latency_p95_ms",
    "gap_min_us",
    "excess_gap_us",
    "gap_verdict",
    "gap_moved",
    "last_probe_at",
];

/// `doc` as CSV: a header line, then one line per exit in the snapshot's order.
///
/// # Errors
/// Only if the CSV writer fails to write to memory, which it does not.
pub fn labels_csv(doc: &LabelsDoc) -> Result<Vec<u8>, csv::Error> {
    let mut out = LabelsCsvWriter::new(Vec::new())?;
    for exit in &doc.exits {
        out.exit(exit)?;
    }
    out.end()
}

/// Writes the labels CSV an exit at a time: the header line first, then a line per
/// [`exit`](Self::exit).
#[derive(Debug)]
pub struct LabelsCsvWriter<W: std::io::Write> {
    out: csv::Writer<W>,
}

impl<W: std::io::Write> LabelsCsvWriter<W> {
    /// Writes the header line.
    ///
    /// # Errors
    /// Writing fails.
    pub fn new(out: W) -> Result<Self, csv::Error> {
        // RFC 4180 ends records with CRLF; the crate's default is LF.
        let mut out = csv::WriterBuilder::new()
            .terminator(csv::Terminator::CRLF)
            .from_writer(out);
        out.write_record(CSV_COLUMNS)?;
        Ok(Self { out })
    }

    /// Writes an exit's line.
    ///
    /// # Errors
    /// Writing fails.
    pub fn exit(&mut self, exit: &ExitLabel) -> Result<(), csv::Error> {
        self.out.write_record(row(exit).map(inert))
    }

    /// Flushes the lines written; hands the writer back.
    ///
    /// # Errors
    /// Writing fails.
    pub fn end(self) -> Result<W, csv::Error> {
        self.out
            .into_inner()
            .map_err(|error| error.into_error().into())
    }
}

/// One exit's cells, in [`CSV_COLUMNS`] order.
fn row(exit: &ExitLabel) -> [String; 18] {
    let attempts =
        u64::from(exit.samples) + exit.errors.values().map(|&n| u64::from(n)).sum::<u64>();
    #[allow(clippy::cast_precision_loss)]
    let success_rate = if attempts > 0 {
        format!("{:.3}", exit.samples as f64 / attempts as f64)
    } else {
        String::new()
    };
    let number = |ms: Option<u64>| ms.map(|ms| ms.to_string()).unwrap_or_default();
    // The newest sample's place (`audit --geoip`); empty cells without it.
    let place = exit.geo.as_ref().map(|geo| &geo.newest);
    // The round-trip gap; empty cells when no sample measured it.
    let round_trip = exit.latency.round_trip.as_ref();
    [
        exit.name.clone(),
        exit.url.clone(),
        exit.route.to_string(),
        exit.route_reasons.join("; "),
        exit.state.to_string(),
        exit.bucket.map(|b| b.to_string()).unwrap_or_default(),
        exit.egress_ips.join(" "),
        place.and_then(|p| p.country.clone()).unwrap_or_default(),
        number(place.and_then(|p| p.asn).map(u64::from)),
        place
            .and_then(|p| p.organization.clone())
            .unwrap_or_default(),
        success_rate,
        number(exit.latency.p50_ms),
        number(exit.latency.p95_ms),
        number(round_trip.map(|rt| u64::from(rt.gap_min_us))),
        number(round_trip.map(|rt| u64::from(rt.excess_gap_us))),
        round_trip.map_or_else(String::new, |rt| rt.verdict.as_str().to_owned()),
        round_trip.map_or_else(String::new, |rt| rt.moved.to_string()),
        exit.last_probe_at.clone().unwrap_or_default(),
    ]
}

/// `cell`, with a `'` before it when a spreadsheet would read it as a formula.
fn inert(mut cell: String) -> String {
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        cell.insert(0, '\'');
    }
    cell
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_cells_are_made_text_and_others_left_alone() {
        for (cell, shown) in [
            ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"),
            ("+1", "'+1"),
            ("-2", "'-2"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\tx", "'\tx"),
            ("\rx", "'\rx"),
            ("plain", "plain"),
            ("a=b", "a=b"),
            ("", ""),
        ] {
            assert_eq!(inert(cell.to_owned()), shown, "{cell:?}");
        }
    }
}
