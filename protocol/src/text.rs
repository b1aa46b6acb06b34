//! Hex and decimal text for fingerprints, voice ids and hashes, written with the itoa and hex
//! crates' direct APIs rather than `fmt`: a new connection builds about twenty such strings (JA3,
//! JA4 and their hashes, the voice ids), and `format!` with `hex::encode`'s per-character
//! iterator doubles the time of its analysis (docs/decisions.md, "Vectors, sorting and strings").

/// Appends `bytes` in lowercase hex.
pub(crate) fn push_hex(out: &mut String, bytes: &[u8]) {
    let mut buf = [0_u8; 64];
    for chunk in bytes.chunks(buf.len() / 2) {
        let text = buf.get_mut(..2 * chunk.len()).unwrap_or_default();
        if hex::encode_to_slice(chunk, text).is_ok() {
            // `encode_to_slice` writes only ASCII hex digits.
            out.push_str(std::str::from_utf8(text).unwrap_or_default());
        }
    }
}

/// `prefix` followed by `bytes` in lowercase hex (an id such as `tlsv2_…`, or a bare hash).
pub(crate) fn hex_id(prefix: &str, bytes: &[u8]) -> String {
    let mut out = String::with_capacity(prefix.len() + 2 * bytes.len());
    out.push_str(prefix);
    push_hex(&mut out, bytes);
    out
}

/// Appends `n` in decimal.
pub(crate) fn push_decimal(out: &mut String, n: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(n));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_matches_the_hex_crate_at_every_length() {
        let bytes: Vec<u8> = (0..=255).collect();
        for len in [0, 1, 6, 12, 16, 31, 32, 33, 64, 65, 256] {
            let slice = bytes.get(..len).unwrap();
            assert_eq!(hex_id("", slice), hex::encode(slice), "{len}");
            assert_eq!(
                hex_id("tlsv2_", slice),
                format!("tlsv2_{}", hex::encode(slice))
            );
        }
    }

    #[test]
    fn decimal_matches_display() {
        for n in [0_u64, 1, 9, 10, 99, 100, 65_535, 6_291_456, u64::MAX] {
            let mut out = String::from("x");
            push_decimal(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
    }
}
