//! The exits file → `ExitsFile::parse` (TOML or a plain URL list; proxy URLs; sessions), and
//! each line through `ProxyUrl::parse`, with every printed form of the results.
#![no_main]

use exitvoice_auditor::labels::RouteRule;
use exitvoice_exits::{ExitsFile, ProxyUrl};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match ExitsFile::<RouteRule>::parse(data) {
        Ok(file) => {
            for exit in &file.exits {
                let _ = exit.redacted_url();
                let _ = exit.credentials();
                let _ = exit.proxy.authority();
            }
            let _ = format!("{file:?}");
        }
        Err(err) => {
            let _ = format!("{err} {err:?}");
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        for line in text.lines().take(64) {
            if let Ok(url) = ProxyUrl::parse(line) {
                let redacted = url.redacted();
                assert!(!redacted.is_empty());
                let _ = format!("{url:?}");
            }
        }
    }
});
