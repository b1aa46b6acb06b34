//! `exitvoice serve`.

use std::process::ExitCode;

/// Flags of `exitvoice serve`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `exitvoice serve`.
pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`serve` is not implemented yet")
}
