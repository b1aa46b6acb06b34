//! A byte buffer for building the ASCII fingerprint strings (JA3, JA4, ids) without per-char
//! UTF-8 encoding: digits go in as bytes, the buffer becomes a `String` once at the end.

use std::ops::Range;

/// Lowercase hex digits.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// The lowercase hex digit of the low nibble of `v`.
pub(crate) fn hex_digit(v: u8) -> u8 {
    HEX.get(usize::from(v & 0x0f)).copied().unwrap_or(b'0')
}

/// An ASCII string under construction.
pub(crate) struct Ascii(Vec<u8>);

impl Ascii {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self(Vec::with_capacity(capacity))
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn byte(&mut self, b: u8) {
        self.0.push(b);
    }

    /// Appends the bytes of another buffer.
    pub(crate) fn bytes_from(&mut self, other: &Ascii) {
        self.0.extend_from_slice(&other.0);
    }

    /// Appends raw ASCII bytes.
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    pub(crate) fn str(&mut self, s: &str) {
        self.0.extend_from_slice(s.as_bytes());
    }

    pub(crate) fn bytes(&self, range: Range<usize>) -> &[u8] {
        self.0.get(range).unwrap_or_default()
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// `value` in decimal.
    pub(crate) fn dec(&mut self, value: u16) {
        self.sep_dec(None, value);
    }

    /// `sep` (when given) then `value` in decimal, as one fixed-size 8-byte append cut back
    /// to the real length: no per-digit push, no variable-length copy.
    pub(crate) fn sep_dec(&mut self, sep: Option<u8>, value: u16) {
        let (mut word, mut len) = match sep {
            Some(sep) => ([sep, 0, 0, 0, 0, 0, 0, 0], 1),
            None => ([0u8; 8], 0),
        };
        let n = u32::from(value);
        let digits = match n {
            0..=9 => 1,
            10..=99 => 2,
            100..=999 => 3,
            1000..=9999 => 4,
            _ => 5,
        };
        len += digits;
        let mut rest = n;
        // `len` is at most 6, so every slot is inside the 8-byte word.
        for slot in word.iter_mut().take(len).rev().take(digits) {
            // `rest % 10` is a single digit.
            *slot = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        let at = self.0.len();
        self.0.extend_from_slice(&word);
        self.0.truncate(at + len);
    }

    /// `value` as 4 lowercase hex digits.
    pub(crate) fn hex4(&mut self, value: u16) {
        let [hi, lo] = value.to_be_bytes();
        self.0.extend_from_slice(&[
            hex_digit(hi >> 4),
            hex_digit(hi),
            hex_digit(lo >> 4),
            hex_digit(lo),
        ]);
    }

    /// `sep` then `value` as 4 lowercase hex digits, in one 5-byte append.
    pub(crate) fn sep_hex4(&mut self, sep: u8, value: u16) {
        let [hi, lo] = value.to_be_bytes();
        self.0.extend_from_slice(&[
            sep,
            hex_digit(hi >> 4),
            hex_digit(hi),
            hex_digit(lo >> 4),
            hex_digit(lo),
        ]);
    }

    /// `bytes` as lowercase hex.
    pub(crate) fn hex(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0
                .extend_from_slice(&[hex_digit(b >> 4), hex_digit(*b)]);
        }
    }

    /// The finished string (always ASCII, so the conversion cannot fail).
    pub(crate) fn into_string(self) -> String {
        String::from_utf8(self.0).unwrap_or_default()
    }
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
        a.sep_dec(Some(b'-'), 5);
        a.sep_dec(Some(b'-'), 12345);
        a.sep_hex4(b',', 0xff01);
        a.byte(b' ');
        a.hex4(0x0a1b);
        a.hex(&[0xff, 0x00]);
        assert_eq!(
            a.into_string(),
            "0 7 10 99 100 771 4865 65535 -5-12345,ff01 0a1bff00"
        );
    }
}
