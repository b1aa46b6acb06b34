//! The HPACK Huffman code (RFC 7541 section 5.2 and Appendix B), decoding only.
//!
//! The code of Appendix B is canonical: within one code length, codes are consecutive and follow
//! symbol order, and each length starts where the previous one ended, shifted left. So the table
//! is fully described by the code length of each of the 257 symbols, and the decoding tables are
//! computed from those lengths at compile time. A 256-entry table resolves every code of up to 8
//! bits (all lowercase letters, digits and common punctuation) in one lookup; longer codes fall
//! back to the canonical walk over lengths 9 to 30.

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
    /// One-lookup table over the next 8 bits: `symbol | len << 8`, or 0 when no code of at most
    /// 8 bits is a prefix of those bits.
    fast: [u16; 256],
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
    let mut fast = [0u16; 256];
    let mut next = 0;
    len = 1;
    while len <= MAX_LEN {
        let mut rank = 0u32;
        sym = 0;
        while sym < 257 {
            if LENGTHS[sym] as usize == len {
                symbols[next] = sym as u16;
                next += 1;
                if len <= 8 {
                    let code = first[len] + rank;
                    let lo = (code << (8 - len)) as usize;
                    let hi = lo + (1 << (8 - len));
                    let mut slot = lo;
                    while slot < hi {
                        fast[slot] = sym as u16 | ((len as u16) << 8);
                        slot += 1;
                    }
                }
                rank += 1;
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
        fast,
    }
}

static TABLE: Canonical = build();

/// Bits looked up at once by [`PAIRS`].
const PAIR_BITS: u32 = 12;

/// Two-symbol table over the next 12 bits: the symbols whose codes fit in those bits (up to
/// two), `sym1 | sym2 << 8 | count << 16 | bits << 24`; count 0 when the first code is longer
/// than 12 bits. Built once at first use from [`TABLE`].
static PAIRS: std::sync::LazyLock<Box<[u32; 1 << PAIR_BITS]>> = std::sync::LazyLock::new(|| {
    let t = &TABLE;
    let mut table = Box::new([0u32; 1 << PAIR_BITS]);
    for (pattern, slot) in (0u32..).zip(table.iter_mut()) {
        *slot = {
            let mut used = 0u32;
            let mut syms = [0u32; 2];
            let mut count = 0;
            while count < 2 {
                let Some((sym, len)) = canonical_at(t, pattern, used) else {
                    break;
                };
                syms[count] = u32::from(sym);
                count += 1;
                used += len;
            }
            syms[0] | syms[1] << 8 | (count as u32) << 16 | used << 24
        };
    }
    table
});

/// The symbol whose code starts `used` bits into the 12-bit `pattern` and ends inside it.
fn canonical_at(t: &Canonical, pattern: u32, used: u32) -> Option<(u8, u32)> {
    let avail = PAIR_BITS - used;
    (5..=avail).find_map(|l| {
        let code = (pattern >> (avail - l)) & ((1 << l) - 1);
        let offset = code.wrapping_sub(t.first[l as usize]);
        (offset < t.count[l as usize]).then(|| {
            let index = usize::from(t.start[l as usize]) + offset as usize;
            // Codes of at most 12 bits are never EOS (30 bits), so `sym` fits a byte.
            (t.symbols.get(index).copied().unwrap_or(0) as u8, l)
        })
    })
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

/// Decode the Huffman string `src`, appending the octets to `out`.
pub(crate) fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let start = out.len();
    // The shortest code is 5 bits, so at most 8/5 octets per input byte; 2 more for the slack
    // of the two-symbol write.
    out.resize(start + src.len() * 8 / 5 + 2, 0);
    let result = decode_into(src, out.get_mut(start..).unwrap_or_default());
    match result {
        Ok(n) => {
            out.truncate(start + n);
            Ok(())
        }
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

/// Decode into `dst` (large enough, see [`decode`]); returns the number of octets written.
fn decode_into(src: &[u8], dst: &mut [u8]) -> Result<usize, HuffmanError> {
    let t = &TABLE;
    let pairs: &[u32; 1 << PAIR_BITS] = &PAIRS;
    let mut w = 0usize;
    // Bits are kept left-aligned in `acc`; the top `nbits` are valid.
    let mut acc: u64 = 0;
    let mut nbits: u32 = 0;
    let mut rest = src;
    loop {
        if nbits <= 56 {
            if let Some((word, _)) = rest.split_first_chunk::<8>() {
                // Fill whole bytes at once from an 8-byte big-endian read.
                let take = (64 - nbits) / 8;
                acc |= u64::from_be_bytes(*word) >> nbits;
                // Clear the bits of the byte that did not fit whole.
                let keep = nbits + take * 8;
                acc &= if keep >= 64 {
                    u64::MAX
                } else {
                    !(u64::MAX >> keep)
                };
                nbits = keep;
                rest = rest.get(take as usize..).unwrap_or_default();
            } else {
                while nbits <= 56 {
                    let Some((&b, tail)) = rest.split_first() else {
                        break;
                    };
                    acc |= u64::from(b) << (56 - nbits);
                    nbits += 8;
                    rest = tail;
                }
            }
        }
        if nbits == 0 {
            return Ok(w);
        }
        if nbits >= PAIR_BITS {
            // In bounds: a u64 shifted right by 52 is below 4096, the table's length.
            let e = pairs[(acc >> (64 - PAIR_BITS)) as usize];
            let count = (e >> 16) & 0xff;
            if count != 0 {
                // Write both symbol slots; `count` says how many are real.
                if let Some(d) = dst.get_mut(w..w + 2) {
                    d.copy_from_slice(&[e as u8, (e >> 8) as u8]);
                }
                w += count as usize;
                let used = e >> 24;
                acc <<= used;
                nbits -= used;
                continue;
            }
        }
        // In bounds: a u64 shifted right by 56 is below 256, the table's length.
        let entry = t.fast[(acc >> 56) as usize];
        let len = u32::from(entry >> 8);
        if len != 0 && len <= nbits {
            if let Some(d) = dst.get_mut(w) {
                *d = entry as u8;
            }
            w += 1;
            acc <<= len;
            nbits -= len;
            continue;
        }
        let mut found = false;
        let mut l = 5;
        while l <= MAX_LEN && l as u32 <= nbits {
            let code = (acc >> (64 - l)) as u32;
            let offset = code.wrapping_sub(t.first[l]);
            if offset < t.count[l] {
                let index = usize::from(t.start[l]) + offset as usize;
                let sym = t.symbols.get(index).copied().unwrap_or(EOS);
                if sym == EOS {
                    return Err(HuffmanError::EosInString);
                }
                if let Some(d) = dst.get_mut(w) {
                    *d = sym as u8;
                }
                w += 1;
                acc <<= l;
                nbits -= l as u32;
                found = true;
                break;
            }
            l += 1;
        }
        if !found {
            // What is left cannot complete a symbol: it must be padding (section 5.2).
            if nbits > 7 {
                return Err(HuffmanError::PaddingTooLong);
            }
            let ones = (1u64 << nbits) - 1;
            if acc >> (64 - nbits) != ones {
                return Err(HuffmanError::BadPadding);
            }
            return Ok(w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(src: &[u8]) -> Result<Vec<u8>, HuffmanError> {
        let mut out = Vec::new();
        decode(src, &mut out).map(|()| out)
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
