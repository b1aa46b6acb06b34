//! One configuration for `serve`, `audit` and `broker`: every option is a flag, an
//! `EXITVOICE_<NAME>` environment variable (`--per-ip-rate` is `EXITVOICE_PER_IP_RATE`) and a key
//! of the `[serve]`, `[audit]` or `[broker]` table of the TOML file given with `--config FILE`
//! (keys are the flags' names: `per-ip-rate = 100`, `stateless-per-exit = 2`). A flag beats the environment, which beats the file, which beats the
//! default.
//!
//! The file is merged under clap, not beside it: each value is checked by its option's own
//! value parser (an error names the key and its line), then handed to clap as the flag it
//! stands for, unless a flag or a variable already set that option. So there is one parser,
//! one set of defaults and one help text, and the environment's precedence is clap's own.
//! `exitvoice config check FILE` prints the effective configuration, secrets redacted.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use toml_edit::{Document, Item, Table, Value};

/// Prefix of every option's environment variable.
const ENV_PREFIX: &str = "EXITVOICE_";
/// The subcommands the file configures, one table each.
const SECTIONS: [&str; 3] = ["serve", "audit", "broker"];
/// Options whose values are never printed (`config check`, `--help`).
const SECRETS: [&str; 2] = ["api-token", "broker-token"];
/// The options naming a database, whose URL may carry a password.
const DATABASES: [&str; 2] = ["database", "store"];
/// The option naming the file itself: not a key of it.
const CONFIG: &str = "config";

/// `exitvoice config`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ConfigCommand {
    /// Check FILE and print the effective configuration of `serve`, `audit` and `broker` (flags aside:
    /// environment over file over defaults), secrets redacted.
    Check {
        /// The TOML file.
        file: PathBuf,
    },
}

/// Gives every option of `serve`, `audit` and `broker` its `EXITVOICE_<NAME>` variable.
pub fn with_env(command: Command) -> Command {
    SECTIONS.iter().fold(command, |command, section| {
        command.mut_subcommand(section, |sub| {
            sub.mut_args(|arg| {
                // An option with a variable of its own (`EXITVOICE_DATABASE_URL`) keeps it.
                if arg.get_env().is_some() {
                    return arg;
                }
                let name = format!("{ENV_PREFIX}{}", arg.get_id().as_str().to_ascii_uppercase());
                let secret = arg.get_long().is_some_and(|long| SECRETS.contains(&long));
                arg.env(name).hide_env_values(secret)
            })
        })
    })
}

/// `argv` plus, for `serve`, `audit` and `broker` with `--config FILE` (or `EXITVOICE_CONFIG`), a flag for
/// every key of the file's table that neither a flag nor a variable set.
///
/// # Errors
/// When the file cannot be read, is not TOML, has an unknown key, or a value its option refuses.
pub fn argv_with_file(command: &Command, argv: Vec<OsString>) -> anyhow::Result<Vec<OsString>> {
    // A lenient first pass finds the subcommand, the file and what is already set; the real
    // parse (and its errors) comes after the merge.
    let Ok(probe) = command
        .clone()
        .ignore_errors(true)
        .try_get_matches_from(&argv)
    else {
        return Ok(argv);
    };
    let Some((section, matches)) = probe.subcommand() else {
        return Ok(argv);
    };
    if !SECTIONS.contains(&section) {
        return Ok(argv);
    }
    let Some(path) = matches.get_one::<PathBuf>(CONFIG) else {
        return Ok(argv);
    };
    let file = ConfigFile::read(path)?;
    let set_elsewhere = |arg: &Arg| {
        matches!(
            matches.value_source(arg.get_id().as_str()),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        )
    };
    // Every table is checked, not only this subcommand's: a mistake in [audit] is reported
    // when the file is first used, whoever uses it.
    for other in SECTIONS.iter().filter(|other| **other != section) {
        file.args(command, other, |_| false)?;
    }
    let mut argv = argv;
    argv.extend(file.args(command, section, set_elsewhere)?);
    Ok(argv)
}

/// Runs `exitvoice config`.
///
/// # Errors
/// When the file is invalid, or a section it configures is incomplete (`audit` without
/// `exits`).
pub fn run(args: Args, command: &Command) -> anyhow::Result<ExitCode> {
    let ConfigCommand::Check { file } = args.command;
    let parsed = ConfigFile::read(&file)?;
    let mut out = format!(
        "# {}: valid; effective configuration (flags aside)\n",
        file.display()
    );
    for section in SECTIONS {
        if parsed.table(section)?.is_none() {
            continue;
        }
        let argv = ["exitvoice", section, "--config"]
            .into_iter()
            .map(OsString::from)
            .chain([file.clone().into_os_string()])
            .collect();
        let argv = argv_with_file(command, argv)?;
        let matches = command
            .clone()
            .try_get_matches_from(argv)
            .map_err(|error| anyhow!("[{section}]: {}", clap_message(&error)))?;
        let (_, matches) = matches.subcommand().context("the section's subcommand")?;
        let sub = command
            .find_subcommand(section)
            .context("the section's subcommand")?;
        out.push_str(&format!("\n[{section}]\n"));
        for arg in sub.get_arguments() {
            if let Some(line) = effective_line(arg, matches) {
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// One `key = value  # source` line of `config check`, or `None` for options that are not
/// configuration (`--help`, `--config`).
fn effective_line(arg: &Arg, matches: &ArgMatches) -> Option<String> {
    let key = arg.get_long().filter(|long| *long != CONFIG)?;
    let id = arg.get_id().as_str();
    let source = match matches.value_source(id) {
        Some(ValueSource::DefaultValue) => "default".to_owned(),
        Some(ValueSource::EnvVariable) => arg
            .get_env()
            .map_or_else(String::new, |env| env.to_string_lossy().into_owned()),
        Some(ValueSource::CommandLine) => "file".to_owned(),
        _ => return Some(format!("# {key}: not set")),
    };
    let values: Vec<String> = matches
        .get_raw(id)
        .map(|raw| raw.map(|v| v.to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    let value = if SECRETS.contains(&key) {
        "\"<redacted>\"".to_owned()
    } else if DATABASES.contains(&key) {
        // A PostgreSQL or Redis URL's password is shown as `***`.
        quoted(&values.first().map_or_else(
            || "<invalid>".to_owned(),
            |value| super::database::shown(value),
        ))
    } else if !arg.get_action().takes_values() {
        // A switch (`--once`): present or not.
        values.first().map_or("false", |v| v.as_str()).to_owned()
    } else if matches!(arg.get_action(), ArgAction::Append) {
        let quoted: Vec<String> = values.iter().map(|v| quoted(v)).collect();
        format!("[{}]", quoted.join(", "))
    } else {
        values.first().map_or_else(String::new, |v| quoted(v))
    };
    Some(format!("{key} = {value}  # {source}"))
}

/// A value as TOML: a whole number bare, anything else a basic string (JSON's escapes are
/// TOML's).
fn quoted(text: &str) -> String {
    if text.parse::<i64>().is_ok() {
        return text.to_owned();
    }
    serde_json::to_string(text).unwrap_or_else(|_| String::from("\"\""))
}

/// The text of a clap error without its `error: ` prefix and usage lines.
fn clap_message(error: &clap::Error) -> String {
    let text = error.to_string();
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_owned()
}

/// A parsed configuration file, its spans kept to name lines in errors.
struct ConfigFile {
    path: PathBuf,
    doc: Document<String>,
}

impl ConfigFile {
    fn read(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let doc = Document::parse(text)
            .map_err(|error| anyhow!("{}: not TOML: {error}", path.display()))?;
        let file = Self {
            path: path.to_owned(),
            doc,
        };
        for (key, _) in file.doc.as_table().iter() {
            if !SECTIONS.contains(&key) {
                bail!(
                    "{}: unknown key `{key}` (the file has a [serve] and an [audit] table)",
                    file.at(file.doc.as_table(), key)
                );
            }
        }
        Ok(file)
    }

    /// `FILE line N` for `key` of `table`.
    fn at(&self, table: &Table, key: &str) -> String {
        let line = table.key(key).and_then(toml_edit::Key::span).map(|span| {
            let before = self.doc.raw().get(..span.start).unwrap_or_default();
            before.matches('\n').count() + 1
        });
        match line {
            Some(line) => format!("{} line {line}", self.path.display()),
            None => self.path.display().to_string(),
        }
    }

    /// The table of `section`, if the file has one.
    fn table(&self, section: &str) -> anyhow::Result<Option<&Table>> {
        match self.doc.as_table().get(section) {
            None => Ok(None),
            Some(Item::Table(table)) => Ok(Some(table)),
            Some(_) => bail!(
                "{}: `{section}` must be a table ([{section}])",
                self.at(self.doc.as_table(), section)
            ),
        }
    }

    /// The flags the table of `section` stands for, each value checked by its option's parser;
    /// options `set_elsewhere` keep their flag's or variable's value.
    fn args(
        &self,
        command: &Command,
        section: &str,
        set_elsewhere: impl Fn(&Arg) -> bool,
    ) -> anyhow::Result<Vec<OsString>> {
        let Some(table) = self.table(section)? else {
            return Ok(Vec::new());
        };
        let mut command = command.clone();
        command.build();
        let sub = command
            .find_subcommand(section)
            .context("the section's subcommand")?;
        let mut args = Vec::new();
        for (key, item) in table.iter() {
            let at = || self.at(table, key);
            let arg = sub
                .get_arguments()
                .find(|arg| arg.get_long() == Some(key) && key != CONFIG)
                .ok_or_else(|| anyhow!("{}: unknown key `{key}` in [{section}]", at()))?;
            let flag = OsString::from(format!("--{key}"));
            let value = item
                .as_value()
                .ok_or_else(|| anyhow!("{}: `{key}` must be a value, not a table", at()))?;
            if !arg.get_action().takes_values() {
                let on = value
                    .as_bool()
                    .ok_or_else(|| anyhow!("{}: `{key}` must be true or false", at()))?;
                if on && !set_elsewhere(arg) {
                    args.push(flag);
                }
                continue;
            }
            let values = match value {
                Value::Array(array) if matches!(arg.get_action(), ArgAction::Append) => {
                    array.iter().map(scalar).collect::<Option<Vec<_>>>()
                }
                Value::Array(_) => bail!("{}: `{key}` takes one value, not a list", at()),
                scalar_value => scalar(scalar_value).map(|v| vec![v]),
            }
            .ok_or_else(|| anyhow!("{}: `{key}` must be a string, number or boolean", at()))?;
            for text in &values {
                check_value(arg, key, text)
                    .map_err(|error| anyhow!("{}: `{key}`: {}", at(), clap_message(&error)))?;
            }
            if set_elsewhere(arg) {
                continue;
            }
            for text in values {
                args.push(flag.clone());
                args.push(text.into());
            }
        }
        Ok(args)
    }
}

/// Runs `text` through the value parser of `arg` (`--key`), alone: what clap would say of
/// `--key text` on the command line.
fn check_value(arg: &Arg, key: &str, text: &str) -> Result<(), clap::Error> {
    let mut alone = Arg::new(arg.get_id().clone())
        .long(key.to_owned())
        .value_parser(arg.get_value_parser().clone())
        .action(ArgAction::Set);
    if let Some(names) = arg.get_value_names() {
        alone = alone.value_names(names.to_vec());
    }
    Command::new("exitvoice")
        .no_binary_name(true)
        .arg(alone)
        .try_get_matches_from([OsString::from(format!("--{key}")), OsString::from(text)])
        .map(drop)
}

/// A TOML scalar as the text a flag would carry (`100`, `"10s"` → `10s`, `true`).
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.value().clone()),
        Value::Integer(n) => Some(n.value().to_string()),
        Value::Float(x) => Some(x.value().to_string()),
        Value::Boolean(b) => Some(b.value().to_string()),
        Value::Datetime(_) | Value::Array(_) | Value::InlineTable(_) => None,
    }
}
