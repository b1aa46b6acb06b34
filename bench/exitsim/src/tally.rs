//! Per-exit counters: tunnels opened, tunnels open now, and the most ever open at once.
//!
//! One fixed slot per exit, indexed by the exit's number, with atomics only: counting costs no
//! lock and no allocation on the tunnel path, and 10,000 exits take 160 KB. A gateway session
//! (`exit-<n>-sessid-<id>`) is counted apart too, under a lock taken only by such tunnels: the
//! most tunnels one session id ever had open at once is the gateway's collision gauge.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::users::Holder;

use serde::Serialize;

/// The counters of every exit, and the connections refused before they reached one.
#[derive(Debug)]
pub struct Tally {
    exits: Vec<ExitCounters>,
    sessions: Mutex<HashMap<(usize, String), Arc<ExitCounters>>>,
    refused: AtomicU64,
    udp_refused: AtomicU64,
    uncounted: AtomicU64,
}

#[derive(Debug, Default)]
struct ExitCounters {
    tunnels: AtomicU64,
    in_flight: AtomicU32,
    max_in_flight: AtomicU32,
}

/// One open tunnel of one exit (and session); closing it (dropping) takes it off their
/// in-flight counts. An uncounted tunnel holds no counters.
#[derive(Debug)]
pub struct Open<'a> {
    counters: Option<&'a ExitCounters>,
    session: Option<Arc<ExitCounters>>,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        for counters in self.counters.into_iter().chain(self.session.as_deref()) {
            counters.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl ExitCounters {
    fn open(&self) {
        self.tunnels.fetch_add(1, Ordering::Relaxed);
        let now = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        self.max_in_flight.fetch_max(now, Ordering::AcqRel);
    }
}

/// What the counters say, for the stats endpoint and the line printed at shutdown.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    /// Exits simulated.
    pub exits: usize,
    /// Exits that carried at least one tunnel.
    pub exits_used: usize,
    /// Tunnels opened, over all exits.
    pub tunnels: u64,
    /// Tunnels open now, over all exits.
    pub in_flight: u64,
    /// Of `tunnels`, those to another target than the one holders are counted toward (see
    /// `Simulator::count_holders_to`): in no in-flight gauge.
    pub uncounted: u64,
    /// The most tunnels one exit ever had open at once (the largest per-exit maximum).
    pub max_in_flight_per_exit: u32,
    /// Gateway session ids that carried a tunnel.
    pub sessions: usize,
    /// The most tunnels one gateway session id ever had open at once.
    pub max_in_flight_per_session: u32,
    /// Connections that became no tunnel: bad request, unknown exit or password, target off
    /// loopback or not answering, and failed accepts.
    pub refused: u64,
    /// SOCKS5 `UDP ASSOCIATE` requests answered "command not supported" (the auditor's QUIC
    /// probes: the simulator carries TCP only). Not in `refused`.
    pub udp_refused: u64,
    /// Per exit, in exit-number order: `[tunnels opened, most open at once]` (only with
    /// `?exits=1`: 10,000 exits make 150 KB of JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_exit: Option<Vec<[u64; 2]>>,
}

impl Tally {
    /// Zeroed counters for `exits` exits.
    pub fn new(exits: usize) -> Self {
        Self {
            exits: (0..exits).map(|_| ExitCounters::default()).collect(),
            sessions: Mutex::new(HashMap::new()),
            refused: AtomicU64::new(0),
            udp_refused: AtomicU64::new(0),
            uncounted: AtomicU64::new(0),
        }
    }

    /// Counts a tunnel of `holder`'s exit (and session) as open until the returned guard
    /// drops, or, unless `counted`, only as opened; `None` if there is no such exit.
    pub fn open(&self, holder: &Holder, counted: bool) -> Option<Open<'_>> {
        let counters = self.exits.get(holder.exit)?;
        if !counted {
            counters.tunnels.fetch_add(1, Ordering::Relaxed);
            self.uncounted.fetch_add(1, Ordering::Relaxed);
            return Some(Open {
                counters: None,
                session: None,
            });
        }
        counters.open();
        let session = holder.session.as_ref().map(|id| {
            let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            let session = sessions
                .entry((holder.exit, id.clone()))
                .or_default()
                .clone();
            session.open();
            session
        });
        Some(Open {
            counters: Some(counters),
            session,
        })
    }

    /// Tunnels of exit number `exit` open now (counted ones only); `None` if there is no
    /// such exit.
    pub fn in_flight(&self, exit: usize) -> Option<u32> {
        Some(self.exits.get(exit)?.in_flight.load(Ordering::Acquire))
    }

    /// Counts a connection refused before it became a tunnel.
    pub fn refuse(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a `UDP ASSOCIATE` request refused.
    pub fn refuse_udp(&self) {
        self.udp_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now, with the per-exit list when `per_exit` is set.
    pub fn snapshot(&self, per_exit: bool) -> Snapshot {
        let load = |c: &ExitCounters| {
            (
                c.tunnels.load(Ordering::Relaxed),
                c.in_flight.load(Ordering::Relaxed),
                c.max_in_flight.load(Ordering::Relaxed),
            )
        };
        let mut snapshot = Snapshot {
            exits: self.exits.len(),
            exits_used: 0,
            tunnels: 0,
            in_flight: 0,
            uncounted: self.uncounted.load(Ordering::Relaxed),
            max_in_flight_per_exit: 0,
            sessions: 0,
            max_in_flight_per_session: 0,
            refused: self.refused.load(Ordering::Relaxed),
            udp_refused: self.udp_refused.load(Ordering::Relaxed),
            per_exit: per_exit.then(|| Vec::with_capacity(self.exits.len())),
        };
        {
            let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            snapshot.sessions = sessions.len();
            snapshot.max_in_flight_per_session = sessions
                .values()
                .map(|s| s.max_in_flight.load(Ordering::Relaxed))
                .max()
                .unwrap_or(0);
        }
        for counters in &self.exits {
            let (tunnels, in_flight, max) = load(counters);
            snapshot.exits_used += usize::from(tunnels > 0);
            snapshot.tunnels += tunnels;
            snapshot.in_flight += u64::from(in_flight);
            snapshot.max_in_flight_per_exit = snapshot.max_in_flight_per_exit.max(max);
            if let Some(list) = &mut snapshot.per_exit {
                list.push([tunnels, u64::from(max)]);
            }
        }
        snapshot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_overlap_per_exit_only() {
        let tally = Tally::new(2);
        let exit = |exit| Holder {
            exit,
            session: None,
        };
        {
            let _a = tally.open(&exit(0), true).unwrap();
            let _b = tally.open(&exit(1), true).unwrap();
        }
        let _c = tally.open(&exit(0), true).unwrap();
        assert_eq!(tally.snapshot(false).max_in_flight_per_exit, 1);
        let _d = tally.open(&exit(0), true).unwrap();
        assert!(tally.open(&exit(2), true).is_none());
        tally.refuse();
        let snapshot = tally.snapshot(true);
        assert_eq!(snapshot.max_in_flight_per_exit, 2);
        assert_eq!(snapshot.tunnels, 4);
        assert_eq!(snapshot.in_flight, 2);
        assert_eq!(snapshot.exits_used, 2);
        assert_eq!(snapshot.refused, 1);
        assert_eq!(snapshot.per_exit.unwrap(), [[3, 2], [1, 1]]);
        assert_eq!(
            (tally.in_flight(0), tally.in_flight(1), tally.in_flight(2)),
            (Some(2), Some(0), None)
        );
        assert_eq!(
            (snapshot.sessions, snapshot.max_in_flight_per_session),
            (0, 0)
        );
    }

    #[test]
    fn a_gateway_session_is_counted_apart() {
        let tally = Tally::new(1);
        let session = |id: &str| Holder {
            exit: 0,
            session: Some(id.into()),
        };
        let _a = tally.open(&session("a"), true).unwrap();
        let _b = tally.open(&session("b"), true).unwrap();
        let snapshot = tally.snapshot(false);
        assert_eq!(
            (
                snapshot.max_in_flight_per_exit,
                snapshot.sessions,
                snapshot.max_in_flight_per_session
            ),
            (2, 2, 1)
        );
        let _c = tally.open(&session("a"), true).unwrap();
        assert_eq!(tally.snapshot(false).max_in_flight_per_session, 2);
        drop(_c);
        drop(_a);
        assert_eq!(tally.snapshot(false).in_flight, 1);
    }

    #[test]
    fn an_uncounted_tunnel_is_opened_but_never_held() {
        let tally = Tally::new(1);
        let holder = Holder {
            exit: 0,
            session: Some("s".into()),
        };
        let _probe = tally.open(&holder, false).unwrap();
        let _worker = tally.open(&holder, true).unwrap();
        let snapshot = tally.snapshot(true);
        assert_eq!((snapshot.tunnels, snapshot.uncounted), (2, 1));
        assert_eq!(snapshot.in_flight, 1);
        assert_eq!(
            (
                snapshot.max_in_flight_per_exit,
                snapshot.max_in_flight_per_session
            ),
            (1, 1)
        );
        drop(_probe);
        assert_eq!(tally.snapshot(false).in_flight, 1);
    }
}
