//! An acquire, the lease it grants, and why a renew or a release is refused.

use crate::class::LeaseClass;

/// What an acquire asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acquire<'a> {
    /// The new lease's id (random, chosen by the caller).
    pub lease_id: &'a str,
    /// The class; a unit must admit it.
    pub class: LeaseClass,
    /// Who holds it.
    pub holder: &'a str,
    /// The task it serves, if any: a task holding a live lease of the class gets that lease.
    pub task: Option<&'a str>,
    /// The origin it will talk to; bans are per (exit, origin).
    pub origin: Option<&'a str>,
    /// Its time to live from the store's now, ms.
    pub ttl_ms: i64,
    /// Its whole life, renewals included, from the store's now, ms; the unit's own cap (below
    /// its sticky window) applies too.
    pub life_ms: i64,
    /// Random text that starts a gateway lease's session id; the lease's fence ends it, so no
    /// id is ever issued twice.
    pub session_nonce: &'a str,
    /// For a stateless lease with an origin: how many stateless leases one unit may carry for
    /// that origin at once (`None`: only the unit's capacity counts).
    pub stateless_per_origin: Option<u32>,
    /// Fences the grant takes: its own, and `fences - 1` after it that no later grant on the
    /// exit reuses (a broker's reserve hands them to its sub-leases while the store is out of
    /// reach). 1 for a plain lease.
    pub fences: i64,
    /// The country the unit must leave from (upper case), if the lease asks for one.
    pub country: Option<&'a str>,
    /// The largest round-trip gap the unit may have, ms: only a unit whose gap is known and
    /// at most this serves the lease (`None`: any unit, measured or not).
    pub max_gap_ms: Option<u32>,
}

/// The largest `max_gap_ms` a lease may ask for: a minute, far above any gap a live path shows.
pub const MAX_GAP_MS: u32 = 60_000;

/// `ms` as a gap limit, when it is one: whole ms from 0 to [`MAX_GAP_MS`]. The broker's API
/// (which `exitvoice lease acquire` calls) and the forward proxy's user name both take their
/// limit through this one check.
#[must_use]
pub fn gap_limit(ms: u64) -> Option<u32> {
    u32::try_from(ms).ok().filter(|&ms| ms <= MAX_GAP_MS)
}

/// A granted (or, for a sticky task, found) lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Granted {
    /// The lease id.
    pub lease_id: String,
    /// The unit.
    pub unit: String,
    /// Its exit.
    pub exit_name: String,
    /// The fence: larger than every earlier lease's on this exit.
    pub fence: i64,
    /// Until when (store ms).
    pub expires_ms: i64,
    /// The end of its life (store ms): no renewal goes past it.
    pub life_ends_ms: i64,
    /// The gateway session id it carries (`None` on a plain exit).
    pub session: Option<String>,
    /// The store's now when it was granted.
    pub now_ms: i64,
    /// `false` for a new lease, `true` when a task got the live lease it already held.
    pub sticky: bool,
}

/// Why a renew or a release was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No such lease.
    Unknown,
    /// The fence is not the lease's.
    StaleFence,
    /// It expired (by the store's clock).
    Expired,
    /// It was released already.
    Released,
    /// The broker revoked it (the exit's label no longer admits its class).
    Revoked,
    /// A renewal would take it past its life cap.
    LifeCap,
}

impl Refusal {
    /// The API's reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown_lease",
            Self::StaleFence => "stale_fence",
            Self::Expired => "expired",
            Self::Released => "released",
            Self::Revoked => "revoked",
            Self::LifeCap => "life_cap_reached",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_have_distinct_api_reasons() {
        let all = [
            Refusal::Unknown,
            Refusal::StaleFence,
            Refusal::Expired,
            Refusal::Released,
            Refusal::Revoked,
            Refusal::LifeCap,
        ];
        let reasons: std::collections::HashSet<_> = all.iter().map(|r| r.as_str()).collect();
        assert_eq!(reasons.len(), all.len());
        assert_eq!(Refusal::LifeCap.as_str(), "life_cap_reached");
    }

    #[test]
    fn a_gap_limit_is_whole_ms_up_to_a_minute() {
        assert_eq!(gap_limit(0), Some(0));
        assert_eq!(gap_limit(u64::from(MAX_GAP_MS)), Some(MAX_GAP_MS));
        assert_eq!(gap_limit(u64::from(MAX_GAP_MS) + 1), None);
        // Past u32: refused, not wrapped into range.
        assert_eq!(gap_limit(u64::from(u32::MAX) + 5), None);
    }
}
