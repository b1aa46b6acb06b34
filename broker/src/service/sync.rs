//! The units a refresh writes: worked out from the pool and its labels, and only those that
//! changed since the last refresh go to the store.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use exitvoice_lease::UnitSpec;
use time::OffsetDateTime;

use crate::pool::{Labels, Pool};

/// The units a refresh wrote, and what it worked them out from. While the labels and the pool
/// are the same ones and no label has aged out since, the units are what they were, and the
/// next refresh has nothing to work out (at 10,000 exits ~14 ms of CPU each time).
pub(super) struct Synced {
    /// Every unit by name.
    pub(super) units: Arc<HashMap<String, UnitSpec>>,
    pub(super) labels: Option<Arc<Labels>>,
    pub(super) pool: Arc<Pool>,
    /// The store's clock at that refresh.
    pub(super) at: OffsetDateTime,
    /// When the first label recent then grows older than the max age (`None`: none will).
    pub(super) until: Option<OffsetDateTime>,
}

impl Synced {
    pub(super) fn holds(
        &self,
        labels: Option<&Arc<Labels>>,
        pool: &Arc<Pool>,
        now: OffsetDateTime,
    ) -> bool {
        let same_labels = match (&self.labels, labels) {
            (Some(read), Some(now_read)) => Arc::ptr_eq(read, now_read),
            (None, None) => true,
            _ => false,
        };
        // A clock that went back could make an aged label recent again: work it out anew.
        same_labels
            && Arc::ptr_eq(&self.pool, pool)
            && now >= self.at
            && self.until.is_none_or(|until| now <= until)
    }
}

/// The units of `units` whose spec differs from what was last written (`synced`; all of them
/// on the first refresh), the units `synced` has and `units` no longer names as draining, and
/// every unit by name as written after this refresh. Only the changed ones go to the store: at
/// 10,000 exits, a refresh that wrote every unit would cost seconds of the store's time.
pub(super) fn changed_units(
    mut units: Vec<UnitSpec>,
    synced: Option<&HashMap<String, UnitSpec>>,
) -> (Vec<UnitSpec>, HashMap<String, UnitSpec>) {
    // Units a reloaded exits file no longer names drain.
    if let Some(previous) = synced {
        let named: HashSet<&str> = units.iter().map(|unit| unit.unit.as_str()).collect();
        let gone: Vec<UnitSpec> = previous
            .values()
            .filter(|unit| !named.contains(unit.unit.as_str()))
            .map(|unit| UnitSpec {
                admits: None,
                draining: true,
                ..unit.clone()
            })
            .collect();
        units.extend(gone);
    }
    let changed = match synced {
        None => units.clone(),
        Some(previous) => units
            .iter()
            .filter(|unit| previous.get(&unit.unit) != Some(*unit))
            .cloned()
            .collect(),
    };
    let written = units
        .into_iter()
        .map(|unit| (unit.unit.clone(), unit))
        .collect();
    (changed, written)
}

#[cfg(test)]
mod tests {
    use exitvoice_lease::LeaseClass;

    use super::*;

    fn unit(name: &str, admits: Option<LeaseClass>) -> UnitSpec {
        UnitSpec {
            unit: name.into(),
            exit_name: name.into(),
            admits,
            capacity: 2,
            gateway: false,
            life_ms: 3_600_000,
            draining: false,
            country: None,
            gap_ms: None,
        }
    }

    fn by_name(units: &[UnitSpec]) -> HashMap<String, UnitSpec> {
        units.iter().map(|u| (u.unit.clone(), u.clone())).collect()
    }

    fn names(units: &[UnitSpec]) -> Vec<&str> {
        let mut names: Vec<&str> = units.iter().map(|u| u.unit.as_str()).collect();
        names.sort_unstable();
        names
    }

    #[test]
    fn the_first_refresh_writes_every_unit() {
        let units = vec![unit("a", Some(LeaseClass::Identity)), unit("b", None)];
        let (changed, written) = changed_units(units.clone(), None);
        assert_eq!(changed, units);
        assert_eq!(written, by_name(&units));
    }

    #[test]
    fn a_refresh_writes_the_added_the_changed_and_the_removed_units_only() {
        let previous = by_name(&[
            unit("same", Some(LeaseClass::Identity)),
            unit("changed", Some(LeaseClass::Identity)),
            unit("removed", Some(LeaseClass::Anonymous)),
        ]);
        let now = vec![
            unit("same", Some(LeaseClass::Identity)),
            unit("changed", Some(LeaseClass::Stateless)),
            unit("added", Some(LeaseClass::Anonymous)),
        ];
        let (changed, written) = changed_units(now, Some(&previous));
        assert_eq!(names(&changed), ["added", "changed", "removed"]);
        let removed = changed.iter().find(|u| u.unit == "removed").unwrap();
        assert!(removed.draining, "a unit the pool no longer names drains");
        assert_eq!(removed.admits, None);
        assert_eq!(removed.exit_name, "removed", "the rest of its spec is kept");
        assert_eq!(
            written["changed"].admits,
            Some(LeaseClass::Stateless),
            "the new spec is what was written"
        );
        let mut all: Vec<&str> = written.keys().map(String::as_str).collect();
        all.sort_unstable();
        assert_eq!(all, ["added", "changed", "removed", "same"]);
        assert_eq!(written["removed"], *removed);
    }

    #[test]
    fn a_drained_unit_is_written_once_and_again_when_it_comes_back() {
        let first = vec![unit("a", Some(LeaseClass::Identity)), unit("b", None)];
        let (_, written) = changed_units(first, None);
        let (changed, written) = changed_units(vec![unit("b", None)], Some(&written));
        assert_eq!(names(&changed), ["a"]);
        assert!(written["a"].draining);
        let (changed, written) = changed_units(vec![unit("b", None)], Some(&written));
        assert!(changed.is_empty(), "still drained: nothing to write");
        assert!(written["a"].draining, "and it stays known as drained");
        let back = unit("a", Some(LeaseClass::Identity));
        let (changed, written) = changed_units(vec![back.clone(), unit("b", None)], Some(&written));
        assert_eq!(changed, std::slice::from_ref(&back));
        assert_eq!(written["a"], back);
    }

    #[test]
    fn the_units_hold_while_their_labels_pool_and_time_do() {
        let at = OffsetDateTime::from_unix_timestamp(1_000_000).unwrap();
        let minute = time::Duration::minutes(1);
        let labels = Arc::new(Labels::new());
        let pool = Arc::new(Pool::new(Vec::new()));
        let synced = Synced {
            units: Arc::default(),
            labels: Some(labels.clone()),
            pool: pool.clone(),
            at,
            until: Some(at + minute),
        };
        assert!(synced.holds(Some(&labels), &pool, at));
        assert!(synced.holds(Some(&labels), &pool, at + minute));
        assert!(
            !synced.holds(Some(&labels), &pool, at + minute + time::Duration::SECOND),
            "a label aged out"
        );
        assert!(
            !synced.holds(Some(&labels), &pool, at - minute),
            "the clock went back"
        );
        assert!(
            !synced.holds(Some(&Arc::new(Labels::new())), &pool, at),
            "another snapshot, even an equal one"
        );
        assert!(!synced.holds(None, &pool, at), "the labels went away");
        assert!(
            !synced.holds(Some(&labels), &Arc::new(Pool::new(Vec::new())), at),
            "a reloaded pool"
        );
        let never = Synced {
            labels: None,
            until: None,
            ..synced
        };
        assert!(never.holds(None, &pool, at + minute * 1000));
    }
}
