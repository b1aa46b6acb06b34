//! `exitvoice`: the command line that wires the echo server, the auditor and the schema together.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

/// See what your proxy exits do to your client's TLS and HTTP/2 identity.
#[derive(Debug, Parser)]
#[command(name = "exitvoice", version, about)]
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
    Labels(cli::audit::LabelsArgs),
    /// Show which voice fields differ between two observations (capture files, probe ids or
    /// observation ids).
    Diff(cli::diff::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
            Command::Labels(args) => cli::audit::labels(args).await,
            Command::Diff(args) => cli::diff::run(args).await,
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
