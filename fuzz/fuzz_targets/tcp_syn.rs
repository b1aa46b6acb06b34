//! A saved SYN (IP header, TCP header, options) → `tcp::parse_syn` → the echo's `tcp` facts, the
//! p0f signature and the voice.
#![no_main]

use exitvoice_protocol::tcp;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match tcp::parse_syn(data) {
        Ok(syn) => {
            let echo = tcp::echo(&syn);
            assert!(echo.initial_ttl >= echo.ttl);
            assert_eq!(echo.options.len(), syn.options.layout.len());
            assert!(echo.p0f.starts_with(if echo.ip_version == 4 { "4:" } else { "6:" }));
        }
        Err(err) => {
            let _ = err.to_string();
        }
    }
});
