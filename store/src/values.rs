//! Multi-row `VALUES` lists. sqlx's `QueryBuilder` on the `Any` driver writes `?`, which
//! PostgreSQL refuses, so PostgreSQL gets numbered placeholders (`$1`). SQLite keeps `?`:
//! sqlx binds a named or numbered SQLite parameter by looking up its name, and SQLite's
//! `sqlite3_bind_parameter_name` walks the statement's list of names, so a 2,816-parameter
//! statement written with `$N` cost ~80 % of the store's CPU (`perf`, `store-bench`).

use std::fmt::Write as _;

use sqlx::any::AnyArguments;
use sqlx::Arguments as _;

use crate::handle::Engine;

/// `(p, …, p), (p, …), …`: `rows` rows of `columns` placeholders in `engine`'s style, numbered
/// in order.
pub(crate) fn placeholders(engine: Engine, rows: usize, columns: usize) -> String {
    let mut sql = String::with_capacity(rows * columns * 5);
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for column in 0..columns {
            if column > 0 {
                sql.push_str(", ");
            }
            push_placeholder(&mut sql, engine, row * columns + column + 1);
        }
        sql.push(')');
    }
    sql
}

/// Arguments with room for `rows` rows of `columns` values. Bound one by one into sqlx's
/// default arguments, a 256-row request chunk's 2,816 values would grow their vector ten times
/// over, each time copied whole (and its last sizes, tens of KiB, freed again).
pub(crate) fn arguments<'q>(rows: usize, columns: usize) -> AnyArguments<'q> {
    let mut arguments = AnyArguments::default();
    arguments.reserve(rows * columns, 0);
    arguments
}

/// The verb of a multi-row INSERT inside a batch's transaction. SQLite gets `INSERT OR FAIL`:
/// under the default conflict resolution (ABORT) a statement must be able to undo its own
/// earlier rows when a later one breaks a constraint, so SQLite copies every page it touches
/// to a statement journal first, ~10 % of its thread under h2 keep-alive (`bench/profile.sh
/// groups b`); FAIL keeps those rows instead (https://sqlite.org/lang_conflict.html), and the
/// batch's transaction, rolled back on any error, still stores all its rows or none. An
/// upsert's own `ON CONFLICT` clause is unaffected. PostgreSQL has no such clause.
pub(crate) fn insert_into(engine: Engine) -> &'static str {
    match engine {
        Engine::Sqlite => "INSERT OR FAIL INTO",
        Engine::Postgres => "INSERT INTO",
    }
}

/// Appends the `n`th placeholder (from 1) in `engine`'s style to `sql`.
pub(crate) fn push_placeholder(sql: &mut String, engine: Engine, n: usize) {
    match engine {
        Engine::Sqlite => sql.push('?'),
        // Writing to a String cannot fail.
        Engine::Postgres => {
            let _ = write!(sql, "${n}");
        }
    }
}

/// `rows` in chunks whose lengths are powers of two, largest first, none longer than `max` (a
/// power of two). A multi-row INSERT is prepared once per distinct length and then cached by
/// sqlx; a chunk of whatever length a batch has would be a new statement each time, and SQLite
/// parsing and compiling an INSERT of many rows costs more than running it (callgrind,
/// docs/benchmarks.md). So a table sees at most log2(max) + 1 statement texts, for at most
/// that many statements per batch.
pub(crate) fn cached_chunks<T>(rows: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    debug_assert!(max.is_power_of_two());
    let mut rest = rows;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let len = max.min(1 << rest.len().ilog2());
        let (chunk, tail) = rest.split_at(len);
        rest = tail;
        Some(chunk)
    })
}

/// `AND <column> <op> $N` clauses for a query's optional filters, numbered after `$1` (the
/// query's limit) in the order they are asked for; the caller binds the set ones in that order.
pub(crate) struct Filters {
    binds: usize,
}

impl Filters {
    /// Numbering that starts after the limit's `$1`.
    pub(crate) fn after_limit() -> Self {
        Self { binds: 1 }
    }

    /// The clause for `column op $N` when the filter is `set`, else nothing.
    pub(crate) fn clause(&mut self, column: &str, op: &str, set: bool) -> String {
        if !set {
            return String::new();
        }
        self.binds += 1;
        self.again(column, op)
    }

    /// The clause for `column op` on the value the last clause bound (one value, two columns).
    pub(crate) fn again(&self, column: &str, op: &str) -> String {
        format!(" AND {column} {op} ${}", self.binds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_run_on_across_rows() {
        assert_eq!(
            placeholders(Engine::Postgres, 2, 3),
            "($1, $2, $3), ($4, $5, $6)"
        );
        assert_eq!(placeholders(Engine::Sqlite, 2, 2), "(?, ?), (?, ?)");
    }

    #[test]
    fn chunks_are_powers_of_two_up_to_the_cap_and_keep_every_row_in_order() {
        let lengths = |n: usize, max| {
            let rows: Vec<usize> = (0..n).collect();
            let chunks: Vec<&[usize]> = cached_chunks(&rows, max).collect();
            assert_eq!(chunks.concat(), rows, "every row once, in order");
            chunks.iter().map(|c| c.len()).collect::<Vec<_>>()
        };
        assert_eq!(lengths(0, 64), Vec::<usize>::new());
        assert_eq!(lengths(1, 64), [1]);
        assert_eq!(lengths(37, 64), [32, 4, 1]);
        assert_eq!(lengths(64, 64), [64]);
        assert_eq!(lengths(200, 64), [64, 64, 64, 8]);
        // Whatever the batch, at most log2(max) + 1 lengths, hence statement texts.
        let mut seen = std::collections::BTreeSet::new();
        for n in 0..600 {
            seen.extend(lengths(n, 64));
        }
        assert_eq!(
            seen.into_iter().collect::<Vec<_>>(),
            [1, 2, 4, 8, 16, 32, 64]
        );
    }
}
