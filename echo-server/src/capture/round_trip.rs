//! What the echo measured of one connection's round trips, shared between the socket wrapper
//! that times the TLS flight and reads `TCP_INFO` (`timed.rs`), the HTTP/2 PING sender
//! (`pinger.rs`) and the handlers that answer and store it ([`exitvoice_schema::round_trip`]).

use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use exitvoice_schema::{Measures, RoundTrips, TcpRoundTrip};
use tokio::sync::Notify;

/// HTTP/2 PINGs sent back to back (each when the one before is answered) after the server's
/// SETTINGS (`pinger.rs`), and awaited by a full echo.
pub(crate) const QUICK_PINGS: u8 = 3;

/// Answered PINGs kept per connection, at most.
pub(crate) const MAX_PING_SAMPLES: usize = 8;

/// Longest a full echo waits for the answers to the connection's first PINGs.
const PING_WAIT_CAP: Duration = Duration::from_secs(2);
/// What a full echo waits at least, beyond twice the TLS flight per PING.
const PING_WAIT_FLOOR: Duration = Duration::from_millis(50);

/// One connection's round trips, filled in as they are measured.
#[derive(Debug, Default)]
pub(crate) struct RoundTripCell {
    measures: Mutex<Measures>,
    answered: Notify,
    /// The measures as first shown (an echo's answer or the stored row, whichever came
    /// first): both show these, so what a client was answered is what was stored.
    shown: OnceLock<RoundTrips>,
}

impl RoundTripCell {
    fn with<T>(&self, f: impl FnOnce(&mut Measures) -> T) -> T {
        f(&mut self.measures.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The kernel's estimate after the handshake and the TLS flight's round trip.
    pub(crate) fn handshake(&self, tcp: Option<TcpRoundTrip>, tls_us: Option<u32>) {
        self.with(|m| {
            m.tcp = tcp;
            m.tls_us = tls_us;
            if tcp.is_none() && m.tcp_absent.is_none() {
                m.tcp_absent = Some(
                    super::tcp_info::UNSUPPORTED.unwrap_or("the kernel gave no TCP_INFO estimate"),
                );
            }
        });
    }

    /// There is no transport round trip to the client, for `why`.
    pub(crate) fn no_transport(&self, why: &'static str) {
        self.with(|m| m.tcp_absent = Some(why));
    }

    /// The kernel's estimate as the connection ends.
    pub(crate) fn closed(&self, tcp: Option<TcpRoundTrip>) {
        self.with(|m| m.tcp_at_close = tcp);
    }

    /// A PING went out; its answer is awaited.
    pub(crate) fn ping_sent(&self) {
        self.with(|m| m.ping_unanswered = true);
    }

    /// A PING was answered after `rtt`.
    pub(crate) fn ping_answered(&self, rtt: Duration) {
        self.with(|m| {
            m.ping_unanswered = false;
            if m.pings_us.len() < MAX_PING_SAMPLES {
                m.pings_us.push(micros(rtt));
            }
        });
        self.answered.notify_waiters();
    }

    /// The measures so far, judged.
    pub(crate) fn judged(&self) -> RoundTrips {
        self.with(|m| RoundTrips::judge(m))
    }

    /// The measures as first shown: judged now if nothing was shown yet.
    pub(crate) fn shown(&self) -> RoundTrips {
        self.shown.get_or_init(|| self.judged()).clone()
    }

    /// Whether a PING is awaited and fewer than [`QUICK_PINGS`] were answered.
    pub(crate) fn awaits_first_ping(&self) -> bool {
        self.with(|m| m.ping_unanswered && m.pings_us.len() < usize::from(QUICK_PINGS))
    }

    /// Waits for the answers to the first [`QUICK_PINGS`] PINGs while one is awaited: in all at
    /// most twice the TLS flight plus [`PING_WAIT_FLOOR`] per PING (the flight bounds the
    /// path's round trip from above), never more than [`PING_WAIT_CAP`]. A client that does not
    /// answer is left `ping_unanswered`.
    pub(crate) async fn first_ping(&self) {
        let flight = self.with(|m| Duration::from_micros(u64::from(m.tls_us.unwrap_or(0))));
        let per_ping = flight * 2 + PING_WAIT_FLOOR;
        let until =
            tokio::time::Instant::now() + (per_ping * u32::from(QUICK_PINGS)).min(PING_WAIT_CAP);
        loop {
            let notified = self.answered.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self.awaits_first_ping() {
                return;
            }
            if tokio::time::timeout_at(until, notified).await.is_err() {
                return;
            }
        }
    }
}

/// `duration` in whole microseconds, saturating.
pub(crate) fn micros(duration: Duration) -> u32 {
    u32::try_from(duration.as_micros()).unwrap_or(u32::MAX)
}
