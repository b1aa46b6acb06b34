//! exitvoice auditor: probe exits through real proxies, classify drift, export routing labels.
//!
//! The exits file, proxy URLs, gateway sessions, secrets, the dialers and the probe errors are
//! the `exitvoice-exits` crate's, shared with the broker.
//!
//! - [`probe`]: TLS with a pinned echo certificate, the HTTP/2 writer and its profiles;
//! - [`drift`], [`labels`]: from probe records to drift state, flags and route;
//! - [`changes`]: which voice fields differ between two observations;
//! - [`coherence`]: client families of the TLS and HTTP/2 voices, and whether they agree;
//! - [`pool`]: the pool as a whole (counts, success rate, egress spread);
//! - [`preflight`]: whether a pool passes, for `audit --preflight`;
//! - [`schedule`]: runs (baseline + K samples per exit), limits, retries.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::dbg_macro))]

pub mod changes;
pub mod coherence;
pub mod drift;
pub mod exposition;
pub mod h3_label;
pub mod labels;
pub mod pool;
pub mod preflight;
pub mod probe;
pub mod record;
pub mod schedule;
#[cfg(test)]
mod test_echo;
