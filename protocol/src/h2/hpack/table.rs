//! The HPACK index address space: the static table (RFC 7541 Appendix A) followed by the
//! connection's dynamic table (RFC 7541 sections 2.3 and 4).
//!
//! Dynamic entries are kept in one append-only byte store; eviction only drops the entry record.
//! The store is bounded because every byte in it came from a decoded header block, and the number
//! and size of decoded blocks are capped by the caller.

use std::collections::VecDeque;

/// RFC 7541 Appendix A, index 1..=61.
#[rustfmt::skip]
pub(crate) const STATIC: [(&str, &str); 61] = [
    (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"),
    (":path", "/index.html"), (":scheme", "http"), (":scheme", "https"), (":status", "200"),
    (":status", "204"), (":status", "206"), (":status", "304"), (":status", "400"),
    (":status", "404"), (":status", "500"), ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""),
    ("accept", ""), ("access-control-allow-origin", ""), ("age", ""), ("allow", ""),
    ("authorization", ""), ("cache-control", ""), ("content-disposition", ""),
    ("content-encoding", ""), ("content-language", ""), ("content-length", ""),
    ("content-location", ""), ("content-range", ""), ("content-type", ""), ("cookie", ""),
    ("date", ""), ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""),
    ("if-match", ""), ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""),
    ("if-unmodified-since", ""), ("last-modified", ""), ("link", ""), ("location", ""),
    ("max-forwards", ""), ("proxy-authenticate", ""), ("proxy-authorization", ""), ("range", ""),
    ("referer", ""), ("refresh", ""), ("retry-after", ""), ("server", ""), ("set-cookie", ""),
    ("strict-transport-security", ""), ("transfer-encoding", ""), ("user-agent", ""),
    ("vary", ""), ("via", ""), ("www-authenticate", ""),
];

/// Default SETTINGS_HEADER_TABLE_SIZE (RFC 9113 section 6.5.2): the encoder's table limit until
/// it announces another size.
pub(crate) const DEFAULT_TABLE_SIZE: usize = 4_096;

/// Per-entry overhead counted in the table size (RFC 7541 section 4.1).
const ENTRY_OVERHEAD: usize = 32;

#[derive(Clone, Copy, Debug)]
struct Entry {
    offset: usize,
    name_len: usize,
    value_len: usize,
}

/// The dynamic table of one connection's request direction.
#[derive(Debug)]
pub(crate) struct DynamicTable {
    /// Newest first: dynamic index 0 is HPACK index 62.
    entries: VecDeque<Entry>,
    store: Vec<u8>,
    size: usize,
    max_size: usize,
}

impl DynamicTable {
    pub(crate) fn new() -> Self {
        Self {
            entries: VecDeque::new(),
            store: Vec::new(),
            size: 0,
            max_size: DEFAULT_TABLE_SIZE,
        }
    }

    /// Current size in the RFC 7541 section 4.1 sense.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Apply a dynamic table size update (RFC 7541 section 6.3), evicting as needed.
    pub(crate) fn set_max_size(&mut self, max: usize) {
        self.max_size = max;
        self.evict();
    }

    /// Insert a field (RFC 7541 section 4.4), given as its name and value back to back with
    /// `name_len` octets of name (one copy where two slices would take two): an entry larger
    /// than the table empties it.
    pub(crate) fn insert_joined(&mut self, field: &[u8], name_len: usize) {
        let cost = field.len() + ENTRY_OVERHEAD;
        if cost > self.max_size {
            self.entries.clear();
            self.size = 0;
            return;
        }
        let offset = self.store.len();
        if self.store.capacity() == 0 {
            // One allocation each for a typical first request (a browser's ~15 fields).
            self.store.reserve(1024);
            self.entries.reserve(32);
        }
        self.store.extend_from_slice(field);
        let name_len = name_len.min(field.len());
        self.entries.push_front(Entry {
            offset,
            name_len,
            value_len: field.len() - name_len,
        });
        self.size += cost;
        self.evict();
        if self.entries.is_empty() {
            // Nothing references the store any more: reclaim it.
            self.store.clear();
        }
    }

    fn evict(&mut self) {
        while self.size > self.max_size {
            let Some(old) = self.entries.pop_back() else {
                self.size = 0;
                break;
            };
            self.size = self
                .size
                .saturating_sub(old.name_len + old.value_len + ENTRY_OVERHEAD);
        }
    }

    /// Name and value at HPACK index `index` (1-based, static then dynamic).
    pub(crate) fn get(&self, index: usize) -> Option<(&[u8], &[u8])> {
        if index == 0 {
            return None;
        }
        if let Some((n, v)) = STATIC.get(index - 1) {
            return Some((n.as_bytes(), v.as_bytes()));
        }
        let e = self.entries.get(index - 1 - STATIC.len())?;
        let name = self.store.get(e.offset..e.offset + e.name_len)?;
        let value = self
            .store
            .get(e.offset + e.name_len..e.offset + e.name_len + e.value_len)?;
        Some((name, value))
    }

    /// Dynamic entries, newest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        (0..self.entries.len()).filter_map(|i| self.get(i + 1 + STATIC.len()))
    }
}
