//! What a crash or a failover of the broker's store would cost, read from its settings at
//! start and said plainly in the log. Whatever it costs, the broker notices a store that came
//! back older (`redis_leases`, `sql_leases`) and holds grants: exclusivity holds; what the
//! settings decide is how often that hold happens.

use std::collections::HashMap;

/// A store's durability, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Durability {
    /// The settings it was judged by, `name=value`, or why they could not be read.
    pub settings: String,
    /// What a crash of the store's server loses of what it acknowledged.
    pub crash: String,
    /// What a failover to a replica loses.
    pub failover: String,
}

/// Settings that could not be read (a managed Redis refuses `CONFIG`; a role without the
/// rights): the worst is assumed.
const UNKNOWN: &str = "unknown (settings not readable): assume the last writes";

/// Judges Redis by `CONFIG GET appendonly appendfsync save min-replicas-to-write` and
/// `INFO replication`'s `role` and `connected_slaves` (absent when unreadable).
pub fn redis(settings: &HashMap<String, String>) -> Durability {
    let get = |name: &str| settings.get(name).map(String::as_str);
    let crash = match (get("appendonly"), get("appendfsync"), get("save")) {
        (Some("yes"), Some("always"), _) => "nothing acknowledged (appendfsync always)".to_owned(),
        (Some("yes"), Some("everysec"), _) => {
            "up to about a second of writes (appendfsync everysec)".to_owned()
        }
        (Some("yes"), _, _) => {
            "the writes the OS had not flushed, up to about 30 s (appendfsync no)".to_owned()
        }
        (Some("no"), _, Some("")) => "the whole pool (no persistence)".to_owned(),
        (Some("no"), _, Some(save)) => {
            format!("every write since the last RDB snapshot (save \"{save}\")")
        }
        _ => UNKNOWN.to_owned(),
    };
    let replicas = get("connected_slaves").and_then(|n| n.parse::<u32>().ok());
    let guarded = get("min-replicas-to-write").and_then(|n| n.parse::<u32>().ok());
    let failover = match (replicas, guarded) {
        (Some(0), _) => {
            "no replica is connected: a failover has nothing to fail over to".to_owned()
        }
        (Some(n), Some(0)) => format!(
            "what the {n} replica(s) had not received (replication is asynchronous); a \
             partitioned primary keeps taking writes (set min-replicas-to-write 1 and \
             min-replicas-max-lag 10 so that it stops)"
        ),
        (Some(n), _) => {
            format!("what the {n} replica(s) had not received (replication is asynchronous)")
        }
        (None, _) => UNKNOWN.to_owned(),
    };
    Durability {
        settings: shown(settings),
        crash,
        failover,
    }
}

/// Judges PostgreSQL by `synchronous_commit`, `fsync`, `synchronous_standby_names` and the
/// standbys streaming from it (`standbys`, from `pg_stat_replication`).
pub fn postgres(settings: &HashMap<String, String>) -> Durability {
    let get = |name: &str| settings.get(name).map(String::as_str);
    let crash = match (get("fsync"), get("synchronous_commit")) {
        (Some("off"), _) => "anything, even committed data (fsync off)".to_owned(),
        (_, Some("off")) => {
            "up to about 0.6 s of commits (synchronous_commit off: three wal_writer_delay)"
                .to_owned()
        }
        (Some("on"), Some(_)) => "nothing committed".to_owned(),
        _ => UNKNOWN.to_owned(),
    };
    let standbys = get("standbys").and_then(|n| n.parse::<u32>().ok());
    let failover = match (
        get("synchronous_standby_names"),
        get("synchronous_commit"),
        standbys,
    ) {
        (_, _, Some(0)) => {
            "no standby streams from it: a failover has nothing to fail over to".to_owned()
        }
        (Some(names), Some("remote_apply" | "on" | "remote_write"), _) if !names.is_empty() => {
            "nothing committed, if the promoted standby is a synchronous one".to_owned()
        }
        (Some(_), _, Some(n)) => format!(
            "what the {n} asynchronous standby(s) had not received (synchronous_standby_names \
             is empty)"
        ),
        _ => UNKNOWN.to_owned(),
    };
    Durability {
        settings: shown(settings),
        crash,
        failover,
    }
}

/// Judges a SQLite file by its `journal_mode` and `synchronous`.
pub fn sqlite(settings: &HashMap<String, String>) -> Durability {
    let get = |name: &str| settings.get(name).map(String::as_str);
    let crash = match (get("journal_mode"), get("synchronous")) {
        (_, Some("3" | "2")) => "nothing committed".to_owned(),
        (Some("wal"), Some("1")) => {
            "nothing on a crash of the process; the last commits on a crash of the host \
             (synchronous NORMAL)"
                .to_owned()
        }
        _ => UNKNOWN.to_owned(),
    };
    Durability {
        settings: shown(settings),
        crash,
        failover: "no replicas (one file on one host)".to_owned(),
    }
}

/// `name=value, …` in name order.
fn shown(settings: &HashMap<String, String>) -> String {
    if settings.is_empty() {
        return "none readable".to_owned();
    }
    let mut pairs: Vec<String> = settings
        .iter()
        .map(|(name, value)| format!("{name}={value:?}"))
        .collect();
    pairs.sort();
    pairs.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[test]
    fn redis_is_judged_by_its_persistence_and_replicas() {
        let debian = redis(&settings(&[
            ("appendonly", "no"),
            ("save", "3600 1 300 100 60 10000"),
            ("connected_slaves", "0"),
        ]));
        assert!(
            debian.crash.contains("since the last RDB snapshot"),
            "{debian:?}"
        );
        assert!(debian.failover.starts_with("no replica"), "{debian:?}");
        let aof = redis(&settings(&[
            ("appendonly", "yes"),
            ("appendfsync", "everysec"),
            ("connected_slaves", "1"),
            ("min-replicas-to-write", "0"),
        ]));
        assert!(aof.crash.contains("about a second"), "{aof:?}");
        assert!(aof.failover.contains("min-replicas-to-write 1"), "{aof:?}");
        let always = redis(&settings(&[
            ("appendonly", "yes"),
            ("appendfsync", "always"),
        ]));
        assert!(always.crash.starts_with("nothing"), "{always:?}");
        assert!(always.failover.starts_with("unknown"), "{always:?}");
        let managed = redis(&HashMap::new());
        assert!(managed.crash.starts_with("unknown"));
        assert_eq!(managed.settings, "none readable");
    }

    #[test]
    fn postgresql_is_judged_by_its_commits_and_standbys() {
        let debian = postgres(&settings(&[
            ("fsync", "on"),
            ("synchronous_commit", "on"),
            ("synchronous_standby_names", ""),
            ("standbys", "1"),
        ]));
        assert_eq!(debian.crash, "nothing committed");
        assert!(
            debian.failover.contains("1 asynchronous standby"),
            "{debian:?}"
        );
        let synchronous = postgres(&settings(&[
            ("fsync", "on"),
            ("synchronous_commit", "on"),
            ("synchronous_standby_names", "ANY 1 (s1, s2)"),
            ("standbys", "2"),
        ]));
        assert!(
            synchronous.failover.starts_with("nothing committed"),
            "{synchronous:?}"
        );
        let lax = postgres(&settings(&[("fsync", "on"), ("synchronous_commit", "off")]));
        assert!(lax.crash.contains("0.6 s"), "{lax:?}");
    }

    #[test]
    fn sqlite_is_judged_by_its_sync_mode() {
        let ours = sqlite(&settings(&[("journal_mode", "wal"), ("synchronous", "1")]));
        assert!(ours.crash.contains("crash of the host"), "{ours:?}");
        let full = sqlite(&settings(&[("journal_mode", "wal"), ("synchronous", "2")]));
        assert_eq!(full.crash, "nothing committed");
    }
}
