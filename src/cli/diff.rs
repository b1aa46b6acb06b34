//! `exitvoice diff A B`: which voice fields differ between two observations.
//!
//! A and B are each one of:
//! - capture files, analysed as `exitvoice inspect` does: a ClientHello (TLS records or the
//!   handshake message), a client prefix (HTTP/2 or HTTP/1), both joined by a comma
//!   (`conn1.hello.bin,conn1.prefix.bin`, one connection), or a pcap/pcapng capture (its first
//!   connection with a ClientHello or HTTP);
//! - a probe id: the token of a probe in the auditor's database (`--db`), whose echo it kept;
//! - an observation in the echo server's database (`--echo-db`), found by the probe token its
//!   request carried (the id a probe and its observation share).
//!
//! Prints a table (or `--json`: the `changes` list of the labels, the same shape). The exit code
//! follows diff(1): 0 when nothing differs, 1 when something does, 2 on trouble.

use std::path::Path;
use std::process::ExitCode;

use super::database::DatabaseArg;
use anyhow::{bail, Context};
use exitvoice_auditor::changes::{self, VoiceView};
use exitvoice_schema::observation::Summary;
use exitvoice_schema::{
    Alpn, Change, Http1Echo, Http2Echo, ObservationQuery, Spoken, TcpEcho, TlsEcho,
};
use serde_json::Value;

/// Flags of `exitvoice diff`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The first observation: capture file(s), a probe id or an observation id.
    #[arg(value_name = "A")]
    a: String,
    /// The second observation.
    #[arg(value_name = "B")]
    b: String,
    /// The auditor's database, for probe ids.
    #[command(flatten)]
    database: DatabaseArg,
    /// The echo server's database (a path or URL, as --database), for observation ids.
    #[arg(long, value_name = "FILE")]
    echo_db: Option<String>,
    /// Print the changes as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `exitvoice diff`; trouble is reported here, so that it exits 2, not 1.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    match compare(&args).await {
        Ok(code) => Ok(code),
        Err(error) => {
            eprintln!("exitvoice: {error:#}");
            Ok(ExitCode::from(2))
        }
    }
}

async fn compare(args: &Args) -> anyhow::Result<ExitCode> {
    let before = view(&args.a, args).await?;
    let after = view(&args.b, args).await?;
    let changes = changes::between(&before, &after);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&changes)?);
    } else {
        print!("{}", table(&changes));
    }
    Ok(if changes.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The voice of one operand: files when every comma-separated part is one, else an id.
async fn view(operand: &str, args: &Args) -> anyhow::Result<VoiceView> {
    let parts: Vec<&str> = operand.split(',').collect();
    if parts.iter().all(|p| Path::new(p).is_file()) {
        let analysed = super::inspect::connection_of_files(&parts)?;
        return of_inspect(&analysed).with_context(|| operand.to_owned());
    }
    let database = args.database.parse()?;
    // A SQLite file that does not exist is not created for a look-up.
    if database.sqlite_path().is_none_or(Path::is_file) {
        let store = super::database::open(&database).await?;
        if let Some(record) = store.probe_by_token(operand).await? {
            let sample = record
                .sample
                .with_context(|| format!("probe {operand} failed: it has no echo"))?;
            return Ok(VoiceView::of_echo(&sample.echo));
        }
    }
    if let Some(echo_db) = &args.echo_db {
        let store = super::database::open(&super::database::parse(echo_db)?).await?;
        let query = ObservationQuery {
            token: Some(operand.to_owned()),
            limit: 1,
            ..ObservationQuery::default()
        };
        let listed = store
            .observations(&query, exitvoice_protocol::analysis::layers)
            .await?;
        if let Some(stored) = listed.into_iter().next() {
            if let Summary::Request(echo) = stored.observation.summary {
                return Ok(VoiceView::of_echo(&echo));
            }
        }
    }
    bail!("{operand}: not a file, nor a probe id in {database}")
}

/// The voice of `exitvoice inspect`'s JSON for one connection.
fn of_inspect(value: &Value) -> anyhow::Result<VoiceView> {
    fn part<T: serde::de::DeserializeOwned>(value: &Value, key: &str) -> anyhow::Result<Option<T>> {
        match value.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(part) => Ok(Some(
                serde_json::from_value(part.clone()).with_context(|| format!("reading {key}"))?,
            )),
        }
    }
    let tls: Option<TlsEcho> = part(value, "tls")?;
    let alpn = value.get("alpn");
    let text_list = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let alpn = Alpn {
        offered: text_list(alpn.and_then(|a| a.get("offered"))),
        negotiated: alpn
            .and_then(|a| a.get("negotiated"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        spoken: part::<Spoken>(alpn.unwrap_or(&Value::Null), "spoken")?.unwrap_or_default(),
    };
    let http2: Option<Http2Echo> = part(value, "http2")?;
    let http1: Option<Http1Echo> = part(value, "http1")?;
    let tcp: Option<TcpEcho> = part(value, "tcp")?;
    Ok(
        VoiceView::of_parts(tls.as_ref(), &alpn, http2.as_ref(), http1.as_ref())
            .with_tcp(tcp.as_ref()),
    )
}

/// One block per change: what was added, removed or reordered, then both values.
fn table(changes: &[Change]) -> String {
    if changes.is_empty() {
        return "no voice field differs\n".to_owned();
    }
    let mut out = String::new();
    for change in changes {
        let mut what = Vec::new();
        if !change.added.is_empty() {
            what.push(format!("added {}", change.added.join(",")));
        }
        if !change.removed.is_empty() {
            what.push(format!("removed {}", change.removed.join(",")));
        }
        if change.reordered {
            what.push("reordered".to_owned());
        }
        if what.is_empty() {
            what.push("changed".to_owned());
        }
        out.push_str(&format!(
            "{:<6} {:<24} {}\n       before: {}\n       after:  {}\n",
            change.layer,
            change.field,
            what.join("; "),
            change.before,
            change.after
        ));
    }
    out
}
