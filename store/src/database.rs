//! Which database a command uses: a SQLite file (the embedded default) or a PostgreSQL server.
//!
//! A PostgreSQL URL may carry a password: it is kept only for connecting, and everything that
//! prints a [`Database`] (`Display`, `Debug`, errors) shows `***` in its place.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A database named by `--database`: a plain path, `sqlite://path` (`sqlite:///abs/path`), or
/// `postgres://user:pass@host:port/db` (`postgresql://` too).
#[derive(Clone, PartialEq, Eq)]
pub enum Database {
    /// A SQLite file, created if missing.
    Sqlite(PathBuf),
    /// A PostgreSQL server.
    Postgres(PostgresUrl),
}

/// A PostgreSQL URL whose password never leaves this type but to connect.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl(String);

/// Why a `--database` value is not a database.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DatabaseUrlError {
    /// Empty.
    #[error("the database is empty: give a SQLite path or a postgres:// URL")]
    Empty,
    /// A URL scheme this build does not speak.
    #[error("unknown database scheme {0:?}: use a SQLite path, sqlite:// or postgres://")]
    UnknownScheme(String),
    /// A `postgres://` URL that does not parse.
    #[error("the PostgreSQL URL does not parse ({0})")]
    BadUrl(String),
}

impl Database {
    /// The SQLite file at `path`.
    pub fn sqlite(path: impl Into<PathBuf>) -> Self {
        Self::Sqlite(path.into())
    }

    /// Where files that belong with this database are kept (the echo's generated certificate,
    /// its ACME cache): beside the SQLite file, or `exitvoice.pg` in the working directory for
    /// PostgreSQL, which has no file of its own.
    pub fn state_base(&self) -> PathBuf {
        match self {
            Self::Sqlite(path) => path.clone(),
            Self::Postgres(_) => PathBuf::from("exitvoice.pg"),
        }
    }

    /// The SQLite file, if this is one.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match self {
            Self::Sqlite(path) => Some(path),
            Self::Postgres(_) => None,
        }
    }
}

impl PostgresUrl {
    /// The URL with its password, for the driver only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// The URL with the password (if any) replaced by `***`.
    fn redacted(&self) -> String {
        redacted(&self.0).unwrap_or_else(|| "postgres://***".to_owned())
    }
}

/// `url` with its password, in the user part or a `password=` query parameter, replaced by
/// `***`; `None` when it does not parse (show nothing of it then). For every URL the commands
/// print that may carry a secret (PostgreSQL, Redis).
pub fn redacted(url: &str) -> Option<String> {
    let mut url = url::Url::parse(url).ok()?;
    if url.password().is_some() {
        // Only fails for URLs that cannot have a password, which one with a password is not.
        let _ = url.set_password(Some("***"));
    }
    if url.query_pairs().any(|(k, _)| k == "password") {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| {
                let v = if k == "password" { "***".into() } else { v };
                (k.into_owned(), v.into_owned())
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    Some(url.to_string())
}

impl FromStr for Database {
    type Err = DatabaseUrlError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        if value.is_empty() {
            return Err(DatabaseUrlError::Empty);
        }
        if value.starts_with("postgres://") || value.starts_with("postgresql://") {
            // Checked here so that a typo fails at start, not at the first connection. The
            // parser's message never quotes the URL.
            url::Url::parse(value).map_err(|e| DatabaseUrlError::BadUrl(e.to_string()))?;
            return Ok(Self::Postgres(PostgresUrl(value.to_owned())));
        }
        if let Some(path) = value.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            return match path {
                "" => Err(DatabaseUrlError::Empty),
                path => Ok(Self::Sqlite(PathBuf::from(path))),
            };
        }
        // `C:\…` aside (not a platform of ours), a scheme is letters before `://`.
        if let Some((scheme, _)) = value.split_once("://") {
            if scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+')
            {
                return Err(DatabaseUrlError::UnknownScheme(scheme.to_owned()));
            }
        }
        Ok(Self::Sqlite(PathBuf::from(value)))
    }
}

impl fmt::Display for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "{}", path.display()),
            Self::Postgres(url) => f.write_str(&url.redacted()),
        }
    }
}

impl fmt::Debug for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            Self::Postgres(url) => f.debug_tuple("Postgres").field(&url.redacted()).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_sqlite_urls_name_a_file() {
        for (given, path) in [
            ("exitvoice.db", "exitvoice.db"),
            ("/var/lib/exitvoice/e.db", "/var/lib/exitvoice/e.db"),
            ("sqlite:///var/lib/e.db", "/var/lib/e.db"),
            ("sqlite://rel.db", "rel.db"),
            ("sqlite:rel.db", "rel.db"),
        ] {
            assert_eq!(
                given.parse::<Database>(),
                Ok(Database::sqlite(path)),
                "{given}"
            );
        }
    }

    #[test]
    fn postgres_passwords_are_never_printed() {
        let db: Database = "postgres://fleet:s3cret-pw@db.internal:5433/exitvoice?sslmode=require"
            .parse()
            .expect("parses");
        for shown in [db.to_string(), format!("{db:?}")] {
            assert!(!shown.contains("s3cret-pw"), "{shown}");
            assert!(
                shown.contains("fleet:***@db.internal:5433/exitvoice"),
                "{shown}"
            );
        }
        let in_query: Database = "postgresql://db/x?user=a&password=hunter2"
            .parse()
            .expect("parses");
        assert!(!in_query.to_string().contains("hunter2"), "{in_query}");
        assert_eq!(db.state_base(), PathBuf::from("exitvoice.pg"));
    }

    #[test]
    fn other_schemes_and_empty_values_are_refused() {
        assert_eq!(
            "mysql://a@b/c".parse::<Database>(),
            Err(DatabaseUrlError::UnknownScheme("mysql".to_owned()))
        );
        assert_eq!("".parse::<Database>(), Err(DatabaseUrlError::Empty));
        assert_eq!(
            "sqlite://".parse::<Database>(),
            Err(DatabaseUrlError::Empty)
        );
        let bad = "postgres://u:pw@[::1/x".parse::<Database>();
        assert!(
            matches!(&bad, Err(DatabaseUrlError::BadUrl(m)) if !m.contains("pw")),
            "{bad:?}"
        );
    }
}
