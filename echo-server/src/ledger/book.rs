//! The ledger's book: identities and their entries in shards, each behind its own lock, bounded
//! (the oldest identity of a shard is forgotten past its share), and the identities changed
//! since the writer last took them. An identity carries its hash, made once; a request finds a
//! known identity through a borrowed key, without copying its voice.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::net::IpAddr;

use super::rule::Entry;

/// Identities kept; the oldest is forgotten past this (each shard keeps its share, so the bound
/// holds over all of them and an identity evicted is the oldest of its shard).
pub const MAX_IDENTITIES: usize = 65_536;
/// Shards of the book, each behind its own lock: a TCP request locks only its identity's.
pub(super) const SHARDS: usize = 16;
/// Identities kept per shard.
pub(super) const SHARD_IDENTITIES: usize = MAX_IDENTITIES / SHARDS;

/// One client identity, with its hash (made once, by the ledger's hasher): the maps hash it
/// no further.
#[derive(Clone, Debug)]
pub(super) struct Identity {
    pub(super) hash: u64,
    pub(super) ip: IpAddr,
    pub(super) tls_voice_id: String,
}

/// An identity as a map key: owned ([`Identity`]) or borrowed from a request ([`Probe`]), so a
/// request of a known identity finds it without copying its voice.
pub(super) trait Key {
    fn parts(&self) -> (u64, IpAddr, &str);
}

impl Key for Identity {
    fn parts(&self) -> (u64, IpAddr, &str) {
        (self.hash, self.ip, &self.tls_voice_id)
    }
}

/// An identity borrowed from a request.
pub(super) struct Probe<'a> {
    pub(super) hash: u64,
    pub(super) ip: IpAddr,
    pub(super) tls_voice_id: &'a str,
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
pub(super) struct Prehashed(u64);

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

pub(super) type Prehash = BuildHasherDefault<Prehashed>;

/// An identity's entry, and when it came into the book (the order `Ledger::by_token` answers in).
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) since: u64,
    pub(super) entry: Entry,
    /// Changed since the writer last took the changes: listed in [`Book::changed`].
    pub(super) changed: bool,
}

impl Slot {
    /// Notes that the entry, `identity`'s, changed, when the ledger persists: it is listed in
    /// `changed` once until the writer takes it, and the flag spares a lookup there.
    pub(super) fn touch(
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
pub(super) struct Book {
    pub(super) entries: HashMap<Identity, Slot, Prehash>,
    pub(super) order: VecDeque<Identity>,
    /// Identities changed since the writer last took them (persisting ledgers only).
    pub(super) changed: HashSet<Identity, Prehash>,
}

impl Book {
    /// Makes room for one more identity, not in the book yet: forgets the shard's oldest at
    /// its bound.
    pub(super) fn make_room(&mut self, identity: &Identity) {
        if self.entries.len() >= SHARD_IDENTITIES {
            if let Some(oldest) = self.order.pop_front() {
                self.entries.remove(&oldest);
                self.changed.remove(&oldest);
            }
        }
        self.order.push_back(identity.clone());
    }
}
