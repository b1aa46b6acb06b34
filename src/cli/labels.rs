//! `exitvoice labels`: the latest labels snapshot of an auditor's database, as JSON or CSV,
//! optionally placed by `--geoip` databases.

use std::path::PathBuf;
use std::process::ExitCode;

use super::database::DatabaseArg;
use super::shared::AtomicFile;
use anyhow::Context;
use exitvoice_auditor::pool::{place_label, Placing};
use exitvoice_geo::GeoIp;
use exitvoice_schema::LabelsJsonWriter;

/// Flags of `exitvoice labels`.
#[derive(Debug, clap::Args)]
pub struct LabelsArgs {
    /// The database `audit` wrote.
    #[command(flatten)]
    database: DatabaseArg,
    /// Write the labels here instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// `json` (the snapshot as stored), or `csv`: one row per exit (name, redacted url, route,
    /// reasons, state, bucket, egress, success rate, p50/p95 latency, last probe), RFC 4180,
    /// with formula-like cells made text by a leading `'`.
    #[arg(long, value_enum, default_value_t = LabelsFormat::Json)]
    format: LabelsFormat,
    /// A MaxMind DB file, as `audit --geoip` takes (repeat for several): exits whose labels
    /// have no places (audited without `--geoip`) are placed by their egress addresses now,
    /// and the pool counted by country and network. Routes and `geo_changed` stay the audit's.
    #[arg(long, value_name = "FILE")]
    geoip: Vec<PathBuf>,
}

/// How `labels` prints the snapshot.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum LabelsFormat {
    Json,
    Csv,
}

/// Runs `exitvoice labels`.
pub async fn run(args: LabelsArgs) -> anyhow::Result<ExitCode> {
    // A database that does not read stops the command before the store is opened.
    let geo = (!args.geoip.is_empty())
        .then(|| GeoIp::open(&args.geoip))
        .transpose()?;
    let store = args.database.open().await?;
    let id = store
        .latest_labels_id()
        .await?
        .context("no labels yet: run `exitvoice audit` first")?;
    let mut reader = store.read_labels(id).await?.context(SNAPSHOT_GONE)?;
    let mut header = reader.header().clone();
    // The pool's places are counted again over every exit before the first one is written.
    if let Some(geo) = &geo {
        let mut placing = Placing::default();
        while let Some(mut page) = reader.next_page().await? {
            for label in &mut page {
                placing.place(label, geo);
            }
        }
        placing.recount(header.pool.as_mut(), geo);
    }
    let mut file = args.out.as_deref().map(AtomicFile::create).transpose()?;
    let mut stdout = std::io::BufWriter::new(std::io::stdout());
    let out: &mut dyn std::io::Write = match &mut file {
        Some(file) => file,
        None => &mut stdout,
    };
    match export(&store, id, &header, geo.as_ref(), args.format, out).await {
        Ok(()) => {}
        // A reader that stops early (`| head`) is not an error of ours.
        Err(error) if file.is_none() && broken_pipe(&error) => {}
        Err(error) => return Err(error),
    }
    if let Some(file) = file {
        file.commit()?;
    }
    Ok(ExitCode::SUCCESS)
}

const SNAPSHOT_GONE: &str = "the labels snapshot left the database while it was read";

/// Writes snapshot `id` as `format` with `header` (its pool counted again under `--geoip`), a
/// page of exits at a time.
async fn export(
    store: &exitvoice_store::Store,
    id: i64,
    header: &exitvoice_schema::LabelsDoc,
    geo: Option<&GeoIp>,
    format: LabelsFormat,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    enum Writer<'o> {
        Json(LabelsJsonWriter<&'o mut dyn std::io::Write>),
        Csv(Box<exitvoice_schema::LabelsCsvWriter<&'o mut dyn std::io::Write>>),
    }
    let mut reader = store.read_labels(id).await?.context(SNAPSHOT_GONE)?;
    let mut writer = match format {
        LabelsFormat::Json => Writer::Json(LabelsJsonWriter::begin(out, header)?),
        LabelsFormat::Csv => Writer::Csv(Box::new(exitvoice_schema::LabelsCsvWriter::new(out)?)),
    };
    while let Some(mut page) = reader.next_page().await? {
        for label in &mut page {
            if let Some(geo) = geo {
                place_label(label, geo);
            }
            match &mut writer {
                Writer::Json(json) => json.exit(label)?,
                Writer::Csv(csv) => csv.exit(label)?,
            }
        }
    }
    let out = match writer {
        Writer::Json(json) => json.end()?,
        Writer::Csv(csv) => csv.end()?,
    };
    Ok(out.flush()?)
}

/// Whether `error` is a write to a reader that went away.
fn broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
