//! exitvoice echo server: capture, deadlines, the HTTP API, the writer and the ledger, around the
//! protocol work of `exitvoice-protocol` (parsers, fingerprints, buckets, the analysis).
// `deny`, not `forbid`: `capture/saved_syn.rs` allows the two `libc` calls of `TCP_SAVED_SYN`
// and `capture/tcp_info.rs` the one of `TCP_INFO` (docs/decisions.md); every other module is held
// to no `unsafe`.
#![deny(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::dbg_macro))]

pub mod acme;

mod api;
mod capture;
pub mod cert;
mod clock;
pub mod config;
mod exposition;
mod geo;
pub mod ledger;
mod metrics;
mod server;
pub mod view;
mod writer;

pub use capture::saved_syn;
pub use config::Config;

/// The server software as it names itself in records and on `/healthz`.
pub(crate) const SERVER: &str = concat!("exitvoice/", env!("CARGO_PKG_VERSION"));
pub use server::{Server, ServerError};
