//! exitvoice echo server: capture, parsers (TLS, HTTP/2 + HPACK, HTTP/1), fingerprints, buckets,
//! and the HTTP API.
//!
//! Parsers are pure functions over bytes; only `capture` touches sockets.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::dbg_macro))]

pub mod acme;
pub mod analysis;
mod codec;

mod api;
mod capture;
pub mod cert;
pub mod classify;
pub mod config;
mod exposition;
pub mod h1;
pub mod h2;
pub mod h3;
pub mod ledger;
mod metrics;
pub mod pcap;
pub mod quic;
mod server;
mod text;
pub mod tls;
mod writer;

pub use config::Config;
pub use server::{Server, ServerError};
