//! The store behind one contract, on two engines: SQLite (one file, WAL: the embedded default)
//! and PostgreSQL (one database shared by a fleet of echo servers and auditors). Both run the
//! same queries through sqlx's `Any` driver; each engine has its own migrations
//! (`migrations/sqlite`, `migrations/postgres`), embedded and run at open.
//!
//! Each file imports only files below it, in this order (bottom first): the engine's parts
//! (`database`: URLs; `lineage`: the history a connection reaches); the handle (`handle`:
//! [`Store`], [`Engine`], [`StoreError`]); the tables, each an `impl Store` of its own
//! (`values`, `ledger`, `quic`, `observations`, `probes`, `labels`, `claims`: the auditor's work
//! claims, `retention`, `audit_retention`); the broker's tables behind [`BrokerTables`], which
//! carries what only the broker shares (`broker`); and on top, opening a store (`legacy`, the
//! move of an old database forward; `open`: the pool, the migrations).
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::dbg_macro))]

#[cfg(test)]
#[macro_use]
mod test_engines;

mod audit_retention;
mod broker;
mod claims;
mod database;
mod handle;
mod labels;
mod ledger;
mod legacy;
mod lineage;
mod observations;
mod open;
mod probes;
mod quic;
mod retention;
mod values;

pub use audit_retention::AuditPruned;
pub use broker::{BrokerTables, Confirmed, EpochLock};
pub use database::{redacted, Database, DatabaseUrlError, PostgresUrl};
pub use handle::{Engine, Store, StoreError};
pub use labels::{LabelsReader, LabelsWriter};
pub use ledger::LedgerRow;
pub use observations::Batch;
pub use quic::{QuicConnectionRow, QuicRequestRow, StoredQuicRequest};
pub use retention::{DbSize, Pruned};
