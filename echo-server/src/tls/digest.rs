//! md5 and sha256 of bytes already in the scratch buffer, one call each: whole 64-byte blocks go
//! from the buffer straight to the crates' block functions (sha2 uses SHA-NI when the CPU has
//! it), only the tail goes through a block buffer for padding. No hasher wrapper to fill.
//! Both are checked against the crates' `Digest` API in the tests below.

use md5::digest::core_api::{Buffer, FixedOutputCore, UpdateCore, VariableOutputCore};
use md5::digest::generic_array::GenericArray;
use md5::Md5Core;
use sha2::{Digest, Sha256VarCore};

/// Block size of both hashes.
const BLOCK: usize = 64;

/// sha256(`data`).
pub(crate) fn sha256(data: &[u8]) -> [u8; 32] {
    // 32 is the one size `new` accepts for SHA-256; the fallback is never taken.
    let Ok(mut core) = Sha256VarCore::new(32) else {
        return sha2::Sha256::digest(data).into();
    };
    let mut blocks = data.chunks_exact(BLOCK);
    for block in blocks.by_ref() {
        // `chunks_exact` gives exactly one block, as `from_slice` needs.
        core.update_blocks(std::slice::from_ref(GenericArray::from_slice(block)));
    }
    // The remainder of `chunks_exact` is shorter than a block, as `Buffer` requires.
    let mut buffer = Buffer::<Sha256VarCore>::try_new(blocks.remainder()).unwrap_or_default();
    let mut out = Default::default();
    core.finalize_variable_core(&mut buffer, &mut out);
    out.into()
}

/// An md5 computation that has taken some whole blocks.
#[derive(Clone, Default)]
pub(crate) struct Md5(Md5Core);

impl Md5 {
    /// Takes the whole blocks of `data` (a multiple of 64 bytes is expected; a rest is ignored).
    pub(crate) fn blocks(&mut self, data: &[u8]) {
        for block in data.chunks_exact(BLOCK) {
            // `chunks_exact` gives exactly one block, as `from_slice` needs.
            self.0
                .update_blocks(std::slice::from_ref(GenericArray::from_slice(block)));
        }
    }

    /// md5 of everything taken so far followed by `data`.
    pub(crate) fn finish(mut self, data: &[u8]) -> [u8; 16] {
        let mut blocks = data.chunks_exact(BLOCK);
        for block in blocks.by_ref() {
            self.0
                .update_blocks(std::slice::from_ref(GenericArray::from_slice(block)));
        }
        // The remainder of `chunks_exact` is shorter than a block, as `Buffer` requires.
        let mut buffer = Buffer::<Md5Core>::try_new(blocks.remainder()).unwrap_or_default();
        let mut out = Default::default();
        self.0.finalize_fixed_core(&mut buffer, &mut out);
        out.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length over three block boundaries, and every split point for md5's shared blocks.
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
            let expected = md5::Md5::digest(input);
            for shared in (0..=len / BLOCK).map(|n| n * BLOCK) {
                let mut h = Md5::default();
                h.blocks(&input[..shared]);
                assert_eq!(
                    h.finish(&input[shared..]).as_slice(),
                    expected.as_slice(),
                    "md5 of {len} bytes, {shared} first"
                );
            }
        }
    }
}
