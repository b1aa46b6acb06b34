//! One module per subcommand: flags → configs → calls into the crates → exit code.

pub mod audit;
pub mod broker;
pub mod config;
pub mod dashboard;
pub mod database;
pub mod diff;
pub mod inspect;
pub mod lease;
mod progress;
pub mod serve;
