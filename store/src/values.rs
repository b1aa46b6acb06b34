//! Multi-row `VALUES` lists with numbered placeholders (`$1`), which both engines read: sqlx's
//! `QueryBuilder` on the `Any` driver writes `?`, which PostgreSQL refuses.

use std::fmt::Write as _;

/// `($1, …, $columns), ($columns+1, …), …` for `rows` rows.
pub(crate) fn placeholders(rows: usize, columns: usize) -> String {
    let mut sql = String::with_capacity(rows * columns * 5);
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for column in 0..columns {
            let sep = if column == 0 { "" } else { ", " };
            // Writing to a String cannot fail.
            let _ = write!(sql, "{sep}${}", row * columns + column + 1);
        }
        sql.push(')');
    }
    sql
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_run_on_across_rows() {
        assert_eq!(super::placeholders(2, 3), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(super::placeholders(1, 1), "($1)");
    }
}
