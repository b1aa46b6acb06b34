//! Capture attempts: each client's Initials, keyed by its address and first Destination Connection
//! ID, read until the ClientHello is complete, under the caps docs/quic.md ("The UDP listener")
//! gives with their reasons. Finished attempts wait a while for quinn's connection to claim them.
//!
//! Untrusted datagrams end in a counted error (`/healthz` `quic`), never a panic.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use exitvoice_protocol::quic::{self, ClientInitials, InitialPacket, QuicError, Version};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::socket::Datagram;
use crate::metrics::Metrics;

/// Attempts in flight, all sources together.
pub(crate) const MAX_ATTEMPTS: usize = 4096;
/// Attempts in flight from one IP address (Chrome opens one QUIC connection per origin).
pub(crate) const MAX_ATTEMPTS_PER_IP: usize = 32;
/// Bytes of datagrams one attempt may read (also the CRYPTO reassembly cap).
pub(crate) const MAX_ATTEMPT_BYTES: usize = 16 * 1024;
/// Time from an attempt's first Initial to giving up on its hello.
pub(crate) const ATTEMPT_DEADLINE: Duration = Duration::from_secs(3);
/// How long a finished attempt waits for its connection.
const UNCLAIMED_TTL: Duration = Duration::from_secs(30);
/// How often expired attempts are swept.
const SWEEP: Duration = Duration::from_millis(250);

/// An attempt's key: the client's address and its first DCID.
pub(crate) type Key = (SocketAddr, Vec<u8>);

/// What a client's Initials showed.
#[derive(Clone, Debug)]
pub(crate) struct InitialCapture {
    pub(crate) version: Version,
    pub(crate) first_dcid_len: usize,
    pub(crate) packets: Vec<InitialPacket>,
    pub(crate) datagram_sizes: Vec<usize>,
    /// The reassembled ClientHello handshake message, when complete.
    pub(crate) client_hello: Option<Vec<u8>>,
    /// Why the attempt ended without a hello (or after part of it).
    pub(crate) error: Option<String>,
}

impl InitialCapture {
    fn of(initials: &ClientInitials, error: Option<String>) -> Self {
        Self {
            version: initials.version(),
            first_dcid_len: initials.first_dcid().len(),
            packets: initials.packets().to_vec(),
            datagram_sizes: initials.datagram_sizes().to_vec(),
            client_hello: initials.client_hello().map(<[u8]>::to_vec),
            error,
        }
    }
}

struct Attempt {
    initials: ClientInitials,
    started: Instant,
    bytes: usize,
}

/// The metric key of a reader error.
fn error_key(error: &QuicError) -> &'static str {
    match error {
        QuicError::Truncated { .. } => "malformed_truncated",
        QuicError::NotLongHeader(_) => "malformed_not_long_header",
        QuicError::UnsupportedVersion(v) if Version(*v).is_grease() => "greased_version",
        QuicError::UnsupportedVersion(_) => "unsupported_version",
        QuicError::NotInitial(_) => "not_initial",
        QuicError::ConnectionIdLength(_) => "malformed_connection_id",
        QuicError::DatagramTooShort(_) => "initial_under_1200",
        QuicError::LengthBeyondDatagram { .. } => "malformed_length",
        QuicError::TooShortToSample => "malformed_too_short_to_sample",
        QuicError::Decrypt => "malformed_decrypt",
        QuicError::UnexpectedFrame(_) => "malformed_frame",
        QuicError::CryptoBeyondCap { .. } | QuicError::TooManyPackets(_) => "attempt_capped",
        QuicError::CryptoConflict(_) => "malformed_crypto_conflict",
        QuicError::NotClientHello(_) => "malformed_not_client_hello",
    }
}

/// Every attempt of one listener.
#[derive(Default)]
pub(crate) struct Attempts {
    open: HashMap<Key, Attempt>,
    per_ip: HashMap<IpAddr, usize>,
    finished: HashMap<Key, InitialCapture>,
    finished_order: VecDeque<(Key, Instant)>,
    /// Addresses whose attempt ended lately: their later Initials (ACKs, sent to the server's
    /// connection id once they know it, RFC 9000 section 7.2) are no new attempts.
    recent: HashMap<SocketAddr, Instant>,
}

impl Attempts {
    /// Reads one copied datagram.
    pub(crate) fn datagram(&mut self, datagram: &Datagram, metrics: &Metrics) {
        let dcid = match quic::initial_dcid(&datagram.bytes) {
            Ok(dcid) => dcid,
            Err(error) => {
                metrics.quic(error_key(&error));
                return;
            }
        };
        let key = (datagram.from, dcid.to_vec());
        if self.finished.contains_key(&key) {
            return;
        }
        if !self.open.contains_key(&key) && self.recent.contains_key(&datagram.from) {
            metrics.quic("later_initials");
            return;
        }
        if let Some(attempt) = self.open.get_mut(&key) {
            attempt.bytes += datagram.bytes.len();
            let result = if attempt.bytes > MAX_ATTEMPT_BYTES {
                Err(QuicError::TooManyPackets(quic::MAX_INITIAL_PACKETS))
            } else {
                attempt.initials.push(&datagram.bytes)
            };
            match result {
                Err(error) => {
                    metrics.quic(error_key(&error));
                    self.finish(key, Some(error.to_string()), datagram.at);
                }
                Ok(()) if attempt.initials.client_hello().is_some() => {
                    metrics.quic("hellos");
                    self.finish(key, None, datagram.at);
                }
                Ok(()) => {}
            }
            return;
        }
        if self.open.len() >= MAX_ATTEMPTS {
            metrics.quic("attempts_refused_total");
            return;
        }
        let from_ip = self.per_ip.get(&datagram.from.ip()).copied().unwrap_or(0);
        if from_ip >= MAX_ATTEMPTS_PER_IP {
            metrics.quic("attempts_refused_per_ip");
            return;
        }
        match ClientInitials::start(&datagram.bytes) {
            Err(error) => metrics.quic(error_key(&error)),
            Ok(initials) => {
                metrics.quic("attempts");
                let complete = initials.client_hello().is_some();
                self.open.insert(
                    key.clone(),
                    Attempt {
                        initials,
                        started: datagram.at,
                        bytes: datagram.bytes.len(),
                    },
                );
                *self.per_ip.entry(datagram.from.ip()).or_insert(0) += 1;
                if complete {
                    metrics.quic("hellos");
                    self.finish(key, None, datagram.at);
                }
            }
        }
    }

    /// Moves an open attempt to the finished ones.
    fn finish(&mut self, key: Key, error: Option<String>, now: Instant) {
        let Some(attempt) = self.open.remove(&key) else {
            return;
        };
        if let Some(count) = self.per_ip.get_mut(&key.0.ip()) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.per_ip.remove(&key.0.ip());
            }
        }
        if self.finished.len() >= MAX_ATTEMPTS {
            if let Some((oldest, _)) = self.finished_order.pop_front() {
                self.finished.remove(&oldest);
            }
        }
        self.finished
            .insert(key.clone(), InitialCapture::of(&attempt.initials, error));
        if self.recent.len() < 2 * MAX_ATTEMPTS {
            self.recent.insert(key.0, now);
        }
        self.finished_order.push_back((key, now));
    }

    /// Ends attempts past the deadline (their partial capture is kept, marked incomplete) and
    /// forgets finished ones no connection claimed.
    pub(crate) fn sweep(&mut self, now: Instant, metrics: &Metrics) {
        let late: Vec<Key> = self
            .open
            .iter()
            .filter(|(_, a)| now.duration_since(a.started) >= ATTEMPT_DEADLINE)
            .map(|(key, _)| key.clone())
            .collect();
        for key in late {
            metrics.quic("attempts_expired");
            self.finish(key, Some("incomplete: deadline passed".to_owned()), now);
        }
        self.recent
            .retain(|_, at| now.duration_since(*at) < UNCLAIMED_TTL);
        while let Some((key, at)) = self.finished_order.front() {
            if now.duration_since(*at) < UNCLAIMED_TTL {
                break;
            }
            self.finished.remove(key);
            self.finished_order.pop_front();
        }
    }

    /// Whether a sweep has nothing to end or forget: no attempt open, finished or recent.
    fn is_idle(&self) -> bool {
        self.open.is_empty() && self.finished_order.is_empty() && self.recent.is_empty()
    }

    /// Hands a finished attempt to its connection.
    pub(crate) fn claim(&mut self, key: &Key) -> Option<InitialCapture> {
        self.finished.remove(key)
    }

    /// Attempts in flight.
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.open.len()
    }
}

/// Reads the tap's copies into `attempts` until the socket is gone, sweeping them while there
/// is anything to sweep (a server nobody reaches over QUIC does not wake for it).
pub(crate) async fn run(
    attempts: Arc<Mutex<Attempts>>,
    mut copies: mpsc::Receiver<Datagram>,
    metrics: Arc<Metrics>,
) {
    let mut sweep = tokio::time::interval(SWEEP);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let sweeping = !attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_idle();
        tokio::select! {
            copy = copies.recv() => {
                let Some(datagram) = copy else { return };
                attempts
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .datagram(&datagram, &metrics);
            }
            _ = sweep.tick(), if sweeping => {
                attempts
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .sweep(Instant::now(), &metrics);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A datagram that parses as a v1 Initial header with an 8-byte DCID but does not decrypt.
    fn garbage_initial(dcid: u8) -> Vec<u8> {
        let mut d = vec![0xc3, 0, 0, 0, 1, 8];
        d.extend([dcid; 8]);
        d.push(0); // SCID length
        d.push(0); // token length
        d.extend([0x44, 0x9e]); // Length 1182: to the end of the datagram
        d.resize(1200, 0x55);
        d
    }

    fn copy(port: u16, bytes: Vec<u8>) -> Datagram {
        Datagram {
            from: SocketAddr::from(([127, 0, 0, 1], port)),
            bytes,
            at: Instant::now(),
        }
    }

    /// RFC 9001 Appendix A.2's client Initial: a whole ClientHello in one datagram (the vector
    /// the protocol crate's tests read, `protocol/tests/data/quic/SOURCE.md`).
    fn rfc_initial() -> Vec<u8> {
        let text =
            include_str!("../../../../protocol/tests/data/quic/rfc9001-a2-client-initial.hex");
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    /// The sweep runs while there is something to forget, though it sleeps while there is
    /// nothing: a finished attempt no connection claimed is forgotten after its time.
    #[tokio::test(start_paused = true)]
    async fn an_unclaimed_attempt_is_swept_after_its_time() {
        let attempts = Arc::new(Mutex::new(Attempts::default()));
        let metrics = Arc::new(Metrics::default());
        let (copies, received) = mpsc::channel(4);
        tokio::spawn(run(Arc::clone(&attempts), received, Arc::clone(&metrics)));
        // Idle for a while first: the sweep, not armed then, must still start after this.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let datagram = copy(1, rfc_initial());
        let key = (
            datagram.from,
            quic::initial_dcid(&datagram.bytes).unwrap().to_vec(),
        );
        copies.send(datagram).await.unwrap();
        tokio::time::sleep(UNCLAIMED_TTL / 2).await;
        assert!(!attempts.lock().unwrap().is_idle(), "finished and waiting");
        tokio::time::sleep(UNCLAIMED_TTL).await;
        let mut attempts = attempts.lock().unwrap();
        assert!(attempts.is_idle(), "forgotten by the sweep");
        assert!(attempts.claim(&key).is_none());
        assert_eq!(metrics.report().quic.get("hellos"), Some(&1));
    }

    #[test]
    fn garbage_is_counted_and_keeps_no_state() {
        let metrics = Metrics::default();
        let mut attempts = Attempts::default();
        attempts.datagram(&copy(1, garbage_initial(7)), &metrics);
        attempts.datagram(&copy(1, vec![0xc0; 1200]), &metrics);
        let mut grease = garbage_initial(7);
        grease[1..5].copy_from_slice(&[0x1a, 0x2a, 0x3a, 0x4a]);
        attempts.datagram(&copy(1, grease), &metrics);
        attempts.datagram(&copy(1, garbage_initial(7)[..40].to_vec()), &metrics);
        let mut handshake = garbage_initial(7);
        handshake[0] = 0xe3;
        attempts.datagram(&copy(1, handshake), &metrics);
        assert_eq!(attempts.in_flight(), 0);
        let counted = metrics.report().quic;
        assert_eq!(counted.get("malformed_decrypt"), Some(&1), "{counted:?}");
        assert_eq!(counted.get("unsupported_version"), Some(&1), "{counted:?}");
        assert_eq!(counted.get("greased_version"), Some(&1), "{counted:?}");
        assert_eq!(counted.get("malformed_length"), Some(&1), "{counted:?}");
        assert_eq!(counted.get("not_initial"), Some(&1), "{counted:?}");
    }
}
