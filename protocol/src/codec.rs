//! One bounds-checked reader for every parser of untrusted bytes.
//!
//! Parsers never index into a buffer: they `take` from a [`Reader`], which answers `None` when the
//! bytes run out, and open a sub-reader for each length-prefixed field so a bad length can only
//! ever spoil that field.

/// A cursor over borrowed bytes.
#[derive(Clone, Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    /// Bytes consumed so far, for error offsets.
    used: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, used: 0 }
    }

    /// The next `len` bytes, or `None` if fewer remain (nothing is consumed then).
    pub(crate) fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let (out, rest) = self.buf.split_at_checked(len)?;
        self.buf = rest;
        self.used += len;
        Some(out)
    }

    /// Everything that is left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let out = self.buf;
        self.used += out.len();
        self.buf = &[];
        out
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u24(&mut self) -> Option<u32> {
        self.take(3)
            .map(|b| u32::from_be_bytes([0, b[0], b[1], b[2]]))
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A QUIC variable-length integer (RFC 9000 section 16): the top two bits of the first
    /// byte give the length, 1, 2, 4 or 8 bytes.
    pub(crate) fn varint(&mut self) -> Option<u64> {
        let first = *self.buf.first()?;
        let bytes = self.take(1 << (first >> 6))?;
        Some(
            bytes
                .iter()
                .skip(1)
                .fold(u64::from(first & 0x3f), |acc, b| acc << 8 | u64::from(*b)),
        )
    }

    /// A sub-reader over the next `len` bytes.
    pub(crate) fn sub(&mut self, len: usize) -> Option<Reader<'a>> {
        self.take(len).map(Reader::new)
    }

    /// A sub-reader over a field prefixed by a one-byte length.
    pub(crate) fn sub_u8(&mut self) -> Option<Reader<'a>> {
        let len = self.u8()?;
        self.sub(usize::from(len))
    }

    /// A sub-reader over a field prefixed by a two-byte length.
    pub(crate) fn sub_u16(&mut self) -> Option<Reader<'a>> {
        let len = self.u16()?;
        self.sub(usize::from(len))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Offset of the cursor from the start of this reader.
    pub(crate) fn offset(&self) -> usize {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_past_end_consumes_nothing() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.take(4), None);
        assert_eq!(r.remaining(), 3);
        assert_eq!(r.u16(), Some(0x0102));
        assert_eq!(r.offset(), 2);
        assert_eq!(r.u16(), None);
        assert_eq!(r.u8(), Some(3));
        assert!(r.is_empty());
    }

    /// The four examples of RFC 9000 Appendix A.1.
    #[test]
    fn varints_of_rfc_9000_appendix_a1() {
        for (bytes, value) in [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c][..],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d][..], 494_878_333),
            (&[0x7b, 0xbd][..], 15_293),
            (&[0x25][..], 37),
            (&[0x40, 0x25][..], 37),
        ] {
            let mut r = Reader::new(bytes);
            assert_eq!(r.varint(), Some(value));
            assert!(r.is_empty());
        }
        let mut short = Reader::new(&[0x9d, 0x7f, 0x3e]);
        assert_eq!(short.varint(), None);
        assert_eq!(short.remaining(), 3, "nothing consumed");
    }

    #[test]
    fn length_prefixed_sub_reader_is_bounded() {
        let mut r = Reader::new(&[0x00, 0x02, 0xaa, 0xbb, 0xcc]);
        let mut sub = r.sub_u16().expect("two bytes follow the length");
        assert_eq!(sub.u24(), None);
        assert_eq!(sub.u16(), Some(0xaabb));
        assert_eq!(r.rest(), &[0xcc]);
        let mut bad = Reader::new(&[0x05, 0x01]);
        assert!(bad.sub_u8().is_none());
    }
}
