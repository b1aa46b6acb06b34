//! First client bytes → `classify::sniff` and `h1::parse_head` → the HTTP/1 voice and echo.
#![no_main]

use exitvoice_protocol::{classify, h1};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = classify::sniff(data);
    match h1::parse_head(data) {
        Ok(head) => {
            assert!(head.headers.len() <= h1::MAX_HEADERS);
            let echo = h1::echo(&head);
            assert_eq!(echo.header_order.len(), head.headers.len());
            let _ = h1::voice_description(&head);
            let _ = head.request_line();
        }
        Err(err) => {
            let _ = err.to_string();
        }
    }
});
