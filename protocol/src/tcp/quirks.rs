//! The quirks p0f v3 names in a SYN's IP and TCP headers (p0f README, section 5, "quirks").

/// A set of p0f quirks, one bit each, in p0f's order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Quirks(pub u32);

impl Quirks {
    /// `df`: IPv4 "don't fragment" set.
    pub const DF: Self = Self(1 << 0);
    /// `id+`: DF set but the IPv4 ID non-zero.
    pub const NONZERO_ID: Self = Self(1 << 1);
    /// `id-`: DF not set but the IPv4 ID zero.
    pub const ZERO_ID: Self = Self(1 << 2);
    /// `ecn`: explicit congestion notification support (IP ECN bits, or TCP ECE, CWR or NS).
    pub const ECN: Self = Self(1 << 3);
    /// `0+`: the IPv4 "must be zero" flag set.
    pub const MUST_BE_ZERO: Self = Self(1 << 4);
    /// `flow`: a non-zero IPv6 flow label.
    pub const FLOW: Self = Self(1 << 5);
    /// `seq-`: sequence number zero.
    pub const ZERO_SEQ: Self = Self(1 << 6);
    /// `ack+`: ACK number non-zero, ACK flag not set.
    pub const NONZERO_ACK: Self = Self(1 << 7);
    /// `ack-`: ACK number zero, ACK flag set.
    pub const ZERO_ACK: Self = Self(1 << 8);
    /// `uptr+`: URG pointer non-zero, URG flag not set.
    pub const NONZERO_URG: Self = Self(1 << 9);
    /// `urgf+`: URG flag set.
    pub const URG: Self = Self(1 << 10);
    /// `pushf+`: PUSH flag set.
    pub const PUSH: Self = Self(1 << 11);
    /// `ts1-`: own timestamp zero.
    pub const ZERO_TS1: Self = Self(1 << 12);
    /// `ts2+`: non-zero peer timestamp on an initial SYN.
    pub const NONZERO_TS2: Self = Self(1 << 13);
    /// `opt+`: non-zero bytes after the end-of-options option.
    pub const TRAILING_OPTIONS: Self = Self(1 << 14);
    /// `exws`: window scale above 14 (RFC 7323 section 2.3's maximum).
    pub const EXCESSIVE_WS: Self = Self(1 << 15);
    /// `bad`: malformed TCP options.
    pub const BAD_OPTIONS: Self = Self(1 << 16);

    /// The quirks that are the IP layer's, not the TCP stack's options and flags.
    pub const IP_LAYER: Self = Self(
        Self::DF.0 | Self::NONZERO_ID.0 | Self::ZERO_ID.0 | Self::MUST_BE_ZERO.0 | Self::FLOW.0,
    );

    /// Every quirk with its p0f name, in the order `p0f -r` prints them.
    const NAMES: [(Self, &'static str); 17] = [
        (Self::DF, "df"),
        (Self::NONZERO_ID, "id+"),
        (Self::ZERO_ID, "id-"),
        (Self::ECN, "ecn"),
        (Self::MUST_BE_ZERO, "0+"),
        (Self::FLOW, "flow"),
        (Self::ZERO_SEQ, "seq-"),
        (Self::NONZERO_ACK, "ack+"),
        (Self::ZERO_ACK, "ack-"),
        (Self::NONZERO_URG, "uptr+"),
        (Self::URG, "urgf+"),
        (Self::PUSH, "pushf+"),
        (Self::ZERO_TS1, "ts1-"),
        (Self::NONZERO_TS2, "ts2+"),
        (Self::TRAILING_OPTIONS, "opt+"),
        (Self::EXCESSIVE_WS, "exws"),
        (Self::BAD_OPTIONS, "bad"),
    ];

    /// The quirk p0f calls `name`.
    pub fn named(name: &str) -> Option<Self> {
        Self::NAMES
            .into_iter()
            .find(|(_, known)| *known == name)
            .map(|(quirk, _)| quirk)
    }

    /// Adds `quirk`.
    pub fn set(&mut self, quirk: Self) {
        self.0 |= quirk.0;
    }

    /// Whether every quirk of `quirk` is in the set.
    pub fn contains(self, quirk: Self) -> bool {
        self.0 & quirk.0 == quirk.0
    }

    /// The set without the quirks of `other`.
    pub fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// The p0f names of the quirks in the set, in p0f's order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMES
            .into_iter()
            .filter(move |(quirk, _)| self.contains(*quirk))
            .map(|(_, name)| name)
    }
}
