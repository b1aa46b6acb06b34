//! A lease's end: what its outcome does to its exit, and what the release did.

/// A released lease's unit and exit, what its outcome did, and the store's now at its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Released {
    /// The unit it held.
    pub unit: String,
    /// Its exit.
    pub exit_name: String,
    /// Until when the outcome banned the exit (for its origin, or whole), if it did.
    pub banned_until_ms: Option<i64>,
    /// Expired bans the outcome (a success) forgot: the pair recovered.
    pub recovered_bans: u64,
    /// The gateway session id the outcome retired, if it did.
    pub retired_session: Option<String>,
    /// The store's now when it ended.
    pub now_ms: i64,
}

/// What a lease's outcome does to its exit (the broker's policy decides which).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Effect {
    /// A success: the exit's error streak ends, and its expired bans are forgotten (their
    /// back-off starts over).
    Success,
    /// The origin refused the exit (`403`, `429`, a captcha): a gateway's session id is retired,
    /// a plain exit is banned for the origin.
    Blocked(Backoff),
    /// The exit failed (`timeout`, `error`): its streak grows, and at `streak` the whole exit is
    /// banned.
    Failed {
        /// The back-off of the exit-wide ban.
        backoff: Backoff,
        /// The streak that bans the exit.
        streak: u32,
    },
    /// Nothing follows (another status).
    Neutral,
    /// The broker ended the lease itself: a gateway's session id is retired, nothing else.
    Retire,
}

/// A ban's length: `ttl_ms` the first time, doubled for each earlier ban of the same pair (up
/// to 64 times), times `jitter` (e.g. 1.0 to 1.25, drawn by the caller).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// The first ban's length, ms.
    pub ttl_ms: i64,
    /// The factor drawn for this ban.
    pub jitter: f64,
}
