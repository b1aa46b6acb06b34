//! The lease broker's vocabulary, shared by its stores (SQL in `exitvoice_store`, Redis in
//! `exitvoice_broker`) and the broker itself: lease classes, units, acquires and grants, why a
//! renew or a release is refused, what an outcome does, and what a store reports. Plain data:
//! no store, no I/O.
//!
//! Each file imports only files below it, in this order (bottom first): `class` (what a label
//! admits); `unit` and `grant` (units, acquires, grants, refusals); `outcome` (a lease's end and
//! its effect); `report` (gauges, egress checks, exits).
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::dbg_macro))]

mod class;
mod grant;
mod outcome;
mod report;
mod unit;

pub use class::LeaseClass;
pub use grant::{gap_limit, Acquire, Granted, Refusal, MAX_GAP_MS};
pub use outcome::{Backoff, Effect, Released};
pub use report::{EgressRecord, ExitReport, Gauges};
pub use unit::{gap_ms_of, UnitSpec};
