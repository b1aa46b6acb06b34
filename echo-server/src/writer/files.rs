//! The `--record-dir` files of a connection: its ClientHello, its tapped prefix and its record,
//! in the captures/ recorder's format.

use exitvoice_schema::ConnectionRecord;

use crate::capture::Connection;
use crate::metrics::Metrics;

/// Writes `<id>.hello.bin`, `<id>.prefix.bin` and `<id>.json` under `dir`; a file that could
/// not be written is counted and logged.
pub(super) async fn write(
    dir: &std::path::Path,
    conn: &Connection,
    record: &ConnectionRecord,
    metrics: &Metrics,
) {
    let json = match serde_json::to_vec_pretty(record) {
        Ok(json) => json,
        Err(_) => {
            metrics.record_failure();
            return;
        }
    };
    let files = [
        (format!("{}.hello.bin", conn.id), conn.hello.to_vec()),
        (
            format!("{}.prefix.bin", conn.id),
            conn.tap.with_bytes(<[u8]>::to_vec),
        ),
        (format!("{}.json", conn.id), json),
    ];
    for (name, contents) in files {
        if let Err(error) = tokio::fs::write(dir.join(&name), contents).await {
            metrics.record_failure();
            tracing::warn!(%error, file = %name, "record file not written");
        }
    }
}
