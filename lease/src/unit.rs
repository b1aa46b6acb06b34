//! A lease unit: a plain exit, or one session slot of a gateway.

use crate::class::LeaseClass;

/// One lease unit as the broker's configuration and labels describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitSpec {
    /// `exit`, or `gateway#slot`.
    pub unit: String,
    /// The exit it belongs to (the gateway's name for a slot); fences and bans are per exit.
    pub exit_name: String,
    /// The best class its newest label admits; `None` leases nothing.
    pub admits: Option<LeaseClass>,
    /// Stateless leases it carries at once.
    pub capacity: u32,
    /// A gateway's session slot: each lease on it gets a session id of its own.
    pub gateway: bool,
    /// The longest life of a lease on it, renewals included, ms.
    pub life_ms: i64,
    /// It left the pool (the exits file no longer names it): it takes no new lease, and its
    /// live ones run out rather than being revoked.
    pub draining: bool,
    /// The country it leaves from (ISO 3166-1 alpha-2, upper case), when known: a lease that
    /// asks for a country gets only a unit of that country.
    pub country: Option<String>,
    /// Its round-trip gap (the smallest its label saw, `latency.round_trip.gap_min_us`) in
    /// whole ms, rounded up, when measured: a lease that asks for `max_gap_ms` gets only a unit
    /// whose gap is known and within it. Rounded up, a limit of N ms admits exactly the gaps of
    /// at most N·1000 µs, and a unit whose gap moves within its millisecond is not rewritten.
    pub gap_ms: Option<u32>,
}

impl UnitSpec {
    /// Its rank in the store: the class it admits (0: none), or -1 while it drains.
    pub fn rank(&self) -> i64 {
        if self.draining {
            -1
        } else {
            self.admits.map_or(0, LeaseClass::rank)
        }
    }

    /// Whether its gap is known and at most `max_gap_ms` (always, when no limit is asked for).
    pub fn within_gap(&self, max_gap_ms: Option<u32>) -> bool {
        max_gap_ms.is_none_or(|max| self.gap_ms.is_some_and(|gap| gap <= max))
    }
}

/// A gap measured in µs as a unit keeps it: whole ms, rounded up.
pub fn gap_ms_of(gap_us: u32) -> u32 {
    gap_us.div_ceil(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_ranks_by_its_class_or_drains_below_all() {
        let mut spec = UnitSpec {
            unit: "gw#1".into(),
            exit_name: "gw".into(),
            admits: Some(LeaseClass::Anonymous),
            capacity: 4,
            gateway: true,
            life_ms: 60_000,
            draining: false,
            country: None,
            gap_ms: None,
        };
        assert_eq!(spec.rank(), 2);
        spec.admits = None;
        assert_eq!(spec.rank(), 0);
        spec.admits = Some(LeaseClass::Identity);
        spec.draining = true;
        assert_eq!(spec.rank(), -1);
    }

    #[test]
    fn only_a_measured_gap_within_the_limit_meets_it() {
        let mut spec = UnitSpec {
            unit: "a".into(),
            exit_name: "a".into(),
            admits: Some(LeaseClass::Identity),
            capacity: 1,
            gateway: false,
            life_ms: 60_000,
            draining: false,
            country: None,
            gap_ms: None,
        };
        assert!(spec.within_gap(None), "no limit: any unit");
        assert!(
            !spec.within_gap(Some(10)),
            "an unmeasured unit meets no limit"
        );
        spec.gap_ms = Some(10);
        assert!(spec.within_gap(Some(10)));
        assert!(!spec.within_gap(Some(9)));
    }

    #[test]
    fn a_gap_is_kept_in_whole_ms_rounded_up() {
        // A limit of N ms admits a gap of N·1000 µs and not one µs more.
        assert_eq!(gap_ms_of(10_000), 10);
        assert_eq!(gap_ms_of(10_001), 11);
        assert_eq!(gap_ms_of(999), 1);
        assert_eq!(gap_ms_of(0), 0);
        assert_eq!(gap_ms_of(u32::MAX), 4_294_968);
    }
}
