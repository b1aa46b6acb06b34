//! Borrowed views of wire lists: validated once while parsing, iterated without allocating.
//!
//! Each type is a view of the list's bytes in the hello's message and answers typed items on
//! demand. Parsing checks that the bytes hold whole items, so iteration never meets a partial
//! one.

use std::fmt;
use std::marker::PhantomData;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use super::enums::NamedGroup;
use super::error::TlsError;
use crate::codec::Reader;
use crate::text::hex_id;

/// Raw bytes from the wire; serialized as lowercase hex.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Raw<'a>(&'a [u8]);

impl<'a> Raw<'a> {
    pub(crate) fn borrowed(bytes: &'a [u8]) -> Self {
        Self(bytes)
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Raw<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Raw({})", hex::encode(self.0))
    }
}

impl Serialize for Raw<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&hex_id("", self.0))
    }
}

/// The width of a wire list's code points: one byte or two (big-endian).
pub trait CodePoint: Copy + 'static {
    /// Bytes per code point.
    const SIZE: usize;
    /// The code point in `bytes` (exactly `SIZE` of them).
    fn from_be(bytes: &[u8]) -> Self;
}

impl CodePoint for u8 {
    const SIZE: usize = 1;
    fn from_be(bytes: &[u8]) -> Self {
        bytes.first().copied().unwrap_or_default()
    }
}

impl CodePoint for u16 {
    const SIZE: usize = 2;
    fn from_be(bytes: &[u8]) -> Self {
        match bytes {
            [hi, lo] => u16::from_be_bytes([*hi, *lo]),
            _ => 0,
        }
    }
}

/// A list of code points of width `W` read as `T`, wire order, duplicates and GREASE kept.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CodeList<'a, W, T> {
    raw: &'a [u8],
    item: PhantomData<fn() -> (W, T)>,
}

/// A list of two-byte code points (cipher suites, groups, signature schemes, versions).
pub type U16List<'a, T> = CodeList<'a, u16, T>;
/// A list of one-byte code points (compression methods, point formats, PSK modes).
pub type U8List<'a, T> = CodeList<'a, u8, T>;

impl<'a, W: CodePoint, T: From<W> + 'a> CodeList<'a, W, T> {
    /// Takes all of `r` as the list; a length that is not a whole number of items is an error.
    pub(crate) fn read(mut r: Reader<'a>, field: &'static str) -> Result<Self, TlsError> {
        let len = r.remaining();
        if !len.is_multiple_of(W::SIZE) {
            return Err(TlsError::BadListLength {
                field,
                len,
                item: W::SIZE,
            });
        }
        Ok(Self::wrap(r.rest()))
    }

    /// A view of bytes already checked to hold whole items.
    pub(crate) fn wrap(raw: &'a [u8]) -> Self {
        Self {
            raw,
            item: PhantomData,
        }
    }

    /// The list's bytes (big-endian items).
    pub fn as_bytes(&self) -> &'a [u8] {
        self.raw
    }

    /// The code points as plain numbers, wire order.
    pub fn values(&self) -> impl Iterator<Item = W> + Clone + 'a {
        self.raw.chunks_exact(W::SIZE).map(W::from_be)
    }

    /// The code points as typed values, wire order.
    pub fn iter(&self) -> impl Iterator<Item = T> + Clone + 'a {
        self.values().map(T::from)
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.raw.len() / W::SIZE
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }
}

impl<W: CodePoint, T: From<W> + fmt::Debug> fmt::Debug for CodeList<'_, W, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<W: CodePoint, T: From<W> + Serialize> Serialize for CodeList<'_, W, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        for item in self.iter() {
            seq.serialize_element(&item)?;
        }
        seq.end()
    }
}

/// A `ProtocolName` list (ALPN, RFC 7301 section 3.1; ALPS uses the same shape): one-byte-length
/// prefixed names, wire order. Empty names are kept (JA4 has a rule for them).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ProtocolNames<'a> {
    raw: &'a [u8],
}

impl<'a> ProtocolNames<'a> {
    /// Takes all of `r` as the list body (after its two-byte length).
    pub(crate) fn read(r: Reader<'a>) -> Result<Self, TlsError> {
        let mut check = r.clone();
        while !check.is_empty() {
            if check.sub_u8().is_none() {
                return Err(TlsError::Truncated {
                    field: "protocol name",
                });
            }
        }
        let mut r = r;
        Ok(Self { raw: r.rest() })
    }

    /// The names as bytes, wire order.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + Clone + 'a {
        let mut r = Reader::new(self.raw);
        std::iter::from_fn(move || r.sub_u8().map(|mut name| name.rest()))
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }
}

impl fmt::Debug for ProtocolNames<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

impl Serialize for ProtocolNames<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for name in self.iter() {
            seq.serialize_element(&String::from_utf8_lossy(name))?;
        }
        seq.end()
    }
}

/// The `ServerNameList` of the server_name extension (RFC 6066 section 3).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ServerNames<'a> {
    raw: &'a [u8],
}

impl<'a> ServerNames<'a> {
    /// Takes all of `r` as the list body (after its two-byte length).
    pub(crate) fn read(r: Reader<'a>) -> Result<Self, TlsError> {
        let mut check = r.clone();
        while !check.is_empty() {
            if check.u8().is_none() || check.sub_u16().is_none() {
                return Err(TlsError::Truncated {
                    field: "server name",
                });
            }
        }
        let mut r = r;
        Ok(Self { raw: r.rest() })
    }

    /// `(name_type, name)` pairs, wire order (`name_type` 0 is host_name).
    pub fn iter(&self) -> impl Iterator<Item = (u8, &'a [u8])> + Clone + 'a {
        let mut r = Reader::new(self.raw);
        std::iter::from_fn(move || {
            let kind = r.u8()?;
            let mut name = r.sub_u16()?;
            Some((kind, name.rest()))
        })
    }
}

impl fmt::Debug for ServerNames<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(
                self.iter()
                    .map(|(kind, name)| (kind, String::from_utf8_lossy(name))),
            )
            .finish()
    }
}

impl Serialize for ServerNames<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for (kind, name) in self.iter() {
            seq.serialize_element(&NameEntry { kind, name })?;
        }
        seq.end()
    }
}

/// One server name, for serialization.
struct NameEntry<'b> {
    kind: u8,
    name: &'b [u8],
}

impl Serialize for NameEntry<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("name_type", &self.kind)?;
        map.serialize_entry("name", &String::from_utf8_lossy(self.name))?;
        map.end()
    }
}

/// The `client_shares` of key_share (RFC 8446 section 4.2.8): groups and key lengths, the key
/// bytes themselves are never exposed (they are per-connection randomness).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyShares<'a> {
    raw: &'a [u8],
}

impl<'a> KeyShares<'a> {
    /// Takes all of `r` as the list body (after its two-byte length).
    pub(crate) fn read(r: Reader<'a>) -> Result<Self, TlsError> {
        let mut check = r.clone();
        while !check.is_empty() {
            if check.u16().is_none() || check.sub_u16().is_none() {
                return Err(TlsError::Truncated {
                    field: "key share entry",
                });
            }
        }
        let mut r = r;
        Ok(Self { raw: r.rest() })
    }

    /// `(group, key_exchange length)` pairs, wire order.
    pub fn iter(&self) -> impl Iterator<Item = (NamedGroup, usize)> + Clone + 'a {
        let mut r = Reader::new(self.raw);
        std::iter::from_fn(move || {
            let group = r.u16()?;
            let key = r.sub_u16()?;
            Some((NamedGroup(group), key.remaining()))
        })
    }
}

impl fmt::Debug for KeyShares<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for KeyShares<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for (group, key_len) in self.iter() {
            seq.serialize_element(&ShareEntry { group, key_len })?;
        }
        seq.end()
    }
}

/// One key share, for serialization.
struct ShareEntry {
    group: NamedGroup,
    key_len: usize,
}

impl Serialize for ShareEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("group", &self.group)?;
        map.serialize_entry("key_len", &self.key_len)?;
        map.end()
    }
}

/// QUIC transport parameters (RFC 9000 section 18): ids and value lengths; values stay raw
/// (they carry connection ids).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct QuicParameters<'a> {
    raw: &'a [u8],
}

impl<'a> QuicParameters<'a> {
    /// Takes all of `r` as the parameter list.
    pub(crate) fn read(r: Reader<'a>) -> Result<Self, TlsError> {
        let mut check = r.clone();
        while !check.is_empty() {
            let ok = check
                .varint()
                .and_then(|_| check.varint())
                .and_then(|len| usize::try_from(len).ok())
                .and_then(|len| check.take(len));
            if ok.is_none() {
                return Err(TlsError::Truncated {
                    field: "QUIC transport parameter",
                });
            }
        }
        let mut r = r;
        Ok(Self { raw: r.rest() })
    }

    /// Parameter ids, wire order.
    pub fn ids(&self) -> impl Iterator<Item = u64> + Clone + 'a {
        let mut r = Reader::new(self.raw);
        std::iter::from_fn(move || {
            let id = r.varint()?;
            let len = usize::try_from(r.varint()?).ok()?;
            r.take(len)?;
            Some(id)
        })
    }
}

impl fmt::Debug for QuicParameters<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.ids()).finish()
    }
}

impl Serialize for QuicParameters<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for id in self.ids() {
            seq.serialize_element(&id)?;
        }
        seq.end()
    }
}
