//! HPACK header block decoding (RFC 7541) with the representation of every field.
//!
//! One [`Decoder`] holds the dynamic table of a connection's request direction, so header blocks
//! must be decoded in wire order. Besides the name and value of each field, the decoder reports
//! how the client *encoded* it ([`Representation`]): indexed, literal with incremental indexing,
//! without indexing or never indexed (RFC 7541 section 6), name from the table or literal, and
//! Huffman or raw per string (section 5.2); dynamic table size updates (section 6.3) are listed
//! with their position. Encoders differ in all of these, so they are part of what a client "says".
//!
//! This is our own decoder rather than `loona-hpack`: that crate rebuilds a 257-entry `HashMap`
//! Huffman table for every Huffman string, which costs tens of microseconds per field and makes a
//! hostile block of many one-byte Huffman strings a CPU sink. `loona-hpack` and the Python `hpack`
//! package are used as independent oracles in the tests instead.

pub(crate) mod huffman;
mod table;

use serde::Serialize;

pub use huffman::HuffmanError;
use table::DynamicTable;

/// Cap on the decoded size of one header block, counted as in SETTINGS_MAX_HEADER_LIST_SIZE
/// (RFC 9113 section 6.5.2: name + value + 32 per field). Indexed fields can repeat a large
/// dynamic entry for one byte each, so without this a small block could expand without bound.
pub const MAX_HEADER_LIST_SIZE: usize = 256 * 1024;

/// Why a header block could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
#[non_exhaustive]
pub enum HpackError {
    /// An indexed representation used index 0 (RFC 7541 section 6.1).
    #[error("HPACK index 0")]
    IndexZero,
    /// An index past the static and dynamic tables (RFC 7541 section 2.3.3).
    #[error("HPACK index {index} past the table ({table_len} entries)")]
    IndexPastTable {
        /// The index on the wire.
        index: u32,
        /// Static plus dynamic entries at that moment.
        table_len: u32,
    },
    /// An integer longer than 32 bits (RFC 7541 section 5.1).
    #[error("HPACK integer overflows 32 bits")]
    IntegerOverflow,
    /// The block ended inside an integer or string.
    #[error("HPACK block ends inside a field")]
    UnexpectedEnd,
    /// A Huffman string did not decode.
    #[error("HPACK Huffman string: {0}")]
    Huffman(HuffmanError),
    /// The decoded header list passed [`MAX_HEADER_LIST_SIZE`].
    #[error("decoded header list larger than {MAX_HEADER_LIST_SIZE} bytes")]
    HeaderListTooLarge,
}

/// The representation of a field (RFC 7541 section 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldKind {
    /// Indexed header field (section 6.1), first bit `1`.
    Indexed,
    /// Literal with incremental indexing (section 6.2.1), bits `01`.
    IncrementalIndexing,
    /// Literal without indexing (section 6.2.2), bits `0000`.
    WithoutIndexing,
    /// Literal never indexed (section 6.2.3), bits `0001`.
    NeverIndexed,
}

/// How one field was encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Representation {
    /// The representation type.
    pub kind: FieldKind,
    /// The table index: of the whole field for [`FieldKind::Indexed`], of the name for a literal
    /// with an indexed name; `None` for a literal name.
    pub index: Option<u32>,
    /// Whether the literal name was Huffman-coded; `None` when the name came from the table.
    pub name_huffman: Option<bool>,
    /// Whether the literal value was Huffman-coded; `None` for an indexed field.
    pub value_huffman: Option<bool>,
}

/// A dynamic table size update (RFC 7541 section 6.3) and where it stood in the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TableSizeUpdate {
    /// Number of fields decoded before it in the same block (0 = at the start, as section 4.2
    /// requires).
    pub before_field: usize,
    /// The new maximum size.
    pub max_size: u32,
}

#[derive(Clone, Copy, Debug)]
struct Span {
    start: u32,
    len: u32,
}

#[derive(Clone, Copy, Debug)]
struct FieldSpan {
    name: Span,
    value: Span,
    representation: Representation,
}

/// One decoded field, borrowed from its [`HeaderBlock`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field<'a> {
    /// Name octets as decoded (HTTP/2 names are lowercase on the wire).
    pub name: &'a [u8],
    /// Value octets as decoded.
    pub value: &'a [u8],
    /// How the client encoded it.
    pub representation: Representation,
}

impl Field<'_> {
    /// Whether this is a pseudo-header (name starts with `:`, RFC 9113 section 8.3).
    pub fn is_pseudo(&self) -> bool {
        self.name.first() == Some(&b':')
    }
}

/// The decoded fields of one header block, in wire order. All octets live in one buffer.
#[derive(Clone, Debug, Default)]
pub struct HeaderBlock {
    /// The decoded octets, `buf[..end]` (while a block is being decoded, `buf` also holds
    /// zeroed room after them for the Huffman decoder).
    buf: Vec<u8>,
    end: usize,
    fields: Vec<FieldSpan>,
    /// Dynamic table size updates found in the block.
    pub table_size_updates: Vec<TableSizeUpdate>,
}

impl HeaderBlock {
    /// An empty block sized for an encoded block of `encoded_len` bytes (Huffman output is at
    /// most 8/5 of its input; a field takes at least one byte).
    pub(crate) fn with_capacity(encoded_len: usize) -> Self {
        Self {
            buf: Vec::with_capacity(encoded_len * 2),
            end: 0,
            fields: Vec::with_capacity(encoded_len.min(64)),
            table_size_updates: Vec::new(),
        }
    }

    /// The fields, wire order.
    pub fn fields(&self) -> impl Iterator<Item = Field<'_>> + '_ {
        self.fields.iter().map(|f| Field {
            name: self.slice(f.name),
            value: self.slice(f.value),
            representation: f.representation,
        })
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether the block decoded no field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    fn slice(&self, s: Span) -> &[u8] {
        let start = s.start as usize;
        self.buf
            .get(start..start + s.len as usize)
            .unwrap_or_default()
    }

    fn push_bytes(&mut self, bytes: &[u8]) -> Span {
        let start = self.end;
        let end = start + bytes.len();
        if let Some(dst) = self.room(bytes.len()) {
            dst.copy_from_slice(bytes);
        }
        self.end = end;
        Span {
            start: start as u32,
            len: bytes.len() as u32,
        }
    }

    /// The `n` octets after the decoded ones, zeroed room made if needed.
    fn room(&mut self, n: usize) -> Option<&mut [u8]> {
        let end = self.end + n;
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        self.buf.get_mut(self.end..end)
    }
}

/// The HPACK decoder of one connection (one dynamic table).
#[derive(Debug)]
pub struct Decoder {
    table: DynamicTable,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder with an empty dynamic table of the default size (4,096).
    pub fn new() -> Self {
        Self {
            table: DynamicTable::new(),
        }
    }

    /// Set the table limit, as a SETTINGS_HEADER_TABLE_SIZE from the decoding side would
    /// (RFC 7541 section 4.2); evicts as needed.
    pub fn set_max_table_size(&mut self, max: usize) {
        self.table.set_max_size(max);
    }

    /// Current dynamic table size (RFC 7541 section 4.1).
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// Dynamic table entries, newest first (index 62 first).
    pub fn table_entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.table.iter()
    }

    /// Decode one complete header block.
    ///
    /// # Errors
    ///
    /// [`HpackError`] on the first malformed field; the table keeps what earlier fields did.
    pub fn decode(&mut self, block: &[u8]) -> Result<HeaderBlock, HpackError> {
        let mut out = HeaderBlock::with_capacity(block.len());
        self.decode_into(block, &mut out).map(|()| out)
    }

    /// Decode `block`, appending fields to `out` (which keeps the fields decoded before an
    /// error).
    ///
    /// # Errors
    ///
    /// [`HpackError`] on the first malformed field.
    pub fn decode_into(&mut self, block: &[u8], out: &mut HeaderBlock) -> Result<(), HpackError> {
        // Zeroed room for the block's Huffman output in one stretch rather than one per string
        // (more is made if the table's entries need it).
        out.buf.truncate(out.end);
        out.buf
            .resize(out.end + huffman::max_decoded_len(block.len()), 0);
        let result = self.decode_fields(block, out);
        out.buf.truncate(out.end);
        result
    }

    fn decode_fields(&mut self, block: &[u8], out: &mut HeaderBlock) -> Result<(), HpackError> {
        let mut r = Cursor { buf: block, pos: 0 };
        let mut ahead = Ahead::new();
        let mut list_size = 0usize;
        while let Some(first) = r.peek() {
            if first & 0x80 != 0 {
                // Indexed header field, 7-bit prefix (section 6.1).
                let index = r.int(7)?;
                if index == 0 {
                    return Err(HpackError::IndexZero);
                }
                let (name, value) = self.lookup(index)?;
                list_size += name.len() + value.len() + 32;
                check_size(list_size)?;
                let name = out.push_bytes(name);
                let value = out.push_bytes(value);
                out.fields.push(FieldSpan {
                    name,
                    value,
                    representation: Representation {
                        kind: FieldKind::Indexed,
                        index: Some(index),
                        name_huffman: None,
                        value_huffman: None,
                    },
                });
                continue;
            }
            let (kind, prefix) = if first & 0x40 != 0 {
                (FieldKind::IncrementalIndexing, 6)
            } else if first & 0x20 != 0 {
                // Dynamic table size update, 5-bit prefix (section 6.3).
                let max = r.int(5)?;
                self.table.set_max_size(max as usize);
                out.table_size_updates.push(TableSizeUpdate {
                    before_field: out.fields.len(),
                    max_size: max,
                });
                continue;
            } else if first & 0x10 != 0 {
                (FieldKind::NeverIndexed, 4)
            } else {
                (FieldKind::WithoutIndexing, 4)
            };
            let name_index = r.int(prefix)?;
            let (name, name_huffman) = if name_index == 0 {
                let (span, huff) = r.string(out, &mut ahead, true)?;
                (span, Some(huff))
            } else {
                let (name, _) = self.lookup(name_index)?;
                (out.push_bytes(name), None)
            };
            let (value, value_huffman) = r.string(out, &mut ahead, false)?;
            list_size += (name.len + value.len) as usize + 32;
            check_size(list_size)?;
            if kind == FieldKind::IncrementalIndexing {
                // The value was decoded right after the name.
                debug_assert_eq!(value.start, name.start + name.len);
                let field = Span {
                    start: name.start,
                    len: name.len + value.len,
                };
                self.table
                    .insert_joined(out.slice(field), name.len as usize);
            }
            out.fields.push(FieldSpan {
                name,
                value,
                representation: Representation {
                    kind,
                    index: (name_index != 0).then_some(name_index),
                    name_huffman,
                    value_huffman: Some(value_huffman),
                },
            });
        }
        Ok(())
    }

    fn lookup(&self, index: u32) -> Result<(&[u8], &[u8]), HpackError> {
        self.table
            .get(index as usize)
            .ok_or(HpackError::IndexPastTable {
                index,
                table_len: (table::STATIC.len() + self.table.len()) as u32,
            })
    }
}

fn check_size(size: usize) -> Result<(), HpackError> {
    if size > MAX_HEADER_LIST_SIZE {
        Err(HpackError::HeaderListTooLarge)
    } else {
        Ok(())
    }
}

/// A bounds-checked cursor over one header block.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    fn byte(&mut self) -> Result<u8, HpackError> {
        let b = self.peek().ok_or(HpackError::UnexpectedEnd)?;
        self.pos += 1;
        Ok(b)
    }

    /// An integer with an `n`-bit prefix (RFC 7541 section 5.1), at most 32 bits.
    #[inline]
    fn int(&mut self, n: u32) -> Result<u32, HpackError> {
        let mask = (1u32 << n) - 1;
        let value = u32::from(self.byte()?) & mask;
        if value < mask {
            return Ok(value);
        }
        self.int_tail(value)
    }

    /// The continuation bytes of an integer whose prefix was all ones.
    fn int_tail(&mut self, mut value: u32) -> Result<u32, HpackError> {
        let mut shift = 0u32;
        loop {
            let b = self.byte()?;
            let add = u64::from(b & 0x7f) << shift;
            let sum = u64::from(value) + add;
            value = u32::try_from(sum).map_err(|_| HpackError::IntegerOverflow)?;
            if b & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
            if shift > 28 {
                return Err(HpackError::IntegerOverflow);
            }
        }
    }

    /// The header of a string literal (RFC 7541 section 5.2): whether it is Huffman-coded, and
    /// its encoded bytes, which the cursor skips.
    fn string_bytes(&mut self) -> Result<(bool, usize, &'a [u8]), HpackError> {
        let huffman = self.peek().ok_or(HpackError::UnexpectedEnd)? & 0x80 != 0;
        let len = self.int(7)? as usize;
        let at = self.pos;
        let end = at.checked_add(len).ok_or(HpackError::UnexpectedEnd)?;
        let raw = self.buf.get(at..end).ok_or(HpackError::UnexpectedEnd)?;
        self.pos = end;
        Ok((huffman, at, raw))
    }

    /// A string literal (RFC 7541 section 5.2), decoded into `out`; returns its span and whether
    /// it was Huffman-coded. `value_follows`: this is a literal name, so the field's value
    /// string comes next.
    ///
    /// A long Huffman string is decoded together with the next long Huffman string of the
    /// block, if there is one close by (see [`Ahead`]), and that one is taken from [`Ahead`]
    /// when its turn comes.
    fn string(
        &mut self,
        out: &mut HeaderBlock,
        ahead: &mut Ahead,
        value_follows: bool,
    ) -> Result<(Span, bool), HpackError> {
        let (huffman, at, raw) = self.string_bytes()?;
        if !huffman {
            return Ok((out.push_bytes(raw), false));
        }
        if ahead.string == Some((at, raw.len())) {
            ahead.string = None;
            let n = ahead.result.map_err(HpackError::Huffman)?;
            return Ok((out.push_bytes(ahead.buf.get(..n).unwrap_or_default()), true));
        }
        let start = out.end;
        let room = out
            .room(huffman::max_decoded_len(raw.len()))
            .unwrap_or_default();
        let pair = if raw.len() >= PAIR_MIN {
            self.next_huffman(value_follows)
        } else {
            None
        };
        let result = match pair {
            Some((next_at, next)) => {
                let (result, next_result) = huffman::decode_pair(raw, room, next, &mut ahead.buf);
                ahead.string = Some((next_at, next.len()));
                ahead.result = next_result;
                result
            }
            None => huffman::decode(raw, room),
        };
        let len = result.map_err(HpackError::Huffman)?;
        out.end += len;
        let span = Span {
            start: start as u32,
            len: len as u32,
        };
        Ok((span, true))
    }

    /// The next Huffman string after the cursor (which stands after a string), within the next
    /// [`AHEAD_FIELDS`] fields, if its decoded form fits [`Ahead`]'s buffer: its offset in the
    /// block and its encoded bytes. Only reads: a malformed field ends the search.
    fn next_huffman(&self, value_follows: bool) -> Option<(usize, &'a [u8])> {
        let mut c = Cursor {
            buf: self.buf,
            pos: self.pos,
        };
        let found = |(huffman, at, raw): (bool, usize, &'a [u8])| {
            (huffman && raw.len() >= PAIR_MIN && huffman::max_decoded_len(raw.len()) <= AHEAD_LEN)
                .then_some((at, raw))
        };
        if value_follows {
            if let Some(next) = found(c.string_bytes().ok()?) {
                return Some(next);
            }
        }
        for _ in 0..AHEAD_FIELDS {
            let first = c.peek()?;
            if first & 0x80 != 0 {
                c.int(7).ok()?;
                continue;
            }
            let prefix = if first & 0x40 != 0 {
                6
            } else if first & 0x20 != 0 {
                c.int(5).ok()?;
                continue;
            } else {
                4
            };
            if c.int(prefix).ok()? == 0 {
                if let Some(next) = found(c.string_bytes().ok()?) {
                    return Some(next);
                }
            }
            if let Some(next) = found(c.string_bytes().ok()?) {
                return Some(next);
            }
        }
        None
    }
}

/// Encoded length from which Huffman strings are decoded in pairs: below it, the overlap is
/// too short to pay for the search and the copy.
const PAIR_MIN: usize = 16;
/// Fields [`Cursor::next_huffman`] looks through.
const AHEAD_FIELDS: usize = 4;
/// Size of [`Ahead`]'s buffer: room for a Huffman string of up to 315 bytes.
const AHEAD_LEN: usize = 512;

/// A Huffman string decoded ahead of its turn, as the second of a pair
/// ([`huffman::decode_pair`]): one string alone is a chain of dependent table lookups, two are
/// two chains the CPU runs side by side. It is found again by its position and length, so it is
/// the same bytes whatever the fields in between turn out to be; its error, if any, is
/// reported when its turn comes, so errors come in wire order as before.
struct Ahead {
    /// Offset in the block and encoded length of the string decoded ahead.
    string: Option<(usize, usize)>,
    result: Result<usize, huffman::HuffmanError>,
    buf: [u8; AHEAD_LEN],
}

impl Ahead {
    fn new() -> Self {
        Self {
            string: None,
            result: Ok(0),
            buf: [0; AHEAD_LEN],
        }
    }
}

/// Fields whose values are credentials or session state: serialized as their length only, so
/// an echo stored in the database never holds a secret in clear (a leaky exit may forward
/// `proxy-authorization`).
pub const REDACTED_FIELDS: [&[u8]; 4] = [
    b"authorization",
    b"proxy-authorization",
    b"cookie",
    b"set-cookie",
];

impl Serialize for Field<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Field", 4)?;
        st.serialize_field("name", &String::from_utf8_lossy(self.name))?;
        if REDACTED_FIELDS.contains(&self.name) {
            st.serialize_field("value", &None::<&str>)?;
        } else {
            st.serialize_field("value", &String::from_utf8_lossy(self.value))?;
        }
        st.serialize_field("value_length", &self.value.len())?;
        st.serialize_field("representation", &self.representation)?;
        st.end()
    }
}

/// Serializes the fields of a block as a JSON list.
struct FieldList<'a>(&'a HeaderBlock);

impl Serialize for FieldList<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.fields())
    }
}

impl Serialize for HeaderBlock {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("HeaderBlock", 2)?;
        st.serialize_field("fields", &FieldList(self))?;
        st.serialize_field("table_size_updates", &self.table_size_updates)?;
        st.end()
    }
}
