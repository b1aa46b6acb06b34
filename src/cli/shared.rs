//! What several subcommands share: duration flags, the log set-up, the `--geoip` databases,
//! and files written whole.

use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use exitvoice_geo::{GeoIp, Refreshed};

/// `250ms`, `10s`, `2m`, `1h`, or a bare number of seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    exitvoice_exits::duration::parse(text, true).map_err(|e| e.to_string())
}

/// Logs to stderr: human-readable on a TTY (warnings only), written through the progress bar
/// so that it is drawn again below them; JSON lines otherwise.
pub(crate) fn init_logs() {
    let filter = |default| {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default))
    };
    let builder = tracing_subscriber::fmt();
    let _ = if std::io::stderr().is_terminal() {
        // On a TTY the progress bar replaces the per-probe info logs.
        builder
            .with_env_filter(filter("warn"))
            .with_writer(|| super::progress::ThroughBars)
            .try_init()
    } else {
        builder
            .with_env_filter(filter("info"))
            .with_writer(std::io::stderr)
            .json()
            .try_init()
    };
}

/// The `--geoip` databases (a file that does not read is an error naming it), read again every
/// minute when they change.
pub(crate) fn open_geo(paths: &[PathBuf]) -> anyhow::Result<Option<Arc<GeoIp>>> {
    if paths.is_empty() {
        return Ok(None);
    }
    let geo = Arc::new(GeoIp::open(paths)?);
    exitvoice_geo::spawn_refresh(&geo, Duration::from_secs(60), |outcome| match outcome {
        Refreshed::Reloaded(source) => {
            tracing::info!(file = %source.file, build_date = %source.build_date, "geo database read again");
        }
        Refreshed::Failed(error) => {
            tracing::warn!(%error, "geo database changed but did not read; its last good contents stay");
        }
    });
    Ok(Some(geo))
}

/// A file written beside its path and renamed into place once whole: a reader never sees
/// half a file.
pub(crate) struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
}

impl AtomicFile {
    /// Opens `path`'s temporary sibling for writing.
    pub(crate) fn create(path: &std::path::Path) -> anyhow::Result<Self> {
        let tmp = path.with_extension("tmp");
        let file =
            std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
        Ok(Self {
            path: path.to_owned(),
            tmp,
            out: std::io::BufWriter::new(file),
        })
    }

    /// Renames the whole file into place.
    pub(crate) fn commit(mut self) -> anyhow::Result<()> {
        self.out
            .flush()
            .with_context(|| format!("writing {}", self.tmp.display()))?;
        std::fs::rename(&self.tmp, &self.path)
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

impl std::io::Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("1d").is_err());
    }
}
