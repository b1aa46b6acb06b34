//! `exitvoice inspect`.

use std::process::ExitCode;

/// Flags of `exitvoice inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `exitvoice inspect`.
pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`inspect` is not implemented yet")
}
