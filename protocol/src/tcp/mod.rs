//! The SYN of a TCP connection: its IP header (IPv4 or IPv6) and TCP header with options, read
//! into typed facts ([`parse_syn`]), the quirks p0f v3 names ([`Quirks`]), p0f's signature
//! string ([`Syn::p0f_signature`]) and the normalized TCP voice ([`voice_id`]).
//!
//! The echo server gets these bytes from the kernel (`TCP_SAVED_SYN`, which keeps the network
//! and TCP headers of an accepted connection's SYN) and `exitvoice inspect` from captures: both
//! call [`parse_syn`] and [`echo`].
//!
//! p0f's definitions are the reference: its README, section 5 "TCP signatures" (Debian's `p0f`
//! package, `/usr/share/doc/p0f/README.gz`), names the fields and quirks, and `p0f -r` on the
//! same packets is the oracle the tests compare with.

mod error;
mod ip;
mod options;
mod p0f_db;
mod quirks;
mod signature;
mod syn;
mod voice;

pub use error::SynError;
pub use options::{OptionError, OptionKind};
pub use p0f_db::{P0fDb, P0fDbError};
pub use quirks::Quirks;
pub use syn::{parse_syn, Syn};
pub use voice::{voice_id, VOICE_PREFIX};

use exitvoice_schema::TcpEcho;

/// The echo's `tcp` facts of a parsed SYN (no OS name: that is the signature database's).
pub fn echo(syn: &Syn) -> TcpEcho {
    TcpEcho {
        ip_version: syn.ip.version,
        ttl: syn.ip.ttl,
        initial_ttl: syn.initial_ttl(),
        hops: syn.hops(),
        df: syn.ip.df,
        ip_id: syn.ip.id,
        window: syn.window,
        mss: syn.options.mss,
        window_scale: syn.options.window_scale,
        sack_permitted: syn.options.sack_permitted(),
        timestamps: syn.options.timestamp.is_some(),
        options: syn.options.layout.iter().map(|kind| kind.0).collect(),
        quirks: syn.quirks.names().map(str::to_owned).collect(),
        options_error: syn.options.error.map(|error| error.to_string()),
        p0f: syn.p0f_signature(),
        voice_id: voice_id(syn),
        os: None,
    }
}

#[cfg(test)]
mod syn_test;
