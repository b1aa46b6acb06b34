//! One module per subcommand: flags → configs → calls into the crates → exit code.

pub mod audit;
mod duration;
pub mod inspect;
pub mod serve;
