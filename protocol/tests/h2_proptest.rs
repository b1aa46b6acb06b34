//! Property tests: the HTTP/2 prefix parser never panics, and cuts are consistent.

use exitvoice_protocol::h2::{self, parse_prefix, PREFACE};
use proptest::prelude::*;

fn chrome() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/h2/chrome_shaped.bin"
    ))
    .expect("fixture")
}

proptest! {
    #[test]
    fn arbitrary_bytes_after_the_preface_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let mut b = PREFACE.to_vec();
        b.extend(&tail);
        let p = match parse_prefix(&b) {
            Ok(p) => p,
            Err(e) => *e.partial,
        };
        // Whatever parsed also fingerprints and echoes without panicking.
        let _ = h2::akamai_fingerprint(&p);
        let _ = h2::voice_id(&p);
        let _ = h2::echo(&p, 0);
    }

    #[test]
    fn mutated_chrome_prefix_never_panics(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let mut b = chrome();
        let len = b.len();
        for (at, v) in flips {
            if let Some(x) = b.get_mut(24 + at % (len - 24)) {
                *x = v;
            }
        }
        let _ = parse_prefix(&b).map(|p| h2::echo(&p, 0));
    }

    #[test]
    fn a_cut_prefix_is_ok_and_a_prefix_of_the_full_one(cut in 0usize..600) {
        let b = chrome();
        let cut = cut.min(b.len());
        let full = parse_prefix(&b).expect("full parses");
        let p = parse_prefix(&b[..cut]).expect("cut parses");
        prop_assert!(p.frames.len() <= full.frames.len());
        for (a, f) in p.frames.iter().zip(&full.frames) {
            prop_assert_eq!(a.header, f.header);
        }
        // Frame boundaries: after the preface, the SETTINGS (9+24), the WINDOW_UPDATE (9+4), and
        // the end. Anywhere else the capture ends inside something.
        let boundaries = [24, 24 + 33, 24 + 46, b.len()];
        prop_assert_eq!(p.truncated, !boundaries.contains(&cut));
    }
}
