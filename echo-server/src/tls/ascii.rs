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

/// The 4 lowercase hex digits of `v`, most significant first, computed on all four nibbles at
/// once: each byte of `spread` holds one nibble; bytes ≥ 10 get the `'a' - '0' - 10` offset.
fn hex4_bytes(v: u16) -> [u8; 4] {
    let v = u32::from(v);
    let spread = (v >> 12) | ((v >> 8) & 0xf) << 8 | ((v >> 4) & 0xf) << 16 | (v & 0xf) << 24;
    // Bit 4 of each byte is set exactly when its nibble is 10..=15 (nibble + 6 ≥ 16).
    let letters = ((spread + 0x0606_0606) >> 4) & 0x0101_0101;
    // Each byte stays below 0x80: no carry crosses into the next byte.
    (spread + 0x3030_3030 + letters * 0x27).to_le_bytes()
}

/// `value` in decimal as up to 5 ASCII digits in the low bytes of a little-endian word (first
/// digit in the lowest byte), and the number of digits.
fn dec_word(value: u16) -> (u64, usize) {
    let v = u32::from(value);
    let rest = v % 10_000;
    let (hi, lo) = (rest / 100, rest % 100);
    let digits = [v / 10_000, hi / 10, hi % 10, lo / 10, lo % 10];
    let mut word = 0u64;
    for (i, d) in digits.iter().enumerate() {
        word |= u64::from(*d) << (8 * i);
    }
    let len = 1
        + usize::from(v >= 10)
        + usize::from(v >= 100)
        + usize::from(v >= 1_000)
        + usize::from(v >= 10_000);
    // Drop the leading zeros (the lowest bytes), then make the digits ASCII.
    let word = (word >> (8 * (5 - len))) + (0x30_3030_3030 >> (8 * (5 - len)));
    (word, len)
}

/// An ASCII buffer under construction.
pub(crate) struct Ascii(Vec<u8>);

impl Ascii {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self(Vec::with_capacity(capacity))
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Cuts the buffer back to `len` bytes.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.0.truncate(len);
    }

    pub(crate) fn byte(&mut self, b: u8) {
        self.0.push(b);
    }

    /// Appends raw ASCII bytes.
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    /// Appends a copy of bytes already in the buffer (`range` comes from [`Self::len`]).
    pub(crate) fn repeat(&mut self, range: Range<usize>) {
        if range.start <= range.end && range.end <= self.0.len() {
            self.0.extend_from_within(range);
        }
    }

    pub(crate) fn str(&mut self, s: &str) {
        self.0.extend_from_slice(s.as_bytes());
    }

    pub(crate) fn bytes(&self, range: Range<usize>) -> &[u8] {
        self.0.get(range).unwrap_or_default()
    }

    /// Writes the low `len` bytes of `word` (at most 8) as one 8-byte append cut back.
    fn word(&mut self, word: u64, len: usize) {
        let at = self.0.len();
        self.0.extend_from_slice(&word.to_le_bytes());
        self.0.truncate(at + len);
    }

    /// `value` in decimal.
    pub(crate) fn dec(&mut self, value: u16) {
        let (word, len) = dec_word(value);
        self.word(word, len);
    }

    /// `sep` then `value` in decimal.
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
    pub(crate) fn hex4(&mut self, value: u16) {
        self.0.extend_from_slice(&hex4_bytes(value));
    }

    /// `sep` then `value` as 4 lowercase hex digits.
    pub(crate) fn sep_hex4(&mut self, sep: u8, value: u16) {
        let word = u64::from(u32::from_le_bytes(hex4_bytes(value))) << 8 | u64::from(sep);
        self.word(word, 5);
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
        let mut pairs = bytes.chunks_exact(2);
        for pair in pairs.by_ref() {
            if let [a, b] = pair {
                self.hex4(u16::from_be_bytes([*a, *b]));
            }
        }
        for b in pairs.remainder() {
            self.0
                .extend_from_slice(&[hex_digit(b >> 4), hex_digit(*b)]);
        }
    }

    /// The whole buffer as text (it only ever holds ASCII; `None` would be a bug here).
    pub(crate) fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
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
