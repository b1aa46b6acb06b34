//! The only socket code: reading the raw ClientHello records under a deadline and a byte cap,
//! replaying them into rustls, tapping the decrypted client stream, serving it with hyper, and the
//! accept loop. Nothing here imports the API, the writer or the server above it.
//!
//! A connection goes listener → gate → connection → http → record → sink. Each file imports
//! only files below it in this list:
//! - `listener.rs`: the accept loop; each connection's SYN taken from the kernel
//!   (`saved_syn.rs`, one of the crate's two `unsafe` modules), then the gate, then its own task;
//! - `connection.rs`: one connection to its end: the PROXY header (`proxy.rs`) of a relayed one
//!   and its gate, the ClientHello (`hello.rs`), replayed into rustls (`replay.rs`);
//! - `http.rs`: the decrypted stream, tapped (`tap.rs`), served by hyper (`builders.rs`), each
//!   request told how it arrived (`arrival.rs`); HTTP/2 with the echo's PINGs (`pinger.rs`);
//! - `timed.rs`: the TCP stream under rustls, timing the handshake's flight and reading the
//!   kernel's round trip (`tcp_info.rs`, the second `unsafe` module);
//! - `gate.rs`: a new connection admitted, held (tarpit) or reset, by its source
//!   (`admission.rs`) and the open-connection limits (`limiter.rs`);
//! - `strike.rs`: a peer's fault counted against its source (`admission.rs`);
//! - `shared.rs`: what every connection task shares;
//! - `responder.rs`: what answers each request ([`Responder`], which the API implements);
//! - `sink.rs`: where a finished record goes ([`RecordSink`], which the writer implements);
//! - `record.rs`: what the server knows of one connection ([`Connection`]);
//! - `round_trip.rs`: the connection's round trips as they are measured;
//! - the rest import nothing of capture, but `tap.rs` wraps `replay.rs` and `round_trip.rs`
//!   names what `tcp_info.rs` cannot read; `woken.rs` (a future polled only when it woke its
//!   task) serves `http.rs`.

pub(crate) mod admission;
mod arrival;
mod builders;
mod connection;
mod gate;
mod hello;
mod http;
pub(crate) mod limiter;
pub(crate) mod listener;
mod pinger;
mod proxy;
pub(crate) mod quic;
mod record;
mod replay;
mod responder;
mod round_trip;
#[allow(unsafe_code)]
pub mod saved_syn;
mod shared;
mod sink;
mod strike;
mod tap;
#[allow(unsafe_code)]
mod tcp_info;
mod timed;
mod woken;

pub(crate) use arrival::Arrival;
pub(crate) use record::{Connection, Failed};
pub(crate) use responder::{Answer, Responder};
pub(crate) use shared::Shared;
pub(crate) use sink::RecordSink;
