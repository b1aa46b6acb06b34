//! One module per subcommand: flags → configs → calls into the crates → exit code.

pub mod audit;
pub mod config;
pub mod dashboard;
pub mod database;
pub mod diff;
pub mod inspect;
pub mod serve;
