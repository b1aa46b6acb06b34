//! TLS ClientHello parsing (records or a bare handshake message), GREASE, JA3/JA3N, the JA4 family, and the TLS voice.
//!
//! Everything here is a pure function over bytes; only `capture` touches sockets.

mod error;
mod record;

pub use error::TlsError;
pub use record::{scan, scan_capped, HelloScan, DEFAULT_MAX_HELLO_LEN, MAX_RECORD_LEN};
