//! `exitvoice`: the command line that wires the echo server, the auditor and the schema together.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod cli;

/// What `exitvoice --version` prints after the name: the version and the commit built from
/// (build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("EXITVOICE_COMMIT"),
    ")"
);

/// See what your proxy exits do to your client's TLS and HTTP/2 identity.
#[derive(Debug, Parser)]
#[command(name = "exitvoice", version = VERSION, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the echo server.
    Serve(Box<cli::serve::Args>),
    /// Analyse ClientHellos, HTTP/2 or HTTP/1 prefixes, or pcap files, and print JSON.
    Inspect(cli::inspect::Args),
    /// Probe the configured exits and label them.
    Audit(Box<cli::audit::Args>),
    /// Print the current labels as JSON.
    Labels(cli::labels::LabelsArgs),
    /// Show which voice fields differ between two observations (capture files, probe ids or
    /// observation ids).
    Diff(cli::diff::Args),
    /// Serve the exits dashboard of an auditor's database, behind a token.
    Dashboard(cli::dashboard::Args),
    /// Lease exits to workers: one holder at a time, fenced, driven by the labels.
    Broker(Box<cli::broker::Args>),
    /// Acquire, renew or release a lease from a broker (for shell scripts).
    Lease(cli::lease::Args),
    /// Check a configuration file (`--config FILE` of `serve`, `audit` and `broker`).
    Config(cli::config::Args),
}

fn main() -> ExitCode {
    // Flags, then `EXITVOICE_*` variables, then the `--config` file, then defaults.
    let public = cli::config::with_env(Cli::command());
    // `generate` is added here, not in `Command`, so that what it writes about (`public`) does
    // not offer it.
    let command = public.clone().subcommand(cli::generate::command());
    let argv = match cli::config::argv_with_file(&command, std::env::args_os().collect()) {
        Ok(argv) => argv,
        Err(error) => {
            eprintln!("exitvoice: {error:#}");
            return ExitCode::from(2);
        }
    };
    let matches = command.clone().get_matches_from(argv);
    if let Some((cli::generate::NAME, matches)) = matches.subcommand() {
        return cli::generate::run(matches, &public).unwrap_or_else(|error| {
            eprintln!("exitvoice: {error:#}");
            ExitCode::FAILURE
        });
    }
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("exitvoice: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => cli::serve::run(*args).await,
            Command::Inspect(args) => cli::inspect::run(args).await,
            Command::Audit(args) => cli::audit::run(*args).await,
            Command::Labels(args) => cli::labels::run(args).await,
            Command::Diff(args) => cli::diff::run(args).await,
            Command::Dashboard(args) => cli::dashboard::run(args).await,
            Command::Broker(args) => cli::broker::run(*args).await,
            Command::Lease(args) => cli::lease::run(args).await,
            Command::Config(args) => cli::config::run(args, &command),
        }
    });
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("exitvoice: {error:#}");
            ExitCode::FAILURE
        }
    }
}
