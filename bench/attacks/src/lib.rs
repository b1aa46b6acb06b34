//! Loopback attacks on the exitvoice echo server, and the legitimate client measured beside
//! them. Each attack is bounded in connections, frames and time; `bench/attacks/run.sh` drives
//! the `attack` binary against a release server, and `tests/echo_attacks.rs` runs small versions
//! as regression tests.
//!
//! Only loopback targets are accepted ([`Target::new`] refuses anything else).

pub mod attack;
pub mod frame;
pub mod legit;
pub mod net;

pub use attack::{run, Attack, Params, Report};
pub use legit::{legit, LegitReport};
pub use net::Target;
