//! Socket bytes → `tls::scan` (where the hello's records end) → `parse_client_hello` → every
//! fingerprint and the echo's TLS section, as the echo server runs them on each connection.
#![no_main]

use exitvoice_protocol::tls::{self, ClientHello, HelloScan};
use libfuzzer_sys::fuzz_target;

fn exercise(hello: &ClientHello<'_>) {
    let fp = hello.fingerprints();
    assert_eq!(fp.ja3_hash().len(), 32);
    assert_eq!(fp.ja3n_hash().len(), 32);
    // JA4 is `a_b_c` with a 10-char `a` and two 12-char hashes, all ASCII (FoxIO's JA4.md).
    assert_eq!(fp.ja4().len(), 36, "{}", fp.ja4());
    assert!(fp.ja4().is_ascii() && fp.ja4_o().is_ascii());
    let _ = tls::echo(hello);
    let _ = hello.server_name();
    let _ = hello.alpn_protocols();
    let _ = hello.resumed();
    // `echo` serializes the hello as its `detail`; the owned copy must equal the borrowed one.
    assert_eq!(&hello.clone().into_owned(), hello);
}

fuzz_target!(|data: &[u8]| {
    match tls::scan(data) {
        HelloScan::Complete { len } => {
            assert!(len > 0 && len <= data.len(), "Complete {{ len: {len} }}");
            // The scan's doc: a prefix of a complete hello is always NeedMore.
            for cut in [len / 2, len - 1] {
                if cut > 0 {
                    assert!(
                        matches!(tls::scan(&data[..cut]), HelloScan::NeedMore { .. }),
                        "prefix {cut} of a complete hello of {len} bytes"
                    );
                }
            }
            if len == data.len() {
                // The parse below sees the same bytes.
            } else if let Ok(hello) = tls::parse_client_hello(&data[..len]) {
                exercise(&hello);
            }
        }
        HelloScan::NeedMore { at_least } => {
            assert!(at_least > data.len(), "NeedMore {{ at_least: {at_least} }}");
        }
        HelloScan::Invalid(_) => {}
    }
    if let Ok(hello) = tls::parse_client_hello(data) {
        exercise(&hello);
    }
});
