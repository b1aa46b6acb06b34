//! What the broker's store reports: gauges, egress checks, exits.

/// The broker's gauges as the store sees them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Live leases per class.
    pub live: Vec<(String, i64)>,
    /// Bans in force.
    pub bans: i64,
    /// Units with more than one live exclusive lease.
    pub collisions: i64,
}

/// What the store knew of an egress address when a check noted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressRecord {
    /// The address the task (or the lease) was last seen leaving from.
    pub previous: Option<String>,
    /// The country that address was placed in, when that check knew it.
    pub previous_country: Option<String>,
    /// Another live exclusive lease leaves from the same address.
    pub shared: bool,
}

/// One exit as the broker's `GET /v1/exits` shows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExitReport {
    /// The exit (a gateway's name for its slots).
    pub exit_name: String,
    /// Its live leases: unit, class, holder, expiry (store ms).
    pub live: Vec<(String, String, String, i64)>,
    /// Its bans in force: origin (`""` for the whole exit) and until when.
    pub bans: Vec<(String, i64)>,
    /// Leases granted on it, ever.
    pub served: i64,
    /// Outcomes reported for leases that ended since the window's start.
    pub outcomes: Vec<String>,
    /// Latencies reported with those, ms.
    pub latencies_ms: Vec<i64>,
}
