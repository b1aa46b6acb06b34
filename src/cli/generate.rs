//! `exitvoice generate` (hidden): the man pages and the shell completions, written from the
//! same clap definitions the binary parses its command line with, so they cannot drift from
//! it. scripts/package.sh runs it on the binary it packages.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{ArgMatches, Args as _, Command, FromArgMatches};
use clap_complete::Shell;

/// The subcommand's name.
pub const NAME: &str = "generate";

#[derive(Debug, clap::Args)]
struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// Write a roff man page for the command and each subcommand (`exitvoice.1`,
    /// `exitvoice-serve.1`, `exitvoice-lease-acquire.1`, …) into DIR.
    Man {
        /// The folder to write into (it must exist).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Print the completion script of SHELL.
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
}

/// The hidden `generate` subcommand, to add to the command line's parser.
pub fn command() -> Command {
    Args::augment_args(
        Command::new(NAME)
            .about("Write the man pages or a shell's completions (for packaging)")
            .hide(true),
    )
}

/// Runs `exitvoice generate` on `public`: the command line as users see it (with its
/// environment variables, so the pages name them too), without this subcommand.
///
/// # Errors
/// When the arguments do not parse, or a page or the script cannot be written.
pub fn run(matches: &ArgMatches, public: &Command) -> anyhow::Result<ExitCode> {
    let args = Args::from_arg_matches(matches)?;
    match args.what {
        What::Man { out } => {
            // Every subcommand that is not hidden gets a page of its own, named by its path.
            clap_mangen::generate_to(public.clone(), &out)
                .with_context(|| format!("writing man pages into {}", out.display()))?;
        }
        What::Completions { shell } => {
            let mut script = Vec::new();
            let name = public.get_name().to_owned();
            clap_complete::generate(shell, &mut public.clone(), name, &mut script);
            std::io::stdout()
                .write_all(&script)
                .context("writing the completion script")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
