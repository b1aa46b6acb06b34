//! Admission of new connections by their source, decided at accept before any byte is read:
//! a token bucket on each source's rate of new connections, and a penalty box that refuses a
//! source for a while once its connections broke the protocol or the deadlines too often.
//!
//! Both stop the floods that the per-connection defences cannot: an attacker who reconnects
//! after every GOAWAY or refused hello costs the server a full TLS handshake each time, and
//! hundreds of those a second starve everyone else of CPU. A refused connection costs an
//! `accept` and a reset.
//!
//! A source is an IPv4 address, or the /64 prefix of an IPv6 address: a /64 is the usual
//! smallest allocation to one subscriber (RFC 6177 section 2, RFC 7934 section 6), so the
//! 2^64 addresses inside it would otherwise be 2^64 fresh identities for one attacker.
//!
//! The table of sources is bounded ([`MAX_SOURCES`]); when it is full of live entries a new
//! source is admitted untracked (fail open), so a spoofed-source flood cannot make the server
//! refuse everyone.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::config::AdmissionLimits;

/// Most sources tracked at once (about 64 bytes each).
pub(crate) const MAX_SOURCES: usize = 65_536;

/// Shortest time between two sweeps of a full table that freed nothing.
const SWEEP_BACKOFF: Duration = Duration::from_secs(1);

/// Where connections come from, as far as admission is concerned.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Source {
    /// An IPv4 address (IPv4-mapped IPv6 addresses included).
    V4(Ipv4Addr),
    /// The first 64 bits of an IPv6 address.
    V6Prefix(u64),
}

impl Source {
    pub(crate) fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self::V4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self::V4(v4),
                None => Self::V6Prefix((v6.to_bits() >> 64) as u64),
            },
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::V4(v4) => write!(f, "{v4}"),
            Self::V6Prefix(prefix) => {
                let ip = std::net::Ipv6Addr::from_bits(u128::from(*prefix) << 64);
                write!(f, "{ip}/64")
            }
        }
    }
}

/// Why a connection was refused at admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Denied {
    /// The source opened connections faster than `--per-ip-rate` allows.
    Rate,
    /// The source is in the penalty box.
    Penalty,
}

/// What a strike did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Struck {
    /// Counted; the source is still admitted.
    Counted,
    /// This strike put the source in the penalty box.
    Penalised,
    /// Not counted: the penalty box is off or the table is full.
    Ignored,
}

/// One source's bucket and strikes.
#[derive(Debug)]
struct Record {
    /// Connections the source may still open now (fractional: the bucket refills smoothly).
    tokens: f64,
    /// When `tokens` was last brought up to date.
    refilled: Instant,
    /// Strikes in the current window.
    strikes: u32,
    /// Start of the current strike window.
    window_start: Instant,
    /// Refused until then.
    penalised_until: Option<Instant>,
}

#[derive(Debug)]
struct Table {
    sources: HashMap<Source, Record>,
    /// When a sweep last failed to make room.
    full_since: Option<Instant>,
}

/// The admission state of one server.
#[derive(Debug)]
pub(crate) struct Admission {
    limits: AdmissionLimits,
    table: Mutex<Table>,
}

impl Admission {
    pub(crate) fn new(limits: AdmissionLimits) -> Self {
        Self {
            limits,
            table: Mutex::new(Table {
                sources: HashMap::new(),
                full_since: None,
            }),
        }
    }

    /// Admits a new connection from `ip` at `now`, or says why not. An admitted connection
    /// takes one token from its source's bucket.
    pub(crate) fn admit(&self, ip: IpAddr, now: Instant) -> Result<(), Denied> {
        if self.limits.rate == 0 && self.limits.strikes == 0 {
            return Ok(());
        }
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(record) = self.record(&mut table, Source::of(ip), now) else {
            return Ok(());
        };
        if let Some(until) = record.penalised_until {
            if now < until {
                return Err(Denied::Penalty);
            }
            record.penalised_until = None;
        }
        if self.limits.rate == 0 {
            return Ok(());
        }
        self.refill(record, now);
        if record.tokens < 1.0 {
            return Err(Denied::Rate);
        }
        record.tokens -= 1.0;
        Ok(())
    }

    /// Counts a strike against `ip`'s source: one of its connections broke the protocol or a
    /// deadline.
    pub(crate) fn strike(&self, ip: IpAddr, now: Instant) -> Struck {
        if self.limits.strikes == 0 {
            return Struck::Ignored;
        }
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(record) = self.record(&mut table, Source::of(ip), now) else {
            return Struck::Ignored;
        };
        if now.duration_since(record.window_start) > self.limits.window {
            record.window_start = now;
            record.strikes = 0;
        }
        record.strikes = record.strikes.saturating_add(1);
        if record.strikes < self.limits.strikes {
            return Struck::Counted;
        }
        record.strikes = 0;
        record.window_start = now;
        record.penalised_until = Some(now + self.limits.penalty);
        Struck::Penalised
    }

    /// The record of `source`, created when missing; `None` when the table is full.
    fn record<'t>(
        &self,
        table: &'t mut Table,
        source: Source,
        now: Instant,
    ) -> Option<&'t mut Record> {
        if !table.sources.contains_key(&source) && table.sources.len() >= MAX_SOURCES {
            if table
                .full_since
                .is_some_and(|since| now.duration_since(since) < SWEEP_BACKOFF)
            {
                return None;
            }
            table
                .sources
                .retain(|_, record| !self.forgettable(record, now));
            if table.sources.len() >= MAX_SOURCES {
                table.full_since = Some(now);
                return None;
            }
            table.full_since = None;
        }
        Some(table.sources.entry(source).or_insert_with(|| Record {
            tokens: self.burst(),
            refilled: now,
            strikes: 0,
            window_start: now,
            penalised_until: None,
        }))
    }

    /// Brings `record`'s bucket up to date.
    fn refill(&self, record: &mut Record, now: Instant) {
        let elapsed = now.duration_since(record.refilled).as_secs_f64();
        record.tokens = (record.tokens + elapsed * f64::from(self.limits.rate)).min(self.burst());
        record.refilled = now;
    }

    /// The bucket's size: at least one connection, or the rate limit would refuse everything.
    fn burst(&self) -> f64 {
        f64::from(self.limits.burst.max(1))
    }

    /// A record that says nothing a fresh one would not: full bucket, no strikes in a live
    /// window, no penalty running.
    fn forgettable(&self, record: &Record, now: Instant) -> bool {
        let bucket_full = self.limits.rate == 0
            || record.tokens
                + now.duration_since(record.refilled).as_secs_f64() * f64::from(self.limits.rate)
                >= self.burst();
        let strikes_over =
            record.strikes == 0 || now.duration_since(record.window_start) > self.limits.window;
        let penalty_over = record.penalised_until.is_none_or(|until| now >= until);
        bucket_full && strikes_over && penalty_over
    }

    /// Sources tracked now (for tests).
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .sources
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

    fn limits(rate: u32, burst: u32, strikes: u32) -> AdmissionLimits {
        AdmissionLimits {
            rate,
            burst,
            strikes,
            window: Duration::from_secs(10),
            penalty: Duration::from_secs(60),
        }
    }

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let admission = Admission::new(limits(10, 3, 0));
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(admission.admit(A, start), Ok(()));
        }
        assert_eq!(admission.admit(A, start), Err(Denied::Rate));
        // Another source has its own bucket.
        assert_eq!(admission.admit(B, start), Ok(()));
        // 10 per second: one token back after 100 ms, not before.
        assert_eq!(
            admission.admit(A, start + Duration::from_millis(50)),
            Err(Denied::Rate)
        );
        assert_eq!(
            admission.admit(A, start + Duration::from_millis(110)),
            Ok(())
        );
        // A long quiet spell refills to the burst, no further.
        let later = start + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(admission.admit(A, later), Ok(()));
        }
        assert_eq!(admission.admit(A, later), Err(Denied::Rate));
    }

    #[test]
    fn strikes_within_the_window_penalise_until_the_penalty_ends() {
        let admission = Admission::new(limits(0, 0, 3));
        let start = Instant::now();
        assert_eq!(admission.strike(A, start), Struck::Counted);
        assert_eq!(admission.strike(A, start), Struck::Counted);
        assert_eq!(admission.admit(A, start), Ok(()));
        assert_eq!(admission.strike(A, start), Struck::Penalised);
        assert_eq!(admission.admit(A, start), Err(Denied::Penalty));
        assert_eq!(admission.admit(B, start), Ok(()));
        let almost = start + Duration::from_secs(59);
        assert_eq!(admission.admit(A, almost), Err(Denied::Penalty));
        let after = start + Duration::from_secs(61);
        assert_eq!(admission.admit(A, after), Ok(()));
        // The penalty restarted the count.
        assert_eq!(admission.strike(A, after), Struck::Counted);
    }

    #[test]
    fn strikes_spread_wider_than_the_window_never_penalise() {
        let admission = Admission::new(limits(0, 0, 3));
        let start = Instant::now();
        for n in 0..10 {
            let at = start + Duration::from_secs(6 * n);
            assert_eq!(admission.strike(A, at), Struck::Counted, "strike {n}");
            assert_eq!(admission.admit(A, at), Ok(()));
        }
    }

    #[test]
    fn ipv6_sources_are_their_slash_64() {
        let one: IpAddr = "2001:db8:1:2::1".parse().expect("ip");
        let same: IpAddr = "2001:db8:1:2:ffff::9".parse().expect("ip");
        let other: IpAddr = "2001:db8:1:3::1".parse().expect("ip");
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().expect("ip");
        assert_eq!(Source::of(one), Source::of(same));
        assert_ne!(Source::of(one), Source::of(other));
        assert_eq!(Source::of(mapped), Source::of(A));
        assert_eq!(Source::of(one).to_string(), "2001:db8:1:2::/64");

        let admission = Admission::new(limits(0, 0, 2));
        let now = Instant::now();
        admission.strike(one, now);
        assert_eq!(admission.strike(same, now), Struck::Penalised);
        assert_eq!(admission.admit(one, now), Err(Denied::Penalty));
        assert_eq!(admission.admit(other, now), Ok(()));
    }

    #[test]
    fn a_full_table_sweeps_what_it_can_forget_and_otherwise_fails_open() {
        let admission = Admission::new(limits(1, 1, 0));
        let start = Instant::now();
        let ip = |n: u32| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n));
        for n in 0..u32::try_from(MAX_SOURCES).expect("fits") {
            assert_eq!(admission.admit(ip(n), start), Ok(()));
        }
        assert_eq!(admission.tracked(), MAX_SOURCES);
        // Every bucket is empty: nothing can be forgotten, the newcomer is admitted untracked.
        let newcomer = ip(1 << 20);
        assert_eq!(admission.admit(newcomer, start), Ok(()));
        assert_eq!(admission.admit(newcomer, start), Ok(()));
        assert_eq!(admission.tracked(), MAX_SOURCES);
        // Tracked sources are still limited.
        assert_eq!(admission.admit(ip(0), start), Err(Denied::Rate));
        // Once the buckets refill, the sweep forgets them and the newcomer gets a record.
        let later = start + Duration::from_secs(5);
        assert_eq!(admission.admit(newcomer, later), Ok(()));
        assert_eq!(admission.tracked(), 1);
        assert_eq!(admission.admit(newcomer, later), Err(Denied::Rate));
    }

    #[test]
    fn everything_off_admits_everything() {
        let admission = Admission::new(limits(0, 0, 0));
        let now = Instant::now();
        assert_eq!(admission.strike(A, now), Struck::Ignored);
        for _ in 0..1000 {
            assert_eq!(admission.admit(A, now), Ok(()));
        }
        assert_eq!(admission.tracked(), 0);
    }
}
