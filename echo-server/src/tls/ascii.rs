//! The scratch buffer the fingerprint strings (JA3, JA4, ids) are built in: digits go in as
//! fixed-size word writes (no `fmt`, no per-digit push), every string of a hello shares the one
//! buffer, and the text is copied out whole, at exact size, after one UTF-8 check.

use std::ops::Range;

/// Lowercase hex digits.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// The lowercase hex digit of the low nibble of `v`.
pub(crate) fn hex_digit(v: u8) -> u8 {
    HEX.get(usize::from(v & 0x0f)).copied().unwrap_or(b'0')
}

/// The two lowercase hex digits of every byte, first digit in the low byte.
const HEX_PAIRS: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        table[i] = HEX[i >> 4] as u16 | (HEX[i & 0x0f] as u16) << 8;
        i += 1;
    }
    table
};

/// The two decimal digits of 0..100, ASCII, first digit in the low byte.
const DEC_PAIRS: [u16; 100] = {
    let mut table = [0u16; 100];
    let mut i = 0;
    while i < 100 {
        table[i] = (b'0' + (i / 10) as u8) as u16 | ((b'0' + (i % 10) as u8) as u16) << 8;
        i += 1;
    }
    table
};

/// The 4 lowercase hex digits of `v` in the low 4 bytes of a little-endian word, most
/// significant digit first.
fn hex4_word(v: u16) -> u64 {
    let [hi, lo] = v.to_be_bytes();
    u64::from(HEX_PAIRS[usize::from(hi)]) | u64::from(HEX_PAIRS[usize::from(lo)]) << 16
}

/// `value` in decimal as up to 5 ASCII digits in the low bytes of a little-endian word (first
/// digit in the lowest byte), and the number of digits.
fn dec_word(value: u16) -> (u64, usize) {
    let v = u32::from(value);
    let rest = v % 10_000;
    // `rest / 100` and `rest % 100` are below 100.
    let pair = |i: u32| u64::from(DEC_PAIRS.get(i as usize).copied().unwrap_or(0x3030));
    let word = u64::from(b'0' as u32 + v / 10_000) | pair(rest / 100) << 8 | pair(rest % 100) << 24;
    let len = 1
        + usize::from(v >= 10)
        + usize::from(v >= 100)
        + usize::from(v >= 1_000)
        + usize::from(v >= 10_000);
    // Drop the leading zeros (the lowest bytes).
    (word >> (8 * (5 - len)), len)
}

/// The scratch buffer: zeroed bytes (a caller's stack array, moved to the heap only if a hello
/// needs more) and the length of the text written so far. Writing goes through a [`Cursor`]
/// (see [`Self::write`]).
pub(crate) struct Ascii<'s> {
    stack: &'s mut [u8],
    heap: Vec<u8>,
    len: usize,
}

impl<'s> Ascii<'s> {
    /// A buffer starting in `stack` (zeroed or not: only bytes written are ever read).
    pub(crate) fn new(stack: &'s mut [u8]) -> Self {
        Self {
            stack,
            heap: Vec::new(),
            len: 0,
        }
    }

    fn buf(&mut self) -> &mut [u8] {
        if self.heap.is_empty() {
            self.stack
        } else {
            &mut self.heap
        }
    }

    /// Runs `f` with a cursor at the end of the text, after making sure at least `room` bytes
    /// (plus the 8 a word store may touch) are there; the text then ends where the cursor
    /// stopped. Should `f` run out of buffer anyway, the buffer is grown and `f` runs again
    /// from the same start, so a low `room` costs time, never output.
    pub(crate) fn write<R>(&mut self, room: usize, mut f: impl FnMut(&mut Cursor<'_>) -> R) -> R {
        let mut room = room;
        loop {
            let need = self.len + room + 8;
            if self.buf().len() < need {
                if self.heap.is_empty() {
                    let mut heap = vec![0; need.max(2 * self.stack.len())];
                    if let (Some(dst), Some(src)) =
                        (heap.get_mut(..self.len), self.stack.get(..self.len))
                    {
                        dst.copy_from_slice(src);
                    }
                    self.heap = heap;
                } else {
                    self.heap.resize(need, 0);
                }
            }
            let pos = self.len;
            let mut cursor = Cursor {
                buf: self.buf(),
                pos,
                full: false,
            };
            let result = f(&mut cursor);
            if !cursor.full {
                self.len = cursor.pos;
                return result;
            }
            room = 2 * room + 256;
        }
    }

    /// The whole text written so far (it only ever holds ASCII; `None` would be a bug here).
    pub(crate) fn text(&self) -> Option<&str> {
        let buf = if self.heap.is_empty() {
            &*self.stack
        } else {
            &self.heap
        };
        std::str::from_utf8(buf.get(..self.len)?).ok()
    }
}

/// A write position in the scratch buffer. Kept in a local, its position and the buffer bounds
/// stay in registers: a digit group is one bounds check and one 8-byte store.
pub(crate) struct Cursor<'b> {
    buf: &'b mut [u8],
    pos: usize,
    /// Set when a write did not fit; [`Ascii::write`] then grows the buffer and starts over.
    full: bool,
}

impl Cursor<'_> {
    /// Where the next byte goes.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Moves the position back to `pos` (dropping what was written after it).
    pub(crate) fn rewind(&mut self, pos: usize) {
        self.pos = self.pos.min(pos);
    }

    /// Bytes already written.
    pub(crate) fn bytes(&self, range: Range<usize>) -> &[u8] {
        if range.end > self.pos {
            return &[];
        }
        self.buf.get(range).unwrap_or_default()
    }

    /// The bytes written from `start` on, to be changed in place.
    pub(crate) fn written_mut(&mut self, start: usize) -> &mut [u8] {
        self.buf.get_mut(start..self.pos).unwrap_or_default()
    }

    /// Writes the low `len` bytes of `word` (at most 8) as one 8-byte store.
    #[inline]
    fn word(&mut self, word: u64, len: usize) {
        match self.buf.get_mut(self.pos..self.pos + 8) {
            Some(dst) => {
                dst.copy_from_slice(&word.to_le_bytes());
                self.pos += len;
            }
            None => self.full = true,
        }
    }

    #[inline]
    pub(crate) fn byte(&mut self, b: u8) {
        self.word(u64::from(b), 1);
    }

    /// `v` as two big-endian bytes (binary: the voice description, hashed then rewound).
    #[inline]
    pub(crate) fn be16(&mut self, v: u16) {
        self.word(u64::from(v.swap_bytes()), 2);
    }

    /// Appends bytes.
    #[inline]
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        match self.buf.get_mut(self.pos..self.pos + bytes.len()) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.pos += bytes.len();
            }
            None => self.full = true,
        }
    }

    pub(crate) fn str(&mut self, s: &str) {
        self.extend(s.as_bytes());
    }

    /// Appends a copy of bytes already written.
    pub(crate) fn repeat(&mut self, range: Range<usize>) {
        let n = range.end.saturating_sub(range.start);
        if range.end > self.pos || self.pos + n > self.buf.len() {
            self.full = true;
            return;
        }
        self.buf.copy_within(range, self.pos);
        self.pos += n;
    }

    /// Inserts `bytes` at `at`, moving what was written from there on along.
    pub(crate) fn insert(&mut self, at: usize, bytes: &[u8]) {
        let n = bytes.len();
        if at > self.pos || self.pos + n > self.buf.len() {
            self.full = true;
            return;
        }
        self.buf.copy_within(at..self.pos, at + n);
        if let Some(dst) = self.buf.get_mut(at..at + n) {
            dst.copy_from_slice(bytes);
        }
        self.pos += n;
    }

    /// `value` in decimal.
    #[inline]
    pub(crate) fn dec(&mut self, value: u16) {
        let (word, len) = dec_word(value);
        self.word(word, len);
    }

    /// `sep` then `value` in decimal.
    #[inline]
    pub(crate) fn sep_dec(&mut self, sep: u8, value: u16) {
        let (word, len) = dec_word(value);
        self.word(word << 8 | u64::from(sep), len + 1);
    }

    /// `values` in decimal joined by `sep`.
    pub(crate) fn dec_list(&mut self, sep: u8, values: impl IntoIterator<Item = u16>) {
        let mut values = values.into_iter();
        if let Some(first) = values.next() {
            self.dec(first);
        }
        for v in values {
            self.sep_dec(sep, v);
        }
    }

    /// `value` as 4 lowercase hex digits.
    #[inline]
    pub(crate) fn hex4(&mut self, value: u16) {
        self.word(hex4_word(value), 4);
    }

    /// `sep` then `value` as 4 lowercase hex digits.
    #[inline]
    pub(crate) fn sep_hex4(&mut self, sep: u8, value: u16) {
        self.word(hex4_word(value) << 8 | u64::from(sep), 5);
    }

    /// `values` as 4-digit hex joined by `sep`.
    pub(crate) fn hex4_list(&mut self, sep: u8, values: impl IntoIterator<Item = u16>) {
        let mut values = values.into_iter();
        if let Some(first) = values.next() {
            self.hex4(first);
        }
        for v in values {
            self.sep_hex4(sep, v);
        }
    }

    /// `bytes` as lowercase hex.
    pub(crate) fn hex(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.word(u64::from(HEX_PAIRS[usize::from(*b)]), 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_and_hex() {
        let mut a = Ascii::new(&mut []);
        // A room far too small: the writer grows and starts over.
        a.write(1, |c| {
            for v in [0u16, 7, 10, 99, 100, 771, 4865, 65535] {
                c.dec(v);
                c.byte(b' ');
            }
            c.sep_dec(b'-', 5);
            c.sep_dec(b'-', 12345);
            c.sep_hex4(b',', 0xff01);
            c.byte(b' ');
            c.hex4(0x0a1b);
            c.hex(&[0xff, 0x00, 0x9a]);
            c.dec_list(b'-', [1, 22, 333]);
            c.hex4_list(b',', [0x1301, 0xcafe]);
        });
        assert_eq!(
            a.text(),
            Some("0 7 10 99 100 771 4865 65535 -5-12345,ff01 0a1bff009a1-22-3331301,cafe")
        );
    }

    /// Every u16 in decimal and in hex against `format!`.
    #[test]
    fn every_value_matches_fmt() {
        for v in 0..=u16::MAX {
            let mut stack = [0u8; 16];
            let mut a = Ascii::new(&mut stack);
            a.write(16, |c| {
                c.dec(v);
                c.sep_dec(b'-', v);
                c.hex4(v);
                c.sep_hex4(b',', v);
            });
            assert_eq!(a.text(), Some(format!("{v}-{v}{v:04x},{v:04x}").as_str()));
        }
        let mut stack = [0u8; 4];
        let mut a = Ascii::new(&mut stack);
        a.write(0, |c| {
            c.hex(&[0x01, 0xab, 0xcd, 0xef]);
            c.repeat(0..2);
            c.be16(0x3132);
            c.str("x");
            c.extend(b"yz");
            c.insert(13, b"-");
            c.insert(15, b"+");
            c.rewind(16);
        });
        assert_eq!(a.text().and_then(|t| t.get(4..16)), Some("cdef0112x-y+"));
    }
}
