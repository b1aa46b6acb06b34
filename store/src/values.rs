//! Multi-row `VALUES` lists. sqlx's `QueryBuilder` on the `Any` driver writes `?`, which
//! PostgreSQL refuses, so PostgreSQL gets numbered placeholders (`$1`). SQLite keeps `?`:
//! sqlx binds a named or numbered SQLite parameter by looking up its name, and SQLite's
//! `sqlite3_bind_parameter_name` walks the statement's list of names, so a 2,816-parameter
//! statement written with `$N` cost ~80 % of the store's CPU (`perf`, `store-bench`).

use std::fmt::Write as _;

use crate::Engine;

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
}
