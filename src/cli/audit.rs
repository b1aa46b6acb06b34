//! `exitvoice audit` and `exitvoice labels`.

use std::process::ExitCode;

/// Flags of `exitvoice audit`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Flags of `exitvoice labels`.
#[derive(Debug, clap::Args)]
pub struct LabelsArgs {}

/// Runs `exitvoice audit`.
pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`audit` is not implemented yet")
}

/// Runs `exitvoice labels`.
pub async fn labels(_args: LabelsArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`labels` is not implemented yet")
}
