//! The h3 downgrade ledger (docs/quic.md, "The h3 downgrade ledger"): per client identity — the
//! client's IP and the TLS voice of its TCP connections — its TCP visits after the server told it,
//! with `alt-svc`, that the origin also speaks HTTP/3, and whether an HTTP/3 request from it
//! followed. A client that keeps coming back over TCP and never over HTTP/3 is `never_tries_h3`:
//! browsers behind HTTP CONNECT or SOCKS proxies never try QUIC (docs/quic.md, "How clients
//! behave"), and a path that drops UDP looks the same.
//!
//! An HTTP/3 request matches an identity by its probe token, or else by its source IP within
//! `ma` (86,400 s) of that identity's first `alt-svc`. Kept in memory, bounded; times are Unix
//! milliseconds given by the caller, so the rules are tested without a clock.
//!
//! A persisting ledger ([`Ledger::new`], under `--store-peer-ip full`) remembers which
//! identities changed; the writer takes them ([`Ledger::take_changed`]) into its next
//! transaction, and a restarted server reads them back ([`Ledger::restore`]).

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

/// `ma` of the `alt-svc` we send, in milliseconds (RFC 7838 section 3.1).
pub const ALT_SVC_MAX_AGE_MS: i64 = 86_400_000;
/// When a client that keeps coming back over TCP `never_tries_h3` (docs/quic.md, the verdict
/// table): `returns` TCP connections after the first `alt-svc`, each at least `spacing_ms` after
/// the one counted before it (Chrome races QUIC only for a new connection, so quick reloads say
/// little), the last at least `span_ms` after that `alt-svc`, all within `ma`, and no QUIC attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeverRule {
    /// Spaced TCP returns needed.
    pub returns: u32,
    /// Least time between two counted returns (the first counts from the `alt-svc`).
    pub spacing_ms: i64,
    /// Least time from the first `alt-svc` to the last counted return.
    pub span_ms: i64,
}

impl Default for NeverRule {
    /// The documented rule: 3 returns, 2 s apart, over 60 s.
    fn default() -> Self {
        Self {
            returns: 3,
            spacing_ms: 2_000,
            span_ms: 60_000,
        }
    }
}
/// Identities kept; the oldest is forgotten past this (each shard keeps its share, so the bound
/// holds over all of them and an identity evicted is the oldest of its shard).
pub const MAX_IDENTITIES: usize = 65_536;
/// Shards of the book, each behind its own lock: a TCP request locks only its identity's.
const SHARDS: usize = 16;
/// Identities kept per shard.
const SHARD_IDENTITIES: usize = MAX_IDENTITIES / SHARDS;

/// One client identity, with its hash (made once, by the ledger's hasher): the maps hash it
/// no further.
#[derive(Clone, Debug)]
struct Identity {
    hash: u64,
    ip: IpAddr,
    tls_voice_id: String,
}

/// An identity as a map key: owned ([`Identity`]) or borrowed from a request ([`Probe`]), so a
/// request of a known identity finds it without copying its voice.
trait Key {
    fn parts(&self) -> (u64, IpAddr, &str);
}

impl Key for Identity {
    fn parts(&self) -> (u64, IpAddr, &str) {
        (self.hash, self.ip, &self.tls_voice_id)
    }
}

/// An identity borrowed from a request.
struct Probe<'a> {
    hash: u64,
    ip: IpAddr,
    tls_voice_id: &'a str,
}

impl Key for Probe<'_> {
    fn parts(&self) -> (u64, IpAddr, &str) {
        (self.hash, self.ip, self.tls_voice_id)
    }
}

impl<'a> Borrow<dyn Key + 'a> for Identity {
    fn borrow(&self) -> &(dyn Key + 'a) {
        self
    }
}

impl Hash for dyn Key + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.parts().0);
    }
}

impl PartialEq for dyn Key + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn Key + '_ {}

impl Hash for Identity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self as &dyn Key).hash(state);
    }
}

impl PartialEq for Identity {
    fn eq(&self, other: &Self) -> bool {
        (self as &dyn Key) == (other as &dyn Key)
    }
}

impl Eq for Identity {}

/// The hasher of the book's maps: an [`Identity`] carries its hash already.
#[derive(Clone, Copy, Debug, Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; anything else still hashes.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Prehash = BuildHasherDefault<Prehashed>;

/// What the ledger knows of one identity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The client's IP over TCP.
    pub client_ip: IpAddr,
    /// The TLS voice of its TCP connections.
    pub tls_voice_id: String,
    /// Probe tokens its TCP requests carried, first seen first.
    pub tokens: Vec<String>,
    /// First TCP request.
    pub first_tcp_ms: i64,
    /// Last TCP request.
    pub last_tcp_ms: i64,
    /// TCP requests seen.
    pub tcp_requests: u32,
    /// Distinct TCP connections seen.
    pub tcp_connections: u32,
    /// When the first `alt-svc` went to it (`None` with QUIC off).
    pub alt_svc_first_ms: Option<i64>,
    /// TCP connections opened after the first `alt-svc`.
    pub tcp_connections_after_alt_svc: u32,
    /// Of those, the ones at least the rule's spacing after the one counted before.
    #[serde(default)]
    pub spaced_returns: u32,
    /// The last spaced return.
    #[serde(default)]
    pub last_spaced_return_ms: Option<i64>,
    /// The first QUIC connection attempt from its IP after `alt-svc` (a client Initial that
    /// quinn took as a new connection).
    pub first_quic_attempt_ms: Option<i64>,
    /// QUIC connection attempts from its IP after `alt-svc`.
    pub quic_attempts: u32,
    /// Its first HTTP/3 request.
    pub first_h3_ms: Option<i64>,
    /// HTTP/3 requests matched to it.
    pub h3_requests: u32,
    /// The source IP of its HTTP/3 requests (may differ from `client_ip`).
    pub quic_src_ip: Option<IpAddr>,
    /// The QUIC voice of its first HTTP/3 connection.
    pub quic_voice_id: Option<String>,
    /// The last TCP connection seen, to count distinct ones.
    #[serde(skip)]
    last_conn_id: String,
    /// When the entry last changed.
    #[serde(default)]
    pub updated_ms: i64,
}

/// The ledger's verdict on an identity at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// `alt-svc` sent; not enough TCP returns yet.
    Pending,
    /// A QUIC connection attempt came from its IP after `alt-svc`, but no HTTP/3 request (yet).
    AttemptedH3,
    /// An HTTP/3 request came from its IP (or with its token).
    H3Ok,
    /// An HTTP/3 request carried its token from another IP: UDP leaves by another path.
    QuicElsewhere,
    /// Spaced TCP returns after the first `alt-svc` as the [`NeverRule`] says, within `ma`,
    /// and no QUIC attempt.
    NeverTriesH3,
    /// `ma` passed without enough evidence, or no `alt-svc` was ever sent (QUIC off).
    Expired,
}

impl Entry {
    /// The verdict at `now_ms` under `rule`, and why.
    pub fn verdict(&self, now_ms: i64, rule: &NeverRule) -> (Verdict, String) {
        if let Some(src) = self.quic_src_ip {
            if src != self.client_ip {
                return (
                    Verdict::QuicElsewhere,
                    format!(
                        "HTTP/3 with its token came from {src}, TCP from {}",
                        self.client_ip
                    ),
                );
            }
            return (
                Verdict::H3Ok,
                format!("{} HTTP/3 request(s) after alt-svc", self.h3_requests),
            );
        }
        if let Some(at) = self.first_quic_attempt_ms {
            let after = self.alt_svc_first_ms.map_or(0, |sent| at - sent);
            return (
                Verdict::AttemptedH3,
                format!(
                    "{} QUIC attempt(s), the first {after} ms after alt-svc",
                    self.quic_attempts
                ),
            );
        }
        let Some(alt_svc) = self.alt_svc_first_ms else {
            return (
                Verdict::Expired,
                "no alt-svc was sent (QUIC off)".to_owned(),
            );
        };
        let span = self.last_spaced_return_ms.map_or(0, |last| last - alt_svc);
        if self.spaced_returns >= rule.returns && span >= rule.span_ms {
            return (
                Verdict::NeverTriesH3,
                format!(
                    "{} TCP connections after alt-svc ({} spaced, over {} s), no QUIC attempt",
                    self.tcp_connections_after_alt_svc,
                    self.spaced_returns,
                    span / 1_000
                ),
            );
        }
        if now_ms - alt_svc > ALT_SVC_MAX_AGE_MS {
            return (Verdict::Expired, "alt-svc's max age passed".to_owned());
        }
        (
            Verdict::Pending,
            format!(
                "{} of {} spaced TCP returns after alt-svc, over {} of {} s",
                self.spaced_returns,
                rule.returns,
                span / 1_000,
                rule.span_ms / 1_000
            ),
        )
    }
}

/// A TCP request, as the ledger needs it.
#[derive(Clone, Copy, Debug)]
pub struct TcpVisit<'a> {
    /// The client's IP.
    pub ip: IpAddr,
    /// The TLS voice of its connection.
    pub tls_voice_id: &'a str,
    /// Its connection's id.
    pub conn_id: &'a str,
    /// Its probe token.
    pub token: Option<&'a str>,
    /// When, Unix ms.
    pub time_ms: i64,
    /// Whether its answer carries `alt-svc`.
    pub alt_svc: bool,
}

/// An HTTP/3 request, as the ledger needs it.
#[derive(Clone, Copy, Debug)]
pub struct H3Visit<'a> {
    /// The client's IP.
    pub ip: IpAddr,
    /// Its probe token.
    pub token: Option<&'a str>,
    /// The QUIC voice of its connection.
    pub quic_voice_id: Option<&'a str>,
    /// When, Unix ms.
    pub time_ms: i64,
}

/// An identity's entry, and when it came into the book (the order [`Ledger::by_token`] answers in).
#[derive(Debug)]
struct Slot {
    since: u64,
    entry: Entry,
    /// Changed since the writer last took the changes: listed in [`Book::changed`].
    changed: bool,
}

impl Slot {
    /// Notes that the entry, `identity`'s, changed, when the ledger persists: it is listed in
    /// `changed` once until the writer takes it, and the flag spares a lookup there.
    fn touch(
        &mut self,
        persist: bool,
        identity: &dyn Key,
        changed: &mut HashSet<Identity, Prehash>,
    ) {
        if persist && !self.changed {
            self.changed = true;
            let (hash, ip, tls_voice_id) = identity.parts();
            changed.insert(Identity {
                hash,
                ip,
                tls_voice_id: tls_voice_id.to_owned(),
            });
        }
    }
}

/// One shard of the book.
#[derive(Debug, Default)]
struct Book {
    entries: HashMap<Identity, Slot, Prehash>,
    order: VecDeque<Identity>,
    /// Identities changed since the writer last took them (persisting ledgers only).
    changed: HashSet<Identity, Prehash>,
}

impl Book {
    /// Makes room for one more identity, not in the book yet: forgets the shard's oldest at
    /// its bound.
    fn make_room(&mut self, identity: &Identity) {
        if self.entries.len() >= SHARD_IDENTITIES {
            if let Some(oldest) = self.order.pop_front() {
                self.entries.remove(&oldest);
                self.changed.remove(&oldest);
            }
        }
        self.order.push_back(identity.clone());
    }
}

/// The ledger of one server.
#[derive(Debug, Default)]
pub struct Ledger {
    /// The book, sharded by the identity's hash.
    books: [Mutex<Book>; SHARDS],
    /// Hashes identities (keyed per server, as `HashMap`'s default).
    hasher: RandomState,
    /// Entries put in so far: the next entry's `since`.
    added: AtomicU64,
    persist: bool,
    rule: NeverRule,
}

/// A shard's lock (a panic while holding it leaves counts, which stay usable).
fn lock(book: &Mutex<Book>) -> MutexGuard<'_, Book> {
    book.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Ledger {
    /// A ledger judging by `rule`, whose changes the writer stores when `persist` is set.
    pub fn new(rule: NeverRule, persist: bool) -> Self {
        Self {
            persist,
            rule,
            ..Self::default()
        }
    }

    /// Its `never_tries_h3` rule.
    pub fn rule(&self) -> &NeverRule {
        &self.rule
    }

    /// The identity of `ip` and `tls_voice_id`, borrowed, and its shard.
    fn probe<'a>(&self, ip: IpAddr, tls_voice_id: &'a str) -> (Probe<'a>, &Mutex<Book>) {
        let hash = self.hasher.hash_one((ip, tls_voice_id));
        // Bits the maps do not use for a bucket (the low ones) or a tag (the top seven).
        let shard = (hash >> 32) as usize % SHARDS;
        let probe = Probe {
            hash,
            ip,
            tls_voice_id,
        };
        (probe, &self.books[shard])
    }

    /// Puts `entry` in its shard as `identity`'s (kept in place when it was there), making room.
    fn put(&self, book: &mut Book, identity: Identity, entry: Entry) {
        if let Some(slot) = book.entries.get_mut(&identity as &dyn Key) {
            slot.entry = entry;
            return;
        }
        book.make_room(&identity);
        let since = self.added.fetch_add(1, Ordering::Relaxed);
        book.entries.insert(
            identity,
            Slot {
                since,
                entry,
                changed: false,
            },
        );
    }

    /// Puts stored entries back (at start), oldest change first, within the bound.
    pub fn restore(&self, entries: impl IntoIterator<Item = Entry>) {
        for entry in entries {
            let (probe, book) = self.probe(entry.client_ip, &entry.tls_voice_id);
            let identity = Identity {
                hash: probe.hash,
                ip: entry.client_ip,
                tls_voice_id: entry.tls_voice_id.clone(),
            };
            self.put(&mut lock(book), identity, entry);
        }
    }

    /// The entries that changed since the last call (none unless persisting), each once.
    pub fn take_changed(&self) -> Vec<Entry> {
        if !self.persist {
            return Vec::new();
        }
        let mut changed = Vec::new();
        for book in &self.books {
            let book = &mut *lock(book);
            for identity in std::mem::take(&mut book.changed) {
                if let Some(slot) = book.entries.get_mut(&identity) {
                    slot.changed = false;
                    changed.push(slot.entry.clone());
                }
            }
        }
        changed
    }

    /// Notes a TCP request. Only its identity's shard is locked, and an identity already in
    /// the book is found (once) and updated without an allocation.
    pub fn tcp(&self, visit: TcpVisit<'_>) {
        let (probe, book) = self.probe(visit.ip, visit.tls_voice_id);
        let mut guard = lock(book);
        let book = &mut *guard;
        if let Some(slot) = book.entries.get_mut(&probe as &dyn Key) {
            self.count_tcp(&mut slot.entry, &visit);
            slot.touch(self.persist, &probe, &mut book.changed);
            return;
        }
        let identity = Identity {
            hash: probe.hash,
            ip: visit.ip,
            tls_voice_id: visit.tls_voice_id.to_owned(),
        };
        let mut entry = Entry {
            client_ip: visit.ip,
            tls_voice_id: visit.tls_voice_id.to_owned(),
            tokens: Vec::new(),
            first_tcp_ms: visit.time_ms,
            last_tcp_ms: visit.time_ms,
            tcp_requests: 0,
            tcp_connections: 0,
            alt_svc_first_ms: None,
            tcp_connections_after_alt_svc: 0,
            spaced_returns: 0,
            last_spaced_return_ms: None,
            first_quic_attempt_ms: None,
            quic_attempts: 0,
            first_h3_ms: None,
            h3_requests: 0,
            quic_src_ip: None,
            quic_voice_id: None,
            last_conn_id: String::new(),
            updated_ms: visit.time_ms,
        };
        self.count_tcp(&mut entry, &visit);
        self.put(book, identity, entry);
        if let Some(slot) = book.entries.get_mut(&probe as &dyn Key) {
            slot.touch(self.persist, &probe, &mut book.changed);
        }
    }

    /// Counts a TCP request of `entry`'s identity.
    fn count_tcp(&self, entry: &mut Entry, visit: &TcpVisit<'_>) {
        entry.last_tcp_ms = visit.time_ms;
        entry.updated_ms = visit.time_ms;
        entry.tcp_requests += 1;
        if entry.last_conn_id != visit.conn_id {
            entry.tcp_connections += 1;
            if let Some(alt_svc) = entry.alt_svc_first_ms {
                entry.tcp_connections_after_alt_svc += 1;
                let since = visit.time_ms - entry.last_spaced_return_ms.unwrap_or(alt_svc);
                if since >= self.rule.spacing_ms {
                    entry.spaced_returns += 1;
                    entry.last_spaced_return_ms = Some(visit.time_ms);
                }
            }
            // In place: the id's buffer is reused.
            entry.last_conn_id.clear();
            entry.last_conn_id.push_str(visit.conn_id);
        }
        if visit.alt_svc && entry.alt_svc_first_ms.is_none() {
            entry.alt_svc_first_ms = Some(visit.time_ms);
        }
        if let Some(token) = visit.token {
            if !entry.tokens.iter().any(|t| t == token) && entry.tokens.len() < 16 {
                entry.tokens.push(token.to_owned());
            }
        }
    }

    /// Applies `change` to every entry (shard by shard) and notes those it reports changed.
    fn update_all(&self, mut change: impl FnMut(&mut Entry) -> bool) {
        for book in &self.books {
            let Book {
                entries, changed, ..
            } = &mut *lock(book);
            for (identity, slot) in entries.iter_mut() {
                if change(&mut slot.entry) {
                    slot.touch(self.persist, identity, changed);
                }
            }
        }
    }

    /// Notes an HTTP/3 request: one with a token matches the identities whose TCP requests
    /// carried it, and no other (a token no TCP request carried is another client's probe, the
    /// auditor's own QUIC probe among them); one without matches the identities of its IP that
    /// were sent `alt-svc` within `ma`.
    pub fn h3(&self, visit: H3Visit<'_>) {
        self.update_all(|entry| {
            let matches = if let Some(token) = visit.token {
                entry.tokens.iter().any(|t| t == token)
            } else {
                entry.client_ip == visit.ip
                    && entry
                        .alt_svc_first_ms
                        .is_some_and(|at| visit.time_ms - at <= ALT_SVC_MAX_AGE_MS)
            };
            if matches {
                entry.h3_requests += 1;
                entry.first_h3_ms.get_or_insert(visit.time_ms);
                entry.quic_src_ip.get_or_insert(visit.ip);
                if entry.quic_voice_id.is_none() {
                    entry.quic_voice_id = visit.quic_voice_id.map(str::to_owned);
                }
                entry.updated_ms = visit.time_ms;
            }
            matches
        });
    }

    /// Notes a QUIC connection attempt from `ip` that carried no HTTP/3 request (its handshake
    /// failed, or it ended idle): it counts for the identities of that IP that were sent
    /// `alt-svc` before it, within `ma` (an Initial carries no probe token). A connection that
    /// carried requests is judged by them ([`Ledger::h3`]).
    pub fn quic_attempt(&self, ip: IpAddr, time_ms: i64) {
        self.update_all(|entry| {
            let after_alt_svc = entry
                .alt_svc_first_ms
                .is_some_and(|at| (0..=ALT_SVC_MAX_AGE_MS).contains(&(time_ms - at)));
            let matches = entry.client_ip == ip && after_alt_svc;
            if matches {
                entry.quic_attempts += 1;
                entry.first_quic_attempt_ms.get_or_insert(time_ms);
                entry.updated_ms = time_ms;
            }
            matches
        });
    }

    /// The identities whose TCP requests carried `token`, in the order they came into the book.
    pub fn by_token(&self, token: &str) -> Vec<Entry> {
        let mut found = Vec::new();
        for book in &self.books {
            let book = lock(book);
            found.extend(
                book.entries
                    .values()
                    .filter(|slot| slot.entry.tokens.iter().any(|t| t == token))
                    .map(|slot| (slot.since, slot.entry.clone())),
            );
        }
        found.sort_unstable_by_key(|(since, _)| *since);
        found.into_iter().map(|(_, entry)| entry).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp<'a>(conn_id: &'a str, time_ms: i64) -> TcpVisit<'a> {
        TcpVisit {
            ip: IpAddr::from([192, 0, 2, 1]),
            tls_voice_id: "tlsv2_chrome",
            conn_id,
            token: Some("tok"),
            time_ms,
            alt_svc: true,
        }
    }

    #[test]
    fn a_persisting_ledger_hands_each_change_once_and_restores() {
        let plain = Ledger::default();
        plain.tcp(tcp("c1", 0));
        assert!(plain.take_changed().is_empty());

        let ledger = Ledger::new(NeverRule::default(), true);
        ledger.tcp(tcp("c1", 0));
        ledger.tcp(tcp("c2", 10));
        let changed = ledger.take_changed();
        assert_eq!(changed.len(), 1);
        assert_eq!((changed[0].tcp_connections, changed[0].updated_ms), (2, 10));
        assert!(ledger.take_changed().is_empty());
        ledger.quic_attempt(IpAddr::from([192, 0, 2, 1]), 20);
        assert_eq!(ledger.take_changed()[0].quic_attempts, 1);
        // Taken, then changed again by a request: listed again, once.
        ledger.tcp(tcp("c2", 25));
        ledger.tcp(tcp("c2", 26));
        let again = ledger.take_changed();
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].tcp_requests, again[0].updated_ms), (4, 26));
        assert!(ledger.take_changed().is_empty());

        // Through JSON, as the store keeps it, into a fresh server's ledger.
        let json = serde_json::to_string(&ledger.by_token("tok")[0]).unwrap();
        let restored = Ledger::new(NeverRule::default(), true);
        restored.restore([serde_json::from_str::<Entry>(&json).unwrap()]);
        assert!(restored.take_changed().is_empty());
        let entry = &restored.by_token("tok")[0];
        assert_eq!(serde_json::to_string(entry).unwrap(), json);
        assert_eq!(
            entry.verdict(30, &NeverRule::default()).0,
            Verdict::AttemptedH3
        );
        // The next TCP connection counts as a new one after the restart.
        restored.tcp(tcp("c3", 40));
        assert_eq!(restored.by_token("tok")[0].tcp_connections, 3);
    }

    #[test]
    fn spaced_tcp_returns_over_a_minute_without_quic_are_never_tries_h3() {
        let rule = NeverRule::default();
        let ledger = Ledger::default();
        ledger.tcp(tcp("c1", 0));
        ledger.tcp(tcp("c1", 10));
        assert_eq!(
            ledger.by_token("tok")[0].verdict(20, &rule).0,
            Verdict::Pending
        );
        // Quick reloads: three new connections within two seconds count once.
        for (conn, at) in [("c2", 2_000), ("c3", 2_500), ("c4", 3_000)] {
            ledger.tcp(tcp(conn, at));
        }
        let entry = &ledger.by_token("tok")[0];
        assert_eq!(
            (entry.tcp_connections_after_alt_svc, entry.spaced_returns),
            (3, 1)
        );
        assert_eq!(entry.verdict(3_000, &rule).0, Verdict::Pending);
        // Three spaced returns, but within 60 s of alt-svc: not yet.
        ledger.tcp(tcp("c5", 30_000));
        ledger.tcp(tcp("c6", 45_000));
        let entry = &ledger.by_token("tok")[0];
        assert_eq!(entry.spaced_returns, 3);
        let (verdict, why) = entry.verdict(45_000, &rule);
        assert_eq!(verdict, Verdict::Pending);
        assert_eq!(
            why,
            "3 of 3 spaced TCP returns after alt-svc, over 45 of 60 s"
        );
        ledger.tcp(tcp("c7", 61_000));
        let entry = &ledger.by_token("tok")[0];
        assert_eq!(entry.tcp_connections, 7);
        assert_eq!(entry.verdict(61_000, &rule).0, Verdict::NeverTriesH3);
        // A rule without spacing or span says it after three returns, however quick.
        let quick = NeverRule {
            spacing_ms: 0,
            span_ms: 0,
            ..rule
        };
        let eager = Ledger::new(quick, false);
        for (conn, at) in [("c1", 0), ("c2", 1), ("c3", 2), ("c4", 3)] {
            eager.tcp(tcp(conn, at));
        }
        assert_eq!(
            eager.by_token("tok")[0].verdict(4, &quick).0,
            Verdict::NeverTriesH3
        );
    }

    #[test]
    fn h3_by_ip_or_token_decides_the_verdict() {
        let ledger = Ledger::default();
        ledger.tcp(tcp("c1", 0));
        ledger.h3(H3Visit {
            ip: IpAddr::from([192, 0, 2, 1]),
            token: None,
            quic_voice_id: Some("quicv2_x"),
            time_ms: 500,
        });
        let entry = &ledger.by_token("tok")[0];
        assert_eq!(entry.verdict(600, &NeverRule::default()).0, Verdict::H3Ok);

        assert_eq!(entry.quic_voice_id.as_deref(), Some("quicv2_x"));

        let attempted = Ledger::default();
        attempted.tcp(tcp("c1", 0));
        attempted.quic_attempt(IpAddr::from([198, 51, 100, 7]), 100);
        assert_eq!(
            attempted.by_token("tok")[0]
                .verdict(200, &NeverRule::default())
                .0,
            Verdict::Pending
        );
        attempted.quic_attempt(IpAddr::from([192, 0, 2, 1]), 300);
        let tried = &attempted.by_token("tok")[0];
        assert_eq!(
            tried.verdict(400, &NeverRule::default()).0,
            Verdict::AttemptedH3
        );
        assert_eq!(
            tried.verdict(400, &NeverRule::default()).1,
            "1 QUIC attempt(s), the first 300 ms after alt-svc"
        );

        let elsewhere = Ledger::default();
        elsewhere.tcp(tcp("c1", 0));
        elsewhere.h3(H3Visit {
            ip: IpAddr::from([198, 51, 100, 7]),
            token: Some("tok"),
            quic_voice_id: None,
            time_ms: 500,
        });
        assert_eq!(
            elsewhere.by_token("tok")[0]
                .verdict(600, &NeverRule::default())
                .0,
            Verdict::QuicElsewhere
        );

        // A token no TCP request carried (the auditor's own QUIC probe, say): no match by IP.
        let foreign = Ledger::default();
        foreign.tcp(tcp("c1", 0));
        foreign.h3(H3Visit {
            ip: IpAddr::from([192, 0, 2, 1]),
            token: Some("someone-elses"),
            quic_voice_id: None,
            time_ms: 500,
        });
        let entry = &foreign.by_token("tok")[0];
        assert_eq!(entry.h3_requests, 0);
        assert_eq!(
            entry.verdict(600, &NeverRule::default()).0,
            Verdict::Pending
        );

        // Another IP without the token, or after `ma`: no match.
        let late = Ledger::default();
        late.tcp(tcp("c1", 0));
        late.h3(H3Visit {
            ip: IpAddr::from([192, 0, 2, 1]),
            token: None,
            quic_voice_id: None,
            time_ms: ALT_SVC_MAX_AGE_MS + 1,
        });
        assert_eq!(
            late.by_token("tok")[0]
                .verdict(ALT_SVC_MAX_AGE_MS + 2, &NeverRule::default())
                .0,
            Verdict::Expired
        );
    }

    #[test]
    fn identities_stay_within_the_bound_and_answer_in_arrival_order() {
        let ledger = Ledger::default();
        // Twice the bound: each shard (picked by a randomly seeded hash) gets ~8,192 identities,
        // so every shard overflows and drops its oldest, whatever the seed. At the bound plus a
        // few, a shard could get fewer than its 4,096 and keep the very first identity.
        let voices: Vec<String> = (0..2 * MAX_IDENTITIES)
            .map(|i| format!("tlsv2_{i}"))
            .collect();
        for (i, voice) in voices.iter().enumerate() {
            ledger.tcp(TcpVisit {
                tls_voice_id: voice,
                time_ms: i64::try_from(i).unwrap(),
                ..tcp("c1", 0)
            });
        }
        let kept = ledger.by_token("tok");
        assert!(kept.len() <= MAX_IDENTITIES);
        assert!(kept.len() > MAX_IDENTITIES - SHARDS * 100);
        // The oldest went first, and what is kept answers oldest first.
        assert!(kept
            .windows(2)
            .all(|w| w[0].first_tcp_ms < w[1].first_tcp_ms));
        assert!(kept
            .last()
            .is_some_and(|e| e.tls_voice_id == voices[voices.len() - 1]));
        assert!(kept[0].first_tcp_ms > 0);
    }
}
