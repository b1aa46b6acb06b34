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
//!
//! Each file imports only those above it: `rule` (one identity's counts and verdict), `book`
//! (the sharded, bounded map of identities and the changes), this one (the ledger of a server).

mod book;
mod rule;

use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

pub use book::MAX_IDENTITIES;
use book::{Book, Identity, Key, Probe, Slot, SHARDS};
pub use rule::{Entry, H3Visit, NeverRule, TcpVisit, Verdict, ALT_SVC_MAX_AGE_MS};

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

/// The hash of a client identity (its IP and TLS voice), as one ledger makes it. A connection's
/// identity does not change: it is hashed at the connection's first request, and its later
/// requests reuse the hash ([`Ledger::tcp`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdentityHash(u64);

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

    /// The hash of the identity of `ip` and `tls_voice_id`.
    pub fn identity_hash(&self, ip: IpAddr, tls_voice_id: &str) -> IdentityHash {
        IdentityHash(self.hasher.hash_one((ip, tls_voice_id)))
    }

    /// The identity of `ip` and `tls_voice_id`, borrowed, with its `hash`, and its shard.
    fn probe<'a>(
        &self,
        IdentityHash(hash): IdentityHash,
        ip: IpAddr,
        tls_voice_id: &'a str,
    ) -> (Probe<'a>, &Mutex<Book>) {
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
            let hash = self.identity_hash(entry.client_ip, &entry.tls_voice_id);
            let (probe, book) = self.probe(hash, entry.client_ip, &entry.tls_voice_id);
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

    /// Notes a TCP request, of the identity `hash` names ([`Ledger::identity_hash`] of the
    /// visit's IP and TLS voice). Only its identity's shard is locked, and an identity already
    /// in the book is found (once) and updated without an allocation.
    pub fn tcp(&self, hash: IdentityHash, visit: TcpVisit<'_>) {
        debug_assert_eq!(hash, self.identity_hash(visit.ip, visit.tls_voice_id));
        let (probe, book) = self.probe(hash, visit.ip, visit.tls_voice_id);
        let mut guard = lock(book);
        let book = &mut *guard;
        if let Some(slot) = book.entries.get_mut(&probe as &dyn Key) {
            slot.entry.count_tcp(&visit, &self.rule);
            slot.touch(self.persist, &probe, &mut book.changed);
            return;
        }
        let identity = Identity {
            hash: probe.hash,
            ip: visit.ip,
            tls_voice_id: visit.tls_voice_id.to_owned(),
        };
        let mut entry = Entry::new(&visit);
        entry.count_tcp(&visit, &self.rule);
        self.put(book, identity, entry);
        if let Some(slot) = book.entries.get_mut(&probe as &dyn Key) {
            slot.touch(self.persist, &probe, &mut book.changed);
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
        self.update_all(|entry| entry.count_h3(&visit));
    }

    /// Notes a QUIC connection attempt from `ip` that carried no HTTP/3 request (its handshake
    /// failed, or it ended idle): it counts for the identities of that IP that were sent
    /// `alt-svc` before it, within `ma` (an Initial carries no probe token). A connection that
    /// carried requests is judged by them ([`Ledger::h3`]).
    pub fn quic_attempt(&self, ip: IpAddr, time_ms: i64) {
        self.update_all(|entry| entry.count_quic_attempt(ip, time_ms));
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

    /// `visit`, noted in `ledger` as the server notes it.
    fn note(ledger: &Ledger, visit: TcpVisit<'_>) {
        ledger.tcp(ledger.identity_hash(visit.ip, visit.tls_voice_id), visit);
    }

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
        note(&plain, tcp("c1", 0));
        assert!(plain.take_changed().is_empty());

        let ledger = Ledger::new(NeverRule::default(), true);
        note(&ledger, tcp("c1", 0));
        note(&ledger, tcp("c2", 10));
        let changed = ledger.take_changed();
        assert_eq!(changed.len(), 1);
        assert_eq!((changed[0].tcp_connections, changed[0].updated_ms), (2, 10));
        assert!(ledger.take_changed().is_empty());
        ledger.quic_attempt(IpAddr::from([192, 0, 2, 1]), 20);
        assert_eq!(ledger.take_changed()[0].quic_attempts, 1);
        // Taken, then changed again by a request: listed again, once.
        note(&ledger, tcp("c2", 25));
        note(&ledger, tcp("c2", 26));
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
        note(&restored, tcp("c3", 40));
        assert_eq!(restored.by_token("tok")[0].tcp_connections, 3);
    }

    #[test]
    fn spaced_tcp_returns_over_a_minute_without_quic_are_never_tries_h3() {
        let rule = NeverRule::default();
        let ledger = Ledger::default();
        note(&ledger, tcp("c1", 0));
        note(&ledger, tcp("c1", 10));
        assert_eq!(
            ledger.by_token("tok")[0].verdict(20, &rule).0,
            Verdict::Pending
        );
        // Quick reloads: three new connections within two seconds count once.
        for (conn, at) in [("c2", 2_000), ("c3", 2_500), ("c4", 3_000)] {
            note(&ledger, tcp(conn, at));
        }
        let entry = &ledger.by_token("tok")[0];
        assert_eq!(
            (entry.tcp_connections_after_alt_svc, entry.spaced_returns),
            (3, 1)
        );
        assert_eq!(entry.verdict(3_000, &rule).0, Verdict::Pending);
        // Three spaced returns, but within 60 s of alt-svc: not yet.
        note(&ledger, tcp("c5", 30_000));
        note(&ledger, tcp("c6", 45_000));
        let entry = &ledger.by_token("tok")[0];
        assert_eq!(entry.spaced_returns, 3);
        let (verdict, why) = entry.verdict(45_000, &rule);
        assert_eq!(verdict, Verdict::Pending);
        assert_eq!(
            why,
            "3 of 3 spaced TCP returns after alt-svc, over 45 of 60 s"
        );
        note(&ledger, tcp("c7", 61_000));
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
            note(&eager, tcp(conn, at));
        }
        assert_eq!(
            eager.by_token("tok")[0].verdict(4, &quick).0,
            Verdict::NeverTriesH3
        );
    }

    #[test]
    fn h3_by_ip_or_token_decides_the_verdict() {
        let ledger = Ledger::default();
        note(&ledger, tcp("c1", 0));
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
        note(&attempted, tcp("c1", 0));
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
        note(&elsewhere, tcp("c1", 0));
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
        note(&foreign, tcp("c1", 0));
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
        note(&late, tcp("c1", 0));
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
            note(
                &ledger,
                TcpVisit {
                    tls_voice_id: voice,
                    time_ms: i64::try_from(i).unwrap(),
                    ..tcp("c1", 0)
                },
            );
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
