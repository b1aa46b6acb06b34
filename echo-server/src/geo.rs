//! `--geoip`: the visitor's country and network for `/api/all`, from databases read at start
//! (a file that does not read stops the start, named) and read again when they change on disk.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use exitvoice_geo::{GeoError, GeoIp, Refreshed};

use crate::metrics::Metrics;

/// How often the files are looked at (a `stat` each) for a change.
const REFRESH_EVERY: Duration = Duration::from_secs(2);

/// The databases of `paths`; `None` when there are none.
pub(crate) fn open(paths: &[PathBuf]) -> Result<Option<Arc<GeoIp>>, GeoError> {
    if paths.is_empty() {
        return Ok(None);
    }
    let geo = GeoIp::open(paths)?;
    for source in geo.sources() {
        tracing::info!(
            file = %source.file,
            database_type = %source.database_type,
            build_date = %source.build_date,
            "geo database"
        );
    }
    Ok(Some(Arc::new(geo)))
}

/// Reads changed files again every [`REFRESH_EVERY`] for as long as the server holds `geo`.
pub(crate) fn spawn_refresh(geo: &Arc<GeoIp>, metrics: Arc<Metrics>) {
    let geo = Arc::downgrade(geo);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(REFRESH_EVERY).await;
            let Some(geo) = geo.upgrade() else {
                return;
            };
            let outcomes = tokio::task::spawn_blocking(move || geo.refresh())
                .await
                .unwrap_or_default();
            for outcome in outcomes {
                match outcome {
                    Refreshed::Reloaded(source) => {
                        metrics.geoip("reloaded");
                        tracing::info!(
                            file = %source.file,
                            database_type = %source.database_type,
                            build_date = %source.build_date,
                            "geo database read again"
                        );
                    }
                    Refreshed::Failed(error) => {
                        metrics.geoip("reload_failed");
                        tracing::warn!(%error, "geo database changed but did not read; its last good contents stay");
                    }
                }
            }
        }
    });
}
