//! Which history of the database a connection reaches: its *lineage*. A database can come back
//! older than it was without losing the connection string: a PostgreSQL standby promoted after
//! its primary failed (streaming replication is asynchronous by default: the standby may lack
//! the last commits), a point-in-time restore, a server whose commits are not flushed
//! (`synchronous_commit = off`, `fsync = off`) restarted after a crash, a SQLite file whose
//! last commits a power loss took (`synchronous = NORMAL`). Each of these shows as a new
//! lineage:
//!
//! - PostgreSQL: the database's OID, the server's system identifier where the role may read
//!   it, and its timeline (the WAL file name's first eight digits: promotion and recovery to a
//!   point start a new one); with commits not flushed, the server's start time too;
//! - SQLite: this host's boot id (Linux), since only a crash of the host loses commits.
//!
//! Every new connection reads the lineage it reaches ([`read`], from the pool's
//! `after_connect`), and a broker that confirmed one learns at once, through its [`Watch`],
//! when a connection reached another, before that connection serves it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use sqlx::AnyConnection;

/// The lineage a broker confirmed, and whether a connection reached another since.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    confirmed: Mutex<Option<String>>,
    moved: AtomicBool,
}

impl Watch {
    /// Notes the lineage a new connection reaches.
    pub(crate) fn saw(&self, live: &str) {
        let confirmed = self
            .confirmed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if confirmed.as_deref().is_some_and(|known| known != live) {
            self.moved.store(true, Ordering::SeqCst);
        }
    }

    /// Whether a connection reached another lineage than the confirmed one.
    pub(crate) fn moved(&self) -> bool {
        self.moved.load(Ordering::SeqCst)
    }

    /// Takes `live` as the lineage the broker grants on.
    pub(crate) fn confirm(&self, live: String) {
        let mut confirmed = self
            .confirmed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *confirmed = Some(live);
        self.moved.store(false, Ordering::SeqCst);
    }
}

/// The lineage a PostgreSQL connection reaches. `pg_control_system()` is for superusers and
/// `pg_monitor` only: without it, the database's OID still tells a database restored into a
/// new cluster.
const POSTGRES: &str = "SELECT concat_ws(':', \
    (SELECT oid::text FROM pg_database WHERE datname = current_database()), \
    CASE WHEN has_function_privilege('pg_control_system()', 'EXECUTE') \
      THEN (SELECT system_identifier::text FROM pg_control_system()) ELSE '' END, \
    CASE WHEN pg_is_in_recovery() THEN 'standby' \
      ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END, \
    CASE WHEN current_setting('synchronous_commit') = 'off' OR current_setting('fsync') = 'off' \
      THEN pg_postmaster_start_time()::text ELSE '' END)";

/// Where Linux tells this boot apart from every other.
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// The lineage `conn` reaches (`postgres`: a PostgreSQL connection, else SQLite).
pub(crate) async fn read(conn: &mut AnyConnection, postgres: bool) -> Result<String, sqlx::Error> {
    if postgres {
        return sqlx::query_scalar(POSTGRES).fetch_one(conn).await;
    }
    // Elsewhere than Linux: no boot id, and no lineage to tell apart.
    Ok(std::fs::read_to_string(BOOT_ID)
        .map(|id| format!("boot:{}", id.trim()))
        .unwrap_or_default())
}

/// The settings that decide what a crash or a failover loses, by name: PostgreSQL's
/// `fsync`, `synchronous_commit`, `synchronous_standby_names` and the count of standbys
/// streaming from it (`standbys`); SQLite's `journal_mode` and `synchronous`.
pub(crate) async fn durability(
    conn: &mut AnyConnection,
    postgres: bool,
) -> Result<Vec<(String, String)>, sqlx::Error> {
    if postgres {
        let mut settings: Vec<(String, String)> = sqlx::query_as(
            "SELECT name, setting FROM pg_settings WHERE name IN \
             ('fsync', 'synchronous_commit', 'synchronous_standby_names') \
             UNION ALL SELECT 'standbys', count(*)::text FROM pg_stat_replication",
        )
        .fetch_all(&mut *conn)
        .await?;
        settings.sort();
        return Ok(settings);
    }
    let mut settings = Vec::new();
    for name in ["journal_mode", "synchronous"] {
        let value: String =
            sqlx::query_scalar(&format!("SELECT CAST({name} AS TEXT) FROM pragma_{name}"))
                .fetch_one(&mut *conn)
                .await?;
        settings.push((name.to_owned(), value));
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_to_another_lineage_is_seen_once_one_is_confirmed() {
        let watch = Watch::default();
        watch.saw("a");
        assert!(!watch.moved(), "nothing confirmed: nothing to compare");
        watch.confirm("a".to_owned());
        watch.saw("a");
        assert!(!watch.moved());
        watch.saw("b");
        assert!(watch.moved());
        watch.saw("a");
        assert!(watch.moved(), "stays moved until confirmed again");
        watch.confirm("b".to_owned());
        assert!(!watch.moved());
    }
}
