//! The broker's settings, the requests it takes, what it answers, and why it refuses.

use std::sync::Arc;
use std::time::{Duration, Instant};

use exitvoice_exits::{EchoTarget, Secret};
use exitvoice_geo::GeoIp;
use exitvoice_lease::{Granted, Refusal, Released};

use crate::egress::Egress;
use crate::lease_store::StoreFailure;
use crate::policy::BadOutcome;

/// The broker's settings (`exitvoice broker --help`).
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// Whose labels count (`rustls/chrome`, `chromium`).
    pub persona: String,
    /// A lease's time to live when the request names none.
    pub default_ttl: Duration,
    /// The longest time to live a request may ask for.
    pub max_ttl: Duration,
    /// The longest life of a lease, renewals included (a gateway's is below its sticky window).
    pub max_life: Duration,
    /// The longest wait a request may ask for.
    pub max_wait: Duration,
    /// Labels whose newest probe is older admit nothing.
    pub labels_max_age: Duration,
    /// How often the labels are read again.
    pub labels_refresh: Duration,
    /// Stateless leases that may share one exit.
    pub stateless_per_exit: u32,
    /// Stateless leases one exit may carry for one origin at once (`None`: no cap of its own).
    pub stateless_per_origin: Option<u32>,
    /// The first ban's length.
    pub ban_ttl: Duration,
    /// `timeout`/`error` outcomes in a row that ban an exit.
    pub error_streak: u32,
    /// This instance's name, in metrics.
    pub instance: String,
    /// The echo server egress checks go to (the exits file's `[echo]`).
    pub echo: Option<EchoTarget>,
    /// Leases that ended longer ago than this are pruned at each labels refresh; zero keeps
    /// them for ever.
    pub retain: Duration,
    /// Units this instance holds in reserve to grant from while the store is out of reach
    /// ([`crate::reserve`]); 0: none, and an outage answers `503`.
    pub reserve: usize,
    /// How long the reserve's leases run between renewals: the longest outage it bridges.
    pub reserve_ttl: Duration,
    /// The broker's own geo databases (`--geoip`): they place the egress check's address, and
    /// the units of exits whose labels have no places ([`crate::pool`]).
    pub geo: Option<Arc<GeoIp>>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            persona: "rustls/chrome".to_owned(),
            default_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(600),
            max_life: Duration::from_secs(3600),
            max_wait: Duration::from_secs(30),
            labels_max_age: Duration::from_secs(2 * 3600),
            labels_refresh: Duration::from_secs(10),
            stateless_per_exit: 2,
            stateless_per_origin: None,
            ban_ttl: Duration::from_secs(3600),
            error_streak: 3,
            instance: "broker".to_owned(),
            echo: None,
            retain: Duration::from_secs(24 * 3600),
            reserve: 0,
            reserve_ttl: Duration::from_secs(60),
            geo: None,
        }
    }
}

impl BrokerConfig {
    /// The longest time to live a holder can have been told at its last grant or renewal: a
    /// request's (at most `max_ttl`; `default_ttl` when it names none), or the reserve's
    /// lease's when there is a reserve, whose sub-leases end before it does. A store that lost
    /// its last writes grants nothing for this long (`redis_leases`, `sql_leases`): the holders
    /// of the lost leases have stopped by then.
    pub fn longest_told_ttl(&self) -> Duration {
        let asked = self.max_ttl.max(self.default_ttl);
        if self.reserve > 0 {
            asked.max(self.reserve_ttl)
        } else {
            asked
        }
    }
}

/// A lease request, as the API takes it.
#[derive(Clone, Debug, Default)]
pub struct LeaseRequest {
    /// `identity`, `anonymous` or `stateless`.
    pub class: String,
    /// Who will hold it.
    pub holder: String,
    /// The task it serves.
    pub task: Option<String>,
    /// The origin it will talk to.
    pub origin: Option<String>,
    /// Its time to live, ms.
    pub ttl_ms: Option<u64>,
    /// How long to wait for a free exit, ms.
    pub wait_ms: Option<u64>,
    /// Check the lease's egress address through the exit ([`crate::egress`]).
    pub egress: bool,
    /// The country the exit must leave from (ISO 3166-1 alpha-2, any case): only units of
    /// that country serve it ([`crate::pool`] says where a unit's country comes from).
    pub country: Option<String>,
    /// The largest round-trip gap the exit may have, ms (at most
    /// [`exitvoice_lease::MAX_GAP_MS`]): only units whose label measured a gap
    /// (`latency.round_trip.gap_min_us`) within it serve it; an exit never measured does not.
    pub max_gap_ms: Option<u64>,
}

/// How a release ended.
#[derive(Clone, Debug)]
pub enum Ended {
    /// The lease ended.
    Released(Released),
    /// The store is out of reach: the release is kept and sent when it answers again.
    Kept,
}

/// A granted lease, as the API answers it.
#[derive(Clone, Debug)]
pub struct Lease {
    /// What the store granted.
    pub granted: Granted,
    /// The unit's exit name (`gw#2` for a gateway slot).
    pub exit: String,
    /// The proxy URL with credentials and session.
    pub proxy_url: Secret,
    /// Its time to live, ms.
    pub ttl_ms: i64,
    /// When the store call that granted it was made, by this instance's clock: its time to
    /// live counts from no earlier (a request that waited for a free exit was granted late).
    pub asked_at: Instant,
    /// The egress check's answer, when the request asked for one: what it saw, or why it
    /// failed (the lease stands either way).
    pub egress: Option<Result<EgressSeen, String>>,
}

/// What an egress check saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressSeen {
    /// The address and whether an interceptor answered.
    pub egress: Egress,
    /// The task (or the lease) was last seen leaving from another address.
    pub changed: bool,
    /// Another live exclusive lease leaves from the same address.
    pub shared: bool,
    /// The address is placed in another country than the one the lease asked for, else the
    /// exit's `country` (exits file); `None` when either is unknown.
    pub country_mismatch: Option<bool>,
    /// The task (or the lease) was last seen leaving from another country; `None` when either
    /// check could not place its address.
    pub country_changed: Option<bool>,
}

/// Why a request was not served.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// Nothing free within the wait.
    #[error(
        "no exit of class {class}{}{} is free",
        .country.as_ref().map(|c| format!(" in {c}")).unwrap_or_default(),
        .max_gap_ms.map(|ms| format!(" within a {ms} ms gap")).unwrap_or_default()
    )]
    Unavailable {
        /// The class asked for.
        class: &'static str,
        /// The country asked for, if any.
        country: Option<String>,
        /// The gap limit asked for, if any, ms.
        max_gap_ms: Option<u32>,
        /// When to try again, ms.
        retry_after_ms: u64,
    },
    /// The lease refused the renewal or release.
    #[error("{}", .0.as_str())]
    Refused(Refusal),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreFailure),
    /// The broker failed at something of its own (answered `500`).
    #[error("{0}")]
    Internal(String),
}

impl From<BadOutcome> for BrokerError {
    fn from(error: BadOutcome) -> Self {
        Self::BadRequest(error.to_string())
    }
}
