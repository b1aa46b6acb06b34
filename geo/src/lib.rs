//! Country and network of an address from local MaxMind DB files (`--geoip`): GeoLite2/GeoIP2,
//! DB-IP Lite and IPinfo Lite layouts, a country or city database beside an ASN one, or one that
//! carries both. The project ships no database.
//!
//! Each file is read into memory whole (a memory map of a file rewritten in place can fault the
//! process). [`GeoIp::refresh`] reads again each file that changed on disk (replaced by rename,
//! or rewritten in place); a file that no longer reads keeps its last good contents, and the
//! error says which file.
#![forbid(unsafe_code)]

mod record;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use exitvoice_schema::{EchoGeo, GeoSource, Place};
use maxminddb::{MaxMindDbError, Reader};

use record::Record;

/// Why a database could not be used.
#[derive(Debug, thiserror::Error)]
pub enum GeoError {
    /// The file could not be read.
    #[error("geo database {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is no MaxMind DB, or a damaged one.
    #[error("geo database {path}: not a readable MaxMind DB: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Why.
        source: MaxMindDbError,
    },
}

/// One file and what was last read from it.
struct Database {
    path: PathBuf,
    /// The file as it was when read, to tell when it changes.
    stamp: Stamp,
    reader: Reader<Vec<u8>>,
    source: GeoSource,
    /// Whether a record that does not read was logged: once per database read, then counted.
    logged: AtomicBool,
}

/// What tells a changed file: replaced by rename (another inode) or rewritten in place (another
/// length or modification time).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

impl Stamp {
    fn of(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::MetadataExt as _;
        let meta = std::fs::metadata(path)?;
        Ok(Self {
            inode: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

impl Database {
    fn open(path: &Path) -> Result<Self, GeoError> {
        let read = |source| GeoError::Read {
            path: path.to_owned(),
            source,
        };
        let stamp = Stamp::of(path).map_err(read)?;
        let bytes = std::fs::read(path).map_err(read)?;
        let reader = Reader::from_source(bytes).map_err(|source| GeoError::Format {
            path: path.to_owned(),
            source,
        })?;
        let source = GeoSource {
            file: path
                .file_name()
                .map_or_else(String::new, |name| name.to_string_lossy().into_owned()),
            database_type: reader.metadata().database_type.clone(),
            build_date: build_date(reader.metadata().build_epoch),
        };
        Ok(Self {
            path: path.to_owned(),
            stamp,
            reader,
            source,
            logged: AtomicBool::new(false),
        })
    }

    /// The record for `ip`: `Ok(None)` when the database has none.
    fn place(&self, ip: IpAddr) -> Result<Option<Place>, MaxMindDbError> {
        let found = self.reader.lookup(ip)?;
        Ok(found.decode::<Record>()?.map(Record::place))
    }
}

/// `YYYY-MM-DD` of a Unix time in seconds (UTC); empty when out of range.
fn build_date(epoch: u64) -> String {
    i64::try_from(epoch)
        .ok()
        .and_then(|secs| time::OffsetDateTime::from_unix_timestamp(secs).ok())
        .map(|t| {
            let date = t.date();
            format!(
                "{:04}-{:02}-{:02}",
                date.year(),
                u8::from(date.month()),
                date.day()
            )
        })
        .unwrap_or_default()
}

/// The geo databases given, in the order given.
pub struct GeoIp {
    databases: RwLock<Arc<Vec<Arc<Database>>>>,
    /// Per file, how it was when it last failed to read: not tried again until it changes.
    failed: Mutex<Vec<Option<Stamp>>>,
    lookup_errors: AtomicU64,
}

impl std::fmt::Debug for GeoIp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeoIp")
            .field("sources", &self.sources())
            .finish_non_exhaustive()
    }
}

/// What [`GeoIp::refresh`] found for one changed file.
#[derive(Debug)]
pub enum Refreshed {
    /// Read again; lookups use it now.
    Reloaded(GeoSource),
    /// Did not read; lookups keep its last good contents.
    Failed(GeoError),
}

impl GeoIp {
    /// Reads every file; any that does not read is an error naming it.
    ///
    /// # Errors
    /// The first file that could not be read or is no MaxMind DB.
    pub fn open(paths: &[PathBuf]) -> Result<Self, GeoError> {
        let databases = paths
            .iter()
            .map(|path| Database::open(path).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            failed: Mutex::new(vec![None; databases.len()]),
            databases: RwLock::new(Arc::new(databases)),
            lookup_errors: AtomicU64::new(0),
        })
    }

    fn current(&self) -> Arc<Vec<Arc<Database>>> {
        Arc::clone(
            &self
                .databases
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// The databases, as their metadata names them.
    pub fn sources(&self) -> Vec<GeoSource> {
        self.current().iter().map(|db| db.source.clone()).collect()
    }

    /// The country and network of `ip`: each from the first database that knows it. A record
    /// that does not decode counts as unknown (and in [`GeoIp::lookup_errors`]); the first one
    /// of each database read is logged with the file and why.
    pub fn place(&self, ip: IpAddr) -> Place {
        let mut place = Place::default();
        for db in self.current().iter() {
            match db.place(ip) {
                Ok(Some(more)) => record::merge(&mut place, more),
                Ok(None) => {}
                Err(error) => {
                    self.lookup_errors.fetch_add(1, Ordering::Relaxed);
                    if !db.logged.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            file = %db.path.display(),
                            %error,
                            "geo database: a record that does not read is taken as unknown; \
                             later ones of this file are only counted"
                        );
                    }
                }
            }
        }
        place
    }

    /// [`GeoIp::place`] with the databases it was read from, as an echo shows it.
    pub fn echo(&self, ip: IpAddr) -> EchoGeo {
        EchoGeo {
            place: self.place(ip),
            sources: self.sources(),
        }
    }

    /// Records that did not decode since start.
    pub fn lookup_errors(&self) -> u64 {
        self.lookup_errors.load(Ordering::Relaxed)
    }

    /// Reads again each file whose inode, length or modification time changed since it was
    /// last read (or last failed to), and says what came of each. Lookups go on meanwhile, on
    /// the contents last read.
    pub fn refresh(&self) -> Vec<Refreshed> {
        let current = self.current();
        let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
        let mut outcomes = Vec::new();
        let mut next: Vec<Arc<Database>> = current.iter().map(Arc::clone).collect();
        for ((db, slot), failed) in current.iter().zip(&mut next).zip(failed.iter_mut()) {
            // A file that vanished is not read again: its last contents stay until it is back.
            let Ok(stamp) = Stamp::of(&db.path) else {
                continue;
            };
            if stamp == db.stamp || failed.as_ref() == Some(&stamp) {
                continue;
            }
            match Database::open(&db.path) {
                Ok(fresh) => {
                    outcomes.push(Refreshed::Reloaded(fresh.source.clone()));
                    *slot = Arc::new(fresh);
                    *failed = None;
                }
                Err(error) => {
                    outcomes.push(Refreshed::Failed(error));
                    *failed = Some(stamp);
                }
            }
        }
        if outcomes.iter().any(|o| matches!(o, Refreshed::Reloaded(_))) {
            *self
                .databases
                .write()
                .unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        }
        outcomes
    }
}

/// Calls [`GeoIp::refresh`] every `every` (off the async threads: it reads files) and hands each
/// outcome to `report`, for as long as anyone else holds `geo`.
pub fn spawn_refresh(
    geo: &Arc<GeoIp>,
    every: Duration,
    report: impl Fn(Refreshed) + Send + Sync + 'static,
) {
    let geo = Arc::downgrade(geo);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(geo) = geo.upgrade() else {
                return;
            };
            let outcomes = tokio::task::spawn_blocking(move || geo.refresh())
                .await
                .unwrap_or_default();
            outcomes.into_iter().for_each(&report);
        }
    });
}
