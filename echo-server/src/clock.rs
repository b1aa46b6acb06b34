//! The wall clock, as the rows and the ledger keep time: Unix milliseconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix milliseconds (0 for a clock set before 1970).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}
