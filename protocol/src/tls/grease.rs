//! GREASE (RFC 8701): reserved values clients sprinkle into their lists so servers stay tolerant.
//!
//! The exact test: both bytes equal and the low nibble of each is `a` (`0x0a0a`, `0x1a1a`, …,
//! `0xfafa`). tls-parser's `v & 0x0f0f == 0x0a0a` alone also accepts `0x0a1a`, which is not GREASE.

/// The 16 GREASE values of RFC 8701 section 2.
pub const GREASE_VALUES: [u16; 16] = [
    0x0a0a, 0x1a1a, 0x2a2a, 0x3a3a, 0x4a4a, 0x5a5a, 0x6a6a, 0x7a7a, 0x8a8a, 0x9a9a, 0xaaaa, 0xbaba,
    0xcaca, 0xdada, 0xeaea, 0xfafa,
];

/// Whether a two-byte code point is an RFC 8701 GREASE value.
pub const fn is_grease(value: u16) -> bool {
    value & 0x0f0f == 0x0a0a && value >> 8 == value & 0x00ff
}

/// `values` without GREASE, in order, in one allocation (room for all of them).
pub(crate) fn without_grease(values: impl Iterator<Item = u16>) -> Vec<u16> {
    let mut out = Vec::with_capacity(values.size_hint().0);
    out.extend(values.filter(|v| !is_grease(*v)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_sixteen_values_and_nothing_else() {
        for v in GREASE_VALUES {
            assert!(is_grease(v), "{v:#06x}");
        }
        assert!(!is_grease(0x0a1a));
        assert!(!is_grease(0x1a0a));
        assert!(!is_grease(0x0a0b));
        assert!(!is_grease(0x0000));
        let count = (0..=u16::MAX).filter(|v| is_grease(*v)).count();
        assert_eq!(count, 16);
    }
}
