//! The HPACK Huffman code (RFC 7541 section 5.2 and Appendix B), decoding only.
//!
//! The code of Appendix B is canonical: within one code length, codes are consecutive and follow
//! symbol order, and each length starts where the previous one ended, shifted left. So the table
//! is fully described by the code length of each of the 257 symbols, and the decoding tables are
//! computed from those lengths at compile time. A 4,096-entry table over the next 12 bits resolves
//! up to two codes per lookup (every printable ASCII octet but a few has a code of at most 12
//! bits; 5 to 8 bits for letters, digits and common punctuation); longer codes fall back to the
//! canonical walk over lengths 13 to 30.

/// Code length in bits of each symbol 0..=255 and of EOS (256), RFC 7541 Appendix B.
/// (Generated from the Python `hpack` package's `huffman_constants.REQUEST_CODES_LENGTH`, which
/// is the RFC table; the canonical property was checked against its `REQUEST_CODES`.)
#[rustfmt::skip]
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    30,
];

/// The end-of-string symbol; it MUST NOT appear inside a string (RFC 7541 section 5.2).
const EOS: u16 = 256;
/// Longest code (EOS and a few control bytes).
const MAX_LEN: usize = 30;

/// Canonical decoding tables, indexed by code length.
struct Canonical {
    /// First code of each length.
    first: [u32; MAX_LEN + 1],
    /// Number of codes of each length.
    count: [u32; MAX_LEN + 1],
    /// Index into `symbols` of the first symbol of each length.
    start: [u16; MAX_LEN + 1],
    /// Symbols sorted by (code length, symbol).
    symbols: [u16; 257],
}

const fn build() -> Canonical {
    let mut count = [0u32; MAX_LEN + 1];
    let mut sym = 0;
    while sym < 257 {
        count[LENGTHS[sym] as usize] += 1;
        sym += 1;
    }
    let mut first = [0u32; MAX_LEN + 1];
    let mut start = [0u16; MAX_LEN + 1];
    let mut code = 0u32;
    let mut index = 0u16;
    let mut len = 1;
    while len <= MAX_LEN {
        first[len] = code;
        start[len] = index;
        index += count[len] as u16;
        code = (code + count[len]) << 1;
        len += 1;
    }
    let mut symbols = [0u16; 257];
    let mut next = 0;
    len = 1;
    while len <= MAX_LEN {
        sym = 0;
        while sym < 257 {
            if LENGTHS[sym] as usize == len {
                symbols[next] = sym as u16;
                next += 1;
            }
            sym += 1;
        }
        len += 1;
    }
    Canonical {
        first,
        count,
        start,
        symbols,
    }
}

static TABLE: Canonical = build();

/// Bits looked up at once by [`PAIRS`].
const PAIR_BITS: u32 = 12;

/// Two-symbol table over the next 12 bits: the codes that fit in those bits (up to two), as
/// `sym1 | sym2 << 8 | count << 16 | len1 << 20 | bits << 24` (`len1` the first code's length,
/// `bits` both codes' lengths); all zero when the first code is longer than 12 bits. Computed
/// at compile time from [`TABLE`].
static PAIRS: [u32; 1 << PAIR_BITS] = build_pairs(&TABLE);

const fn build_pairs(t: &Canonical) -> [u32; 1 << PAIR_BITS] {
    let mut table = [0u32; 1 << PAIR_BITS];
    let mut pattern = 0u32;
    while pattern < 1 << PAIR_BITS {
        let mut entry = 0u32;
        let mut used = 0u32;
        let mut count = 0u32;
        while count < 2 {
            let Some((sym, len)) = canonical_at(t, pattern, used) else {
                break;
            };
            entry |= (sym as u32) << (8 * count);
            if count == 0 {
                entry |= len << 20;
            }
            count += 1;
            used += len;
        }
        table[pattern as usize] = entry | count << 16 | used << 24;
        pattern += 1;
    }
    table
}

/// The symbol whose code starts `used` bits into the 12-bit `pattern` and ends inside it.
const fn canonical_at(t: &Canonical, pattern: u32, used: u32) -> Option<(u8, u32)> {
    let avail = PAIR_BITS - used;
    let mut l = 5;
    while l <= avail {
        let code = (pattern >> (avail - l)) & ((1 << l) - 1);
        let offset = code.wrapping_sub(t.first[l as usize]);
        if offset < t.count[l as usize] {
            // Codes of at most 12 bits are never EOS (30 bits), so the symbol fits a byte.
            return Some((
                t.symbols[t.start[l as usize] as usize + offset as usize] as u8,
                l,
            ));
        }
        l += 1;
    }
    None
}

/// Why a Huffman string could not be decoded (RFC 7541 section 5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[non_exhaustive]
pub enum HuffmanError {
    /// The EOS symbol appeared inside the string.
    #[error("EOS symbol inside a Huffman string")]
    EosInString,
    /// The padding was longer than 7 bits.
    #[error("Huffman padding longer than 7 bits")]
    PaddingTooLong,
    /// The padding was not the most significant bits of EOS (all ones).
    #[error("Huffman padding is not a prefix of EOS")]
    BadPadding,
}

/// Most octets `len` Huffman-coded bytes can decode to, plus the room the decoder needs: the
/// shortest code is 5 bits, so at most 8/5 octets per byte; 8 more for the slack of the
/// unrolled lookups' writes.
pub(crate) const fn max_decoded_len(len: usize) -> usize {
    len * 8 / 5 + 8
}

/// Decode the Huffman string `src` into `dst` (of at least [`max_decoded_len`] octets, or the
/// output is cut); returns the number of octets written. On an error, `dst` holds junk.
pub(crate) fn decode(src: &[u8], dst: &mut [u8]) -> Result<usize, HuffmanError> {
    decode_from(src, dst, 0, 0, 0, 0)
}

/// [`decode`] from a state: `pos` bytes read into `acc`, whose top `nbits` are valid (the bits
/// below them are zero or the stream's next bits, of the byte at `pos`, so OR-ing that byte in
/// again is harmless; past the end of `src` they are zero), `w` octets written.
fn decode_from(
    src: &[u8],
    dst: &mut [u8],
    mut pos: usize,
    mut acc: u64,
    mut nbits: u32,
    mut w: usize,
) -> Result<usize, HuffmanError> {
    loop {
        if let Some(word) = src.get(pos..).and_then(|s| s.first_chunk::<8>()) {
            // Refill to 56..=63 bits from one 8-byte big-endian read.
            acc |= u64::from_be_bytes(*word) >> nbits;
            pos += ((63 - nbits) / 8) as usize;
            nbits |= 56;
            // At least 56 bits are at hand: four lookups of at most 12 bits each fit, and they
            // write at most 8 octets.
            if let Some(chunk) = dst.get_mut(w..).and_then(|d| d.first_chunk_mut::<8>()) {
                let mut k = 0usize;
                let mut long = false;
                for _ in 0..4 {
                    // In bounds: a u64 shifted right by 52 is below 4096, the table's length.
                    let e = PAIRS[(acc >> (64 - PAIR_BITS)) as usize];
                    let used = e >> 24;
                    if used == 0 {
                        long = true;
                        break;
                    }
                    // `k` grows by 1 or 2 per lookup, so `k + 2 <= 8` holds: no bounds check.
                    if let Some(d) = chunk.get_mut(k..k + 2) {
                        d.copy_from_slice(&(e as u16).to_le_bytes());
                    }
                    k += 1 + ((e >> 17) & 1) as usize;
                    acc <<= used;
                    nbits -= used;
                }
                w += k;
                if !long {
                    // Each lookup used 5 bits or more: the refill takes 2 bytes or more.
                    continue;
                }
            }
        } else if let Some(rest) = src.get(pos..).filter(|r| !r.is_empty()) {
            // Fewer than 8 bytes are left: read them all at once, left-aligned.
            let rem = rest.len();
            let last = src
                .len()
                .checked_sub(8)
                .and_then(|s| src.get(s..))
                .and_then(|s| s.first_chunk::<8>());
            let word = match last {
                Some(last) => u64::from_be_bytes(*last),
                None => rest.iter().fold(0, |w, &b| w << 8 | u64::from(b)),
            } << (8 * (8 - rem));
            // Whole bytes that fit; the rest of the word's bits are the stream's next bits.
            let take = rem.min(((64 - nbits) / 8) as usize);
            acc |= word.checked_shr(nbits).unwrap_or(0);
            nbits += 8 * take as u32;
            pos += take;
        }
        // Up to two symbols per lookup while 12 bits are at hand.
        while nbits >= PAIR_BITS {
            // In bounds: a u64 shifted right by 52 is below 4096, the table's length.
            let e = PAIRS[(acc >> (64 - PAIR_BITS)) as usize];
            let used = e >> 24;
            if used == 0 {
                // The first code is longer than 12 bits.
                break;
            }
            // Write both symbol slots; the count says how many are real.
            if let Some(d) = dst.get_mut(w..w + 2) {
                d.copy_from_slice(&(e as u16).to_le_bytes());
            }
            w += ((e >> 16) & 0xf) as usize;
            acc <<= used;
            nbits -= used;
        }
        if pos < src.len() && nbits < MAX_LEN as u32 {
            continue;
        }
        // Here either a code longer than 12 bits has all its bits at hand, or the string's
        // last bits (fewer than 12) are left.
        let e = PAIRS[(acc >> (64 - PAIR_BITS)) as usize];
        let len1 = (e >> 20) & 0xf;
        let next = if e != 0 {
            // Past the end of `src` the pattern's bits are zero: the first code is real only if
            // it ends within the valid bits.
            (len1 <= nbits).then_some((e as u8, len1))
        } else {
            long_code(acc, nbits)?
        };
        let Some((sym, len)) = next else {
            // What is left cannot complete a symbol: it must be padding (section 5.2).
            return padding(acc, nbits).map(|()| w);
        };
        if let Some(d) = dst.get_mut(w) {
            *d = sym;
        }
        w += 1;
        acc <<= len;
        nbits -= len;
    }
}

/// Decode two Huffman strings at once, `a` into `a_out` and `b` into `b_out` (each of at least
/// [`max_decoded_len`] octets); returns the number of octets of each.
///
/// Decoding is a chain of table lookups, each waiting on the one before for its index. Here
/// the lookups of both strings run in one loop while both have 8 bytes or more to read, so the
/// CPU overlaps two independent chains: two long strings take about a third less time than one
/// after the other. Each string's last bytes are decoded as by [`decode`].
pub(crate) fn decode_pair(
    a: &[u8],
    a_out: &mut [u8],
    b: &[u8],
    b_out: &mut [u8],
) -> (Result<usize, HuffmanError>, Result<usize, HuffmanError>) {
    let (mut x, mut y) = (Bits::new(a), Bits::new(b));
    // `&`, not `&&`: both refill when both can (a refill alone is harmless).
    while x.refill_word() & y.refill_word() {
        // Likewise both take their four lookups, or stop at a long code.
        if !(x.four(a_out) & y.four(b_out)) {
            break;
        }
    }
    (x.finish(a_out), y.finish(b_out))
}

/// The state of one string being decoded by [`decode_pair`]: `pos` bytes read into `acc`,
/// whose top `nbits` are valid, `w` octets written (see [`decode_from`]).
struct Bits<'a> {
    src: &'a [u8],
    pos: usize,
    acc: u64,
    nbits: u32,
    w: usize,
}

impl<'a> Bits<'a> {
    fn new(src: &'a [u8]) -> Self {
        Self {
            src,
            pos: 0,
            acc: 0,
            nbits: 0,
            w: 0,
        }
    }

    /// Refill to 56..=63 bits from one 8-byte big-endian read; `false` (nothing done) when
    /// fewer than 8 bytes are left.
    #[inline(always)]
    fn refill_word(&mut self) -> bool {
        let Some(word) = self.src.get(self.pos..).and_then(|s| s.first_chunk::<8>()) else {
            return false;
        };
        self.acc |= u64::from_be_bytes(*word) >> self.nbits;
        self.pos += ((63 - self.nbits) / 8) as usize;
        self.nbits |= 56;
        true
    }

    /// Right after [`Self::refill_word`] (56 bits or more at hand): four two-symbol lookups,
    /// unrolled, into an 8-octet window of `dst`. `false` when a code longer than 12 bits
    /// stopped them (or `dst` had no room, which [`max_decoded_len`] rules out).
    #[inline(always)]
    fn four(&mut self, dst: &mut [u8]) -> bool {
        let Some(chunk) = dst.get_mut(self.w..).and_then(|d| d.first_chunk_mut::<8>()) else {
            return false;
        };
        let mut k = 0usize;
        let mut done = true;
        for _ in 0..4 {
            // In bounds: a u64 shifted right by 52 is below 4096, the table's length.
            let e = PAIRS[(self.acc >> (64 - PAIR_BITS)) as usize];
            let used = e >> 24;
            if used == 0 {
                done = false;
                break;
            }
            // Both symbol slots are written; the count says how many are real. `k` grows by 1
            // or 2 per lookup, so `k + 2 <= 8` holds: no bounds check.
            if let Some(d) = chunk.get_mut(k..k + 2) {
                d.copy_from_slice(&(e as u16).to_le_bytes());
            }
            k += 1 + ((e >> 17) & 1) as usize;
            self.acc <<= used;
            self.nbits -= used;
        }
        self.w += k;
        done
    }

    /// Decode the rest of the string into `dst`.
    fn finish(self, dst: &mut [u8]) -> Result<usize, HuffmanError> {
        decode_from(self.src, dst, self.pos, self.acc, self.nbits, self.w)
    }
}

/// The symbol of a code of 13 to 30 bits at the top of `acc` (`nbits` valid), by the canonical
/// walk over lengths; `None` when no code ends within the valid bits.
fn long_code(acc: u64, nbits: u32) -> Result<Option<(u8, u32)>, HuffmanError> {
    let t = &TABLE;
    let mut l = PAIR_BITS as usize + 1;
    while l <= MAX_LEN && l as u32 <= nbits {
        let code = (acc >> (64 - l)) as u32;
        let (Some(&first), Some(&count), Some(&start)) =
            (t.first.get(l), t.count.get(l), t.start.get(l))
        else {
            break;
        };
        let offset = code.wrapping_sub(first);
        if offset < count {
            let index = usize::from(start) + offset as usize;
            let sym = t.symbols.get(index).copied().unwrap_or(EOS);
            if sym == EOS {
                return Err(HuffmanError::EosInString);
            }
            return Ok(Some((sym as u8, l as u32)));
        }
        l += 1;
    }
    Ok(None)
}

/// Check the `nbits` left at the top of `acc` as padding: at most 7 bits, all ones (the most
/// significant bits of EOS).
fn padding(acc: u64, nbits: u32) -> Result<(), HuffmanError> {
    if nbits == 0 {
        return Ok(());
    }
    if nbits > 7 {
        return Err(HuffmanError::PaddingTooLong);
    }
    let ones = (1u64 << nbits) - 1;
    if acc >> (64 - nbits) != ones {
        return Err(HuffmanError::BadPadding);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(src: &[u8]) -> Result<Vec<u8>, HuffmanError> {
        let mut out = vec![0; max_decoded_len(src.len())];
        decode(src, &mut out).map(|n| out[..n].to_vec())
    }

    #[test]
    fn rfc7541_c4_strings() {
        // RFC 7541 C.4.1: "www.example.com".
        let www = [
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ];
        assert_eq!(dec(&www).as_deref(), Ok(&b"www.example.com"[..]));
        // C.4.2: "no-cache".
        let nc = [0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf];
        assert_eq!(dec(&nc).as_deref(), Ok(&b"no-cache"[..]));
    }

    /// Encode `syms` with the canonical code, padded with ones to a whole octet.
    fn encode(syms: &[u8]) -> Vec<u8> {
        let t = &TABLE;
        let mut bits: Vec<bool> = Vec::new();
        for &sym in syms {
            let len = LENGTHS[usize::from(sym)] as usize;
            let rank = (usize::from(t.start[len])..)
                .zip(&t.symbols[usize::from(t.start[len])..])
                .find(|&(_, &s)| s == u16::from(sym))
                .map(|(i, _)| i - usize::from(t.start[len]))
                .unwrap();
            let code = t.first[len] + rank as u32;
            bits.extend((0..len).rev().map(|i| code >> i & 1 == 1));
        }
        bits.chunks(8)
            .map(|c| {
                (0..8).fold(0u8, |b, i| {
                    b << 1 | u8::from(c.get(i).copied().unwrap_or(true))
                })
            })
            .collect()
    }

    /// Bit-at-a-time canonical decoding, the simplest reading of the code.
    fn reference(src: &[u8]) -> Result<Vec<u8>, HuffmanError> {
        let t = &TABLE;
        let mut out = Vec::new();
        let (mut code, mut len) = (0u32, 0usize);
        for i in 0..src.len() * 8 {
            code = code << 1 | u32::from(src[i / 8] >> (7 - i % 8) & 1);
            len += 1;
            let offset = code.wrapping_sub(t.first[len]);
            if offset < t.count[len] {
                let sym = t.symbols[usize::from(t.start[len]) + offset as usize];
                if sym == EOS {
                    return Err(HuffmanError::EosInString);
                }
                out.push(sym as u8);
                (code, len) = (0, 0);
            }
        }
        match len {
            0 => Ok(out),
            8.. => Err(HuffmanError::PaddingTooLong),
            _ if code == (1 << len) - 1 => Ok(out),
            _ => Err(HuffmanError::BadPadding),
        }
    }

    proptest::proptest! {
        /// Any octet string, encoded and padded: decodes back, as the reference does.
        #[test]
        fn table_decoding_matches_the_bitwise_walk(
            syms in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            ascii in proptest::collection::vec(0x20u8..0x7f, 0..200),
        ) {
            for s in [&syms, &ascii] {
                let enc = encode(s);
                proptest::prop_assert_eq!(reference(&enc), Ok(s.clone()));
                proptest::prop_assert_eq!(dec(&enc), reference(&enc));
            }
        }

        /// Two strings decoded at once: each as the reference decodes it alone.
        #[test]
        fn pairs_match_the_bitwise_walk(
            a in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
            b in proptest::collection::vec(0x20u8..0x7f, 0..80),
            raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
        ) {
            let (ea, eb) = (encode(&a), encode(&b));
            for (x, y) in [(&ea, &eb), (&eb, &ea), (&raw, &ea), (&eb, &raw)] {
                let mut x_out = vec![0; max_decoded_len(x.len())];
                let mut y_out = vec![0; max_decoded_len(y.len())];
                let (rx, ry) = decode_pair(x, &mut x_out, y, &mut y_out);
                proptest::prop_assert_eq!(rx.map(|n| x_out[..n].to_vec()), reference(x));
                proptest::prop_assert_eq!(ry.map(|n| y_out[..n].to_vec()), reference(y));
            }
        }

        /// Arbitrary bytes: same octets or same error as the reference.
        #[test]
        fn arbitrary_bytes_match_the_bitwise_walk(
            raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            proptest::prop_assert_eq!(dec(&raw), reference(&raw));
        }
    }

    #[test]
    fn padding_rules() {
        // 8 bits of ones is padding longer than 7 bits.
        assert_eq!(dec(&[0xff]), Err(HuffmanError::PaddingTooLong));
        // 'a' (00011, 5 bits) then 000 padding: not all ones.
        assert_eq!(dec(&[0b0001_1000]), Err(HuffmanError::BadPadding));
        assert_eq!(dec(&[0b0001_1111]).as_deref(), Ok(&b"a"[..]));
        // EOS (30 ones) inside the string.
        assert_eq!(
            dec(&[0xff, 0xff, 0xff, 0xff]),
            Err(HuffmanError::EosInString)
        );
    }
}
