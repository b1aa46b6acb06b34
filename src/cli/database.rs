//! `--database`, shared by every command that opens the store: a SQLite path (the default,
//! `exitvoice.db`), `sqlite://path`, or `postgres://user:pass@host/db`.
//!
//! The value is taken as text and parsed here, not by clap: clap quotes a refused value in its
//! error, and this one may carry a password. `EXITVOICE_DATABASE_URL` keeps a password out of
//! `ps`; clap's `--help` never shows that variable's value.

use std::fmt;

use anyhow::Context as _;
use exitvoice_broker::redis_leases::RedisUrl;
use exitvoice_store::{Database, Store};

/// The `--database` flag.
#[derive(Clone, clap::Args)]
pub struct DatabaseArg {
    /// The database: a SQLite file (created if missing), `sqlite:///path`, or
    /// `postgres://user:pass@host:port/db` for a fleet sharing one PostgreSQL database. Prefer
    /// the environment variable for a password: it keeps it out of `ps`.
    #[arg(
        long = "database",
        visible_alias = "db",
        value_name = "FILE|URL",
        env = "EXITVOICE_DATABASE_URL",
        hide_env_values = true,
        default_value = "exitvoice.db"
    )]
    database: String,
}

impl DatabaseArg {
    /// The database named.
    ///
    /// # Errors
    /// When the value is not a path or a URL of a supported engine; the message never quotes a
    /// `postgres://` value.
    pub fn parse(&self) -> anyhow::Result<Database> {
        parse(&self.database)
    }

    /// Opens the store, creating a SQLite file if missing.
    ///
    /// # Errors
    /// When the value does not parse or the database cannot be opened.
    pub async fn open(&self) -> anyhow::Result<Store> {
        open(&self.parse()?).await
    }
}

/// Parses one database value (`--database`, `--echo-db`).
///
/// # Errors
/// As [`DatabaseArg::parse`].
pub fn parse(value: &str) -> anyhow::Result<Database> {
    value.parse().context("--database")
}

/// Opens `database`; an error names it with its password redacted.
///
/// # Errors
/// When it cannot be opened or migrated.
pub async fn open(database: &Database) -> anyhow::Result<Store> {
    Store::connect(database)
        .await
        .with_context(|| format!("opening {database}"))
}

/// Another database option's value (`broker --store`), kept as text like `--database`'s, so
/// that clap never quotes it in an error, and never printed with its password.
#[derive(Clone)]
pub struct DatabaseText(String);

impl DatabaseText {
    /// The value as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for DatabaseText {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl fmt::Debug for DatabaseText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if RedisUrl::names_redis(&self.0) {
            return match self.0.parse::<RedisUrl>() {
                Ok(url) => write!(f, "{url:?}"),
                Err(_) => f.write_str("<invalid>"),
            };
        }
        match parse(&self.0) {
            Ok(database) => write!(f, "{database:?}"),
            Err(_) => f.write_str("<invalid>"),
        }
    }
}

/// A database or store value as it may be shown: its password as `***`, `<invalid>` when it
/// does not parse (the value is never quoted).
pub fn shown(value: &str) -> String {
    let shown = if RedisUrl::names_redis(value) {
        value.parse::<RedisUrl>().ok().map(|url| url.to_string())
    } else {
        parse(value).ok().map(|database| database.to_string())
    };
    shown.unwrap_or_else(|| "<invalid>".to_owned())
}

impl fmt::Debug for DatabaseArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parse() {
            Ok(database) => write!(f, "{database:?}"),
            Err(_) => f.write_str("<unparsed database>"),
        }
    }
}
