//! `exitvoice dashboard`: the exits dashboard over an auditor's database (`exitvoice_pages::
//! dashboard`), on plain HTTP behind a token. Keep it on loopback or a private network, or put a
//! TLS-terminating reverse proxy in front: the token travels in every request.

use std::net::SocketAddr;
use std::process::ExitCode;

use super::database::DatabaseArg;
use anyhow::{bail, Context};
use exitvoice_pages::dashboard::{self, DashboardToken, MIN_TOKEN_CHARS};

/// Flags of `exitvoice dashboard`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The database `exitvoice audit` wrote (read only; a SQLite file must exist).
    #[command(flatten)]
    database: DatabaseArg,
    /// Where to listen (plain HTTP).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8480")]
    listen: SocketAddr,
    /// The token that opens the dashboard: a bearer token, or the password of Basic auth with
    /// any user name. Never logged; prefer the environment variable, which keeps it out of `ps`.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "EXITVOICE_DASHBOARD_TOKEN",
        hide_env_values = true
    )]
    dashboard_token: String,
    /// A MaxMind DB file, as `audit --geoip` takes (repeat for several): exits whose labels
    /// have no places (audited without `--geoip`) are shown placed by their egress addresses,
    /// looked up when the page is drawn. A replaced file is read again.
    #[arg(long, value_name = "FILE")]
    geoip: Vec<std::path::PathBuf>,
}

/// Runs `exitvoice dashboard` until interrupted.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(token) = DashboardToken::new(args.dashboard_token) else {
        bail!(
            "--dashboard-token must be at least {MIN_TOKEN_CHARS} characters: it is the \
             dashboard's only lock (e.g. `openssl rand -hex 16`)"
        );
    };
    let database = args.database.parse()?;
    if let Some(path) = database.sqlite_path().filter(|path| !path.is_file()) {
        bail!(
            "{}: no such database (run `exitvoice audit --database {}` first)",
            path.display(),
            path.display()
        );
    }
    let place = super::shared::open_geo(&args.geoip)?.map(|geo| -> dashboard::Placer {
        std::sync::Arc::new(move |doc| {
            exitvoice_auditor::pool::place_unplaced(doc, &geo);
        })
    });
    let store = super::database::open(&database).await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr()?;
    println!("exitvoice dashboard: listening on http://{addr}/exits");
    axum::serve(listener, dashboard::router(store, token, place))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("serving the dashboard")?;
    Ok(ExitCode::SUCCESS)
}
