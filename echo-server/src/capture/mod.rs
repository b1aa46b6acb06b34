//! The only socket code: reading the raw ClientHello records under a deadline and a byte cap,
//! replaying them into rustls, tapping the decrypted client stream, and the accept loop.

pub(crate) mod admission;
pub mod builders;
pub mod connection;
pub mod hello;
pub(crate) mod listener;
pub mod tap;

pub use connection::{Arrival, Connection, Session};
pub use hello::{read_client_hello, HelloError, Replay};
pub use tap::{Tap, TapBuffer};
