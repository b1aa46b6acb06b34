//! The lease broker's state: units (a plain exit, or one session slot of a gateway), leases with
//! fences, bans and retired gateway session ids (migration `broker`).
//!
//! Every change locks what it decides on before it reads it: PostgreSQL locks the unit's row
//! (`FOR UPDATE`, and `SKIP LOCKED` when an acquire picks among free units, so concurrent
//! acquires take different ones), SQLite takes its one write lock at `BEGIN IMMEDIATE`. The
//! unit's row decides, through columns that err only towards "held" (see [`one_statement`]),
//! and lets an acquire find candidates through an index, without reading the pool. The
//! transactions here also count the unit's live leases under the lock, and recompute the
//! columns from them;
//! PostgreSQL's common cases are one statement each ([`one_statement`]). Every time is the
//! store's clock (`now_ms`), never a caller's.
//!
//! Each file imports only files below it, in this order (bottom first): the broker's
//! transactions and the store's clock (`transaction`); the units (`units`); acquires
//! (`acquire`); a lease read back and judged (`lease_row`); what an outcome does
//! (`outcomes`); renewals and releases (`renew_release`); egress checks (`egress`); exit
//! reports and pruning (`reports`); gauges (`gauges`). PostgreSQL's one-statement paths and
//! their batches (`one_statement`, `batch_connection`, `batched_grant`, `batched_release`) sit
//! above acquires and judged leases; the epochs of pools kept in Redis (`epochs`), the lineage
//! a broker confirmed (`lineage_turn`) and its liveness (`liveness`) above the transactions.

use std::sync::Arc;

use crate::handle::{Engine, Store};

mod acquire;
mod batch_connection;
mod batched_grant;
mod batched_release;
mod egress;
mod epochs;
mod gauges;
mod lease_row;
mod lineage_turn;
mod liveness;
mod one_statement;
mod outcomes;
mod renew_release;
mod reports;
mod transaction;
mod units;

pub(crate) use batched_grant::GrantQueue;
pub(crate) use batched_release::ReleaseQueue;
pub use epochs::EpochLock;
pub use lineage_turn::Confirmed;

/// The broker's tables in one store, with what this process's broker transactions share
/// there. Clones share them; the echo server's and the auditor's [`Store`] carry none of it.
#[derive(Clone, Debug)]
pub struct BrokerTables {
    store: Store,
    /// SQLite has one write lock per file; this process's broker transactions queue for it
    /// here, in arrival order, rather than in SQLite's busy handler, which sleeps 1, 2, 5,
    /// 10… ms between tries and so turns a short wait into a long tail.
    writer_turn: Arc<tokio::sync::Mutex<()>>,
    /// PostgreSQL's plain broker releases, ended a batch per statement.
    release_queue: Arc<ReleaseQueue>,
    /// PostgreSQL's broker grants, a batch of alike acquires per statement.
    grant_queue: Arc<GrantQueue>,
}

impl BrokerTables {
    /// The broker's tables in `store`. One per process and store: its transactions queue on
    /// it (SQLite) and its grants and releases are batched through it (PostgreSQL).
    pub fn new(store: Store) -> Self {
        Self {
            store,
            writer_turn: Arc::default(),
            release_queue: Arc::default(),
            grant_queue: Arc::default(),
        }
    }

    /// The store's connection pool.
    pub fn pool(&self) -> &sqlx::AnyPool {
        self.store.pool()
    }

    /// The store's engine.
    pub fn engine(&self) -> Engine {
        self.store.engine()
    }
}
