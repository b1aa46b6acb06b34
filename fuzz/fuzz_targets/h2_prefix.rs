//! Decrypted client bytes → `h2::parse_prefix` (frames + HPACK) → Akamai fingerprint and its
//! variants, the HTTP/2 voice, the browser-profile match and the echo's HTTP/2 section. Inputs
//! not starting with `PRI` get the client preface put in front, so the fuzzer spends its time
//! on frames.
#![no_main]

use exitvoice_protocol::classify::browser_profile;
use exitvoice_protocol::h2::{self, H2Prefix, PREFACE};
use libfuzzer_sys::fuzz_target;

fn exercise(prefix: &H2Prefix) {
    assert!(prefix.frames.len() <= h2::MAX_FRAMES);
    assert!(prefix.requests.len() <= h2::MAX_HEADER_BLOCKS);
    let akamai = h2::akamai_fingerprint(prefix);
    assert_eq!(h2::akamai_fingerprint_hash(&akamai).len(), 32);
    for variant in h2::AkamaiVariant::ALL {
        let _ = h2::akamai_variant(prefix, variant);
    }
    let _ = h2::voice_id(prefix);
    let _ = h2::voice_description(prefix);
    let _ = browser_profile(prefix);
    // The echo serializes the frame log and the request; index `len` is past the requests.
    let _ = h2::echo(prefix, 0);
    if let Some(last) = prefix.requests.len().checked_sub(1).filter(|&i| i > 0) {
        let _ = h2::echo(prefix, last);
    }
    let _ = h2::echo(prefix, prefix.requests.len());
}

fuzz_target!(|data: &[u8]| {
    let owned;
    let bytes = if data.starts_with(b"PRI") {
        data
    } else {
        owned = [PREFACE, data].concat();
        &owned[..]
    };
    match h2::parse_prefix(bytes) {
        Ok(prefix) => exercise(&prefix),
        Err(err) => {
            assert!(err.offset <= bytes.len());
            let _ = err.to_string();
            exercise(&err.partial);
        }
    }
});
