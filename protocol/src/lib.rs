//! exitvoice's protocol work, bytes in and facts out: the parsers of what a client sends (TCP
//! SYNs, TLS ClientHellos, the HTTP/2 preface with HPACK, HTTP/1 heads, QUIC Initials, HTTP/3
//! with QPACK), the fingerprints and voices made of them, the buckets, captures read back from
//! pcap files, and [`analysis::analyse`], the one analysis of a connection that the echo server
//! runs live and `exitvoice inspect` runs on files.
//!
//! Pure functions over bytes: no sockets, no runtime, no store, no clock, no counters. Every
//! parser of untrusted bytes reads through one bounds-checked reader and answers a typed error,
//! never a panic (the fuzz targets in `fuzz/` hold it to that).
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::dbg_macro))]

pub mod analysis;
pub mod classify;
mod codec;
pub mod h1;
pub mod h2;
pub mod h3;
pub mod pcap;
pub mod quic;
pub mod tcp;
mod text;
pub mod tls;
