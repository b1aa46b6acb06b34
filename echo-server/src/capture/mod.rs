//! The only socket code: reading the raw ClientHello records under a deadline and a byte cap,
//! replaying them into rustls, tapping the decrypted client stream, serving it with hyper, and the
//! accept loop. It produces connection records (`record.rs`) and hands each to a sink when it
//! ends (`sink.rs`); nothing here imports the API, the writer or the server above it.

pub(crate) mod admission;
mod arrival;
pub(crate) mod builders;
pub(crate) mod connection;
mod gate;
pub(crate) mod hello;
mod http;
pub(crate) mod limiter;
pub(crate) mod listener;
pub(crate) mod proxy;
pub(crate) mod quic;
mod record;
pub(crate) mod replay;
mod shared;
mod sink;
mod strike;
pub(crate) mod tap;

pub(crate) use arrival::Arrival;
pub(crate) use record::{Connection, Failed};
pub(crate) use shared::Shared;
pub(crate) use sink::RecordSink;
