//! The scratch buffer the fingerprint strings (JA3, JA4, ids) are built in: digits go in as
//! fixed-size word writes (no `fmt`, no per-digit push), every string of a hello shares the one
//! buffer, and the output `String`s are cut from it at exact size after one UTF-8 check.

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

/// An ASCII buffer under construction: a zeroed byte buffer and the length written so far, so
/// that a digit group is one bounds-checked 8-byte store (the tail past `len` is scratch).
///
/// The voice writes its binary description here too, past the text, and cuts it off once
/// hashed ([`Self::be16`], [`Self::truncate`]): [`Self::text`] only ever sees ASCII.
pub(crate) struct Ascii {
    buf: Vec<u8>,
    len: usize,
}

impl Ascii {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            buf: vec![0; capacity.max(8)],
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Cuts the buffer back to `len` bytes.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Makes room for `extra` more bytes past `len`.
    #[cold]
    fn grow(&mut self, extra: usize) {
        let need = self.len + extra;
        self.buf.resize(need.max(2 * self.buf.len()), 0);
    }

    /// The `n` bytes at `len`, growing the buffer if needed (`len` is not moved).
    #[inline]
    fn slot(&mut self, n: usize) -> &mut [u8] {
        if self.buf.len() < self.len + n {
            self.grow(n);
        }
        self.buf.get_mut(self.len..self.len + n).unwrap_or_default()
    }

    /// `v` as two big-endian bytes (binary, for the voice description).
    #[inline]
    pub(crate) fn be16(&mut self, v: u16) {
        self.word(u64::from(v.swap_bytes()), 2);
    }

    #[inline]
    pub(crate) fn byte(&mut self, b: u8) {
        self.word(u64::from(b), 1);
    }

    /// Appends raw ASCII bytes.
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        self.slot(bytes.len()).copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// Appends a copy of bytes already in the buffer (`range` comes from [`Self::len`]).
    pub(crate) fn repeat(&mut self, range: Range<usize>) {
        if range.start <= range.end && range.end <= self.len {
            let n = range.end - range.start;
            self.slot(n);
            self.buf.copy_within(range, self.len);
            self.len += n;
        }
    }

    pub(crate) fn str(&mut self, s: &str) {
        self.extend(s.as_bytes());
    }

    pub(crate) fn bytes(&self, range: Range<usize>) -> &[u8] {
        if range.end > self.len {
            return &[];
        }
        self.buf.get(range).unwrap_or_default()
    }

    /// Writes the low `len` bytes of `word` (at most 8) as one 8-byte store.
    #[inline]
    fn word(&mut self, word: u64, len: usize) {
        self.slot(8).copy_from_slice(&word.to_le_bytes());
        self.len += len;
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

    /// The whole text written so far (it only ever holds ASCII; `None` would be a bug here).
    pub(crate) fn text(&self) -> Option<&str> {
        std::str::from_utf8(self.buf.get(..self.len)?).ok()
    }
}

/// The part `range` of `text` as an owned string of exactly that size.
pub(crate) fn cut(text: &str, range: Range<usize>) -> String {
    text.get(range).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_and_hex() {
        let mut a = Ascii::with_capacity(8);
        for v in [0u16, 7, 10, 99, 100, 771, 4865, 65535] {
            a.dec(v);
            a.byte(b' ');
        }
        a.sep_dec(b'-', 5);
        a.sep_dec(b'-', 12345);
        a.sep_hex4(b',', 0xff01);
        a.byte(b' ');
        a.hex4(0x0a1b);
        a.hex(&[0xff, 0x00, 0x9a]);
        a.dec_list(b'-', [1, 22, 333]);
        a.hex4_list(b',', [0x1301, 0xcafe]);
        assert_eq!(
            a.text(),
            Some("0 7 10 99 100 771 4865 65535 -5-12345,ff01 0a1bff009a1-22-3331301,cafe")
        );
    }

    /// Every u16 in decimal and in hex against `format!`.
    #[test]
    fn every_value_matches_fmt() {
        for v in 0..=u16::MAX {
            let mut a = Ascii::with_capacity(16);
            a.dec(v);
            a.sep_dec(b'-', v);
            a.hex4(v);
            a.sep_hex4(b',', v);
            assert_eq!(a.text(), Some(format!("{v}-{v}{v:04x},{v:04x}").as_str()));
        }
        let mut a = Ascii::with_capacity(4);
        a.hex(&[0x01, 0xab, 0xcd, 0xef]);
        a.repeat(0..2);
        assert_eq!(a.text().map(|t| cut(t, 4..10)), Some("cdef01".to_owned()));
    }
}
