//! `--geoip`: the visitor's country and network for `/api/all`, from databases read at start
//! (a file that does not read stops the start, named) and read again when they change on disk.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use exitvoice_geo::{GeoError, GeoIp, Refreshed};

use crate::metrics::Metrics;

/// How often the files are looked at (a `stat` each) for a change.
const REFRESH_EVERY: Duration = Duration::from_secs(2);

/// The databases of `paths`, read again when they change (counted in `metrics`); `None` when
/// there are none.
pub(crate) fn open(
    paths: &[PathBuf],
    metrics: &Arc<Metrics>,
) -> Result<Option<Arc<GeoIp>>, GeoError> {
    if paths.is_empty() {
        return Ok(None);
    }
    let geo = Arc::new(GeoIp::open(paths)?);
    for source in geo.sources() {
        tracing::info!(
            file = %source.file,
            database_type = %source.database_type,
            build_date = %source.build_date,
            "geo database"
        );
    }
    let metrics = Arc::clone(metrics);
    exitvoice_geo::spawn_refresh(&geo, REFRESH_EVERY, move |outcome| match outcome {
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
    });
    Ok(Some(geo))
}
