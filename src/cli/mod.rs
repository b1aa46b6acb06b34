//! One module per subcommand: flags → configs → calls into the crates → exit code. What several
//! of them share is in `shared` (durations, logs, `--geoip`, files written whole), below them
//! all; `progress` (audit's bar, which the logs write through) is below `shared`.

pub mod audit;
pub mod broker;
pub mod config;
pub mod dashboard;
pub mod database;
pub mod diff;
pub mod generate;
pub mod inspect;
pub mod labels;
pub mod lease;
mod progress;
pub mod serve;
mod shared;
