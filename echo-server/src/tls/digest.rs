//! md5 and sha256 of bytes already in the scratch buffer, one call each.
//!
//! sha256: every 64-byte block goes from the buffer straight to sha2's compression function
//! (SHA-NI when the CPU has it; the crate's `compress` feature), the padded tail from a small array.
//!
//! md5 (JA3 and JA3N): MD5 has no hardware support and each of its 64 steps depends on the one
//! before, so one computation leaves most of the CPU idle. JA3 and JA3N always have the same
//! length, so their blocks are compressed in lockstep, two independent chains interleaved (RFC
//! 1321 section 3.4, written out below): the pair takes ~1.3x the time of one chain, not 2x
//! (docs/benchmarks.md). Both hashes are checked against the sha2 and md-5 crates and the
//! RFC 1321 test suite below.

use md5::Digest;
use sha2::digest::generic_array::GenericArray;

/// Block size of both hashes.
const BLOCK: usize = 64;

/// SHA-256 initial hash value (FIPS 180-4 section 5.3.3).
const SHA256_IV: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

/// sha256(`data`): every block, the padded tail included, goes to sha2's compression function;
/// the digest is the state, big endian (FIPS 180-4 sections 5.1.1 and 6.2). Without the crate's
/// block buffer and finaliser around it a hash takes ~7 ns less.
pub(crate) fn sha256(data: &[u8]) -> [u8; 32] {
    let mut state = SHA256_IV;
    let (blocks, tail) = data.as_chunks::<BLOCK>();
    for block in blocks {
        let block = GenericArray::from_slice(block);
        sha2::compress256(&mut state, std::slice::from_ref(block));
    }
    let mut last = [0u8; 2 * BLOCK];
    let end = padded_tail(tail, data.len(), u64::to_be_bytes, &mut last);
    for block in last.as_chunks::<BLOCK>().0.iter().take(end / BLOCK) {
        let block = GenericArray::from_slice(block);
        sha2::compress256(&mut state, std::slice::from_ref(block));
    }
    let mut out = [0u8; 32];
    for (dst, word) in out.as_chunks_mut::<4>().0.iter_mut().zip(state) {
        *dst = word.to_be_bytes();
    }
    out
}

/// MD5 sine constants, `K[i] = floor(|sin(i + 1)| * 2^32)` (RFC 1321 section 3.4).
#[rustfmt::skip]
const MD5_K: [u32; 64] = [
    0xd76a_a478, 0xe8c7_b756, 0x2420_70db, 0xc1bd_ceee,
    0xf57c_0faf, 0x4787_c62a, 0xa830_4613, 0xfd46_9501,
    0x6980_98d8, 0x8b44_f7af, 0xffff_5bb1, 0x895c_d7be,
    0x6b90_1122, 0xfd98_7193, 0xa679_438e, 0x49b4_0821,
    0xf61e_2562, 0xc040_b340, 0x265e_5a51, 0xe9b6_c7aa,
    0xd62f_105d, 0x0244_1453, 0xd8a1_e681, 0xe7d3_fbc8,
    0x21e1_cde6, 0xc337_07d6, 0xf4d5_0d87, 0x455a_14ed,
    0xa9e3_e905, 0xfcef_a3f8, 0x676f_02d9, 0x8d2a_4c8a,
    0xfffa_3942, 0x8771_f681, 0x6d9d_6122, 0xfde5_380c,
    0xa4be_ea44, 0x4bde_cfa9, 0xf6bb_4b60, 0xbebf_bc70,
    0x289b_7ec6, 0xeaa1_27fa, 0xd4ef_3085, 0x0488_1d05,
    0xd9d4_d039, 0xe6db_99e5, 0x1fa2_7cf8, 0xc4ac_5665,
    0xf429_2244, 0x432a_ff97, 0xab94_23a7, 0xfc93_a039,
    0x655b_59c3, 0x8f0c_cc92, 0xffef_f47d, 0x8584_5dd1,
    0x6fa8_7e4f, 0xfe2c_e6e0, 0xa301_4314, 0x4e08_11a1,
    0xf753_7e82, 0xbd3a_f235, 0x2ad7_d2bb, 0xeb86_d391,
];

/// MD5 rotation amounts per step (RFC 1321 section 3.4).
const MD5_S: [u32; 64] = {
    let per_round = [
        [7, 12, 17, 22],
        [5, 9, 14, 20],
        [4, 11, 16, 23],
        [6, 10, 15, 21],
    ];
    let mut s = [0; 64];
    let mut i = 0;
    while i < 64 {
        s[i] = per_round[i / 16][i % 4];
        i += 1;
    }
    s
};

/// Message word used by each step (RFC 1321 section 3.4).
const MD5_G: [usize; 64] = {
    let mut g = [0; 64];
    let mut i = 0;
    while i < 64 {
        g[i] = match i / 16 {
            0 => i,
            1 => (5 * i + 1) % 16,
            2 => (3 * i + 5) % 16,
            _ => (7 * i) % 16,
        };
        i += 1;
    }
    g
};

/// MD5 initial state (RFC 1321 section 3.3).
const MD5_IV: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

/// The 16 little-endian message words of a block.
fn words(block: &[u8; BLOCK]) -> [u32; 16] {
    let mut m = [0u32; 16];
    for (w, b) in m.iter_mut().zip(block.as_chunks::<4>().0) {
        *w = u32::from_le_bytes(*b);
    }
    m
}

/// Compresses one block into each of two independent MD5 states, step by step in lockstep:
/// each step is a chain of dependent additions, so two interleaved chains run in about the time
/// of one.
fn md5_compress_two(sa: &mut [u32; 4], a: &[u8; BLOCK], sb: &mut [u32; 4], b: &[u8; BLOCK]) {
    let (ma, mb) = (words(a), words(b));
    let [mut a0, mut a1, mut a2, mut a3] = *sa;
    let [mut b0, mut b1, mut b2, mut b3] = *sb;
    // Each step adds `a + K[i] + M[g]`, known before the previous step ends, to the round
    // function of the newest word: keeping that sum apart leaves one addition on the chain.
    macro_rules! steps {
        ($fun:expr, $($i:literal)*) => {$(
            let ka = a0.wrapping_add(MD5_K[$i]).wrapping_add(ma[MD5_G[$i]]);
            let kb = b0.wrapping_add(MD5_K[$i]).wrapping_add(mb[MD5_G[$i]]);
            let fa = $fun(a1, a2, a3, ka);
            let fb = $fun(b1, b2, b3, kb);
            (a0, a3, a2) = (a3, a2, a1);
            (b0, b3, b2) = (b3, b2, b1);
            a1 = a1.wrapping_add(fa.rotate_left(MD5_S[$i]));
            b1 = b1.wrapping_add(fb.rotate_left(MD5_S[$i]));
        )*};
    }
    // RFC 1321's F, G, H and I, plus `k`. G's two halves have no bit in common, so its `|` is
    // a `+`, and the half without `x` (the newest word) joins `k` first.
    let f = |x: u32, y: u32, z: u32, k: u32| (z ^ (x & (y ^ z))).wrapping_add(k);
    let g = |x: u32, y: u32, z: u32, k: u32| (x & z).wrapping_add((y & !z).wrapping_add(k));
    let h = |x: u32, y: u32, z: u32, k: u32| (x ^ y ^ z).wrapping_add(k);
    let i = |x: u32, y: u32, z: u32, k: u32| (y ^ (x | !z)).wrapping_add(k);
    steps!(f, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    steps!(g, 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
    steps!(h, 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47);
    steps!(i, 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63);
    for (s, v) in sa.iter_mut().zip([a0, a1, a2, a3]) {
        *s = s.wrapping_add(v);
    }
    for (s, v) in sb.iter_mut().zip([b0, b1, b2, b3]) {
        *s = s.wrapping_add(v);
    }
}

/// Writes the padded last block(s) of a message of `len` bytes ending in `tail` into `last`
/// (zeroed), and answers their length: 0x80, zeros, the bit length as a u64 written by `encode`
/// (little endian for MD5, RFC 1321 sections 3.1 and 3.2; big endian for SHA-256, FIPS 180-4
/// section 5.1.1). Written in place: returned by value, the blocks were copied with wide loads
/// right after these narrow stores (a store-forwarding stall on every hash).
fn padded_tail(
    tail: &[u8],
    len: usize,
    encode: fn(u64) -> [u8; 8],
    last: &mut [u8; 2 * BLOCK],
) -> usize {
    let end = if tail.len() < BLOCK - 8 {
        BLOCK
    } else {
        2 * BLOCK
    };
    if let Some(dst) = last.get_mut(..tail.len()) {
        dst.copy_from_slice(tail);
    }
    if let Some(b) = last.get_mut(tail.len()) {
        *b = 0x80;
    }
    let bits = (len as u64).wrapping_mul(8);
    if let Some(dst) = last.get_mut(end - 8..end) {
        dst.copy_from_slice(&encode(bits));
    }
    end
}

/// md5(`a`) and md5(`b`), compressed two lanes at a time when the inputs have the same length
/// (JA3 and JA3N always do: the same numbers in another order); otherwise one after the other
/// through the md-5 crate.
pub(crate) fn md5_two(a: &[u8], b: &[u8]) -> ([u8; 16], [u8; 16]) {
    if a.len() != b.len() {
        return (md5::Md5::digest(a).into(), md5::Md5::digest(b).into());
    }
    let (mut sa, mut sb) = (MD5_IV, MD5_IV);
    let ((ba, ra), (bb, rb)) = (a.as_chunks::<BLOCK>(), b.as_chunks::<BLOCK>());
    for (x, y) in ba.iter().zip(bb) {
        md5_compress_two(&mut sa, x, &mut sb, y);
    }
    let (mut ta, mut tb) = ([0u8; 2 * BLOCK], [0u8; 2 * BLOCK]);
    let end = padded_tail(ra, a.len(), u64::to_le_bytes, &mut ta);
    padded_tail(rb, b.len(), u64::to_le_bytes, &mut tb);
    let (ta, tb) = (ta.as_chunks::<BLOCK>().0, tb.as_chunks::<BLOCK>().0);
    let blocks = end / BLOCK;
    for (x, y) in ta.iter().zip(tb).take(blocks) {
        md5_compress_two(&mut sa, x, &mut sb, y);
    }
    let digest = |s: [u32; 4]| {
        let mut out = [0u8; 16];
        for (dst, word) in out.chunks_exact_mut(4).zip(s) {
            dst.copy_from_slice(&word.to_le_bytes());
        }
        out
    };
    (digest(sa), digest(sb))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length over three block boundaries; md5 in pairs of equal and of unequal length.
    #[test]
    fn same_as_the_crates() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in 0..data.len() {
            let input = &data[..len];
            assert_eq!(
                sha256(input).as_slice(),
                sha2::Sha256::digest(input).as_slice(),
                "sha256 of {len} bytes"
            );
            let other: Vec<u8> = input.iter().rev().map(|b| b ^ 0x5a).collect();
            let (x, y) = md5_two(input, &other);
            assert_eq!(
                x.as_slice(),
                md5::Md5::digest(input).as_slice(),
                "md5 {len}"
            );
            assert_eq!(
                y.as_slice(),
                md5::Md5::digest(&other).as_slice(),
                "md5 {len}"
            );
            let (x, y) = md5_two(input, &data[..len / 2]);
            assert_eq!(x.as_slice(), md5::Md5::digest(input).as_slice());
            assert_eq!(y.as_slice(), md5::Md5::digest(&data[..len / 2]).as_slice());
        }
        // RFC 1321 appendix A.5.
        let (x, y) = md5_two(b"abc", b"");
        assert_eq!(hex::encode(x), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(hex::encode(y), "d41d8cd98f00b204e9800998ecf8427e");
        let (x, _) = md5_two(b"message digest", b"message digest");
        assert_eq!(hex::encode(x), "f96b697d7cb7938d525a2f31aaf161d0");
    }
}
