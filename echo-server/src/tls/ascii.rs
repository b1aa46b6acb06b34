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
        let mut digits = [0u8; 5];
        let mut n = value;
        let mut start = digits.len();
        for slot in digits.iter_mut().rev() {
            // `n % 10` is a single digit.
            *slot = b'0' + (n % 10) as u8;
            n /= 10;
            start -= 1;
            if n == 0 {
                break;
            }
        }
        // Byte pushes: a variable-length copy would be a memmove call.
        for d in digits.iter().skip(start) {
            self.0.push(*d);
        }
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
        a.hex4(0x0a1b);
        a.hex(&[0xff, 0x00]);
        assert_eq!(a.into_string(), "0 7 10 99 100 771 4865 65535 0a1bff00");
    }
}
