//! exitvoice broker: leases of exits and gateway sticky sessions to many workers on many
//! machines, never two holders at once, driven by the auditor's labels.
//!
//! - [`service`]: the broker (acquire with a wait, renew, release with an outcome, labels);
//! - [`api`]: its HTTP/JSON API, over plain HTTP or [`tls`]; [`auth`]: the bearer token;
//! - [`pool`]: the exits file's exits as lease units, what their labels admit, lease URLs;
//! - [`egress`]: a lease's egress address, checked through the exit at the echo server;
//! - [`policy`]: what a reported outcome does (bans, retired sessions, failure streaks);
//! - [`lease_store`]: the one interface the broker's state sits behind (SQLite and PostgreSQL
//!   through [`sql_leases`], Redis through [`redis_leases`]), each watched for a store that
//!   came back older than it was;
//! - [`durability`]: what a crash or failover of the store would cost, from its settings;
//! - [`reserve`]: the units an instance holds to grant from while the store is out of reach;
//! - [`metrics`]: Prometheus metrics.
//!
//! Exclusivity, fences and expiry are the store's (see `exitvoice_store`'s broker module): an
//! instance keeps no lease state of its own, so any instance renews or releases any lease, save
//! the sub-leases its reserve granted in an outage, which only it knows.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::dbg_macro))]

pub mod api;
pub mod auth;
pub mod durability;
pub mod egress;
pub mod lease_store;
pub mod metrics;
pub mod policy;
pub mod pool;
pub mod proxy;
pub mod redis_leases;
pub mod reserve;
pub mod service;
pub mod sql_leases;
pub mod tls;
pub mod tunnel_metrics;
