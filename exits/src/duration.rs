//! Durations as exitvoice writes them: `250ms`, `10s`, `2m`, `1h` (where hours are allowed), or a
//! bare number of seconds. The command line (and so the `--config` file, whose values go through
//! the flags' own parsers) and the exits file read them with [`parse`].

use std::time::Duration;

/// Parses `text`; `hours` says whether the `h` unit is accepted (the scheduler's intervals) or
/// not (the server's timeouts, where an hour is surely a typo).
///
/// # Errors
/// A message naming the text and what is wrong with it.
pub fn parse(text: &str, hours: bool) -> Result<Duration, String> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let (examples, units) = if hours {
        ("250ms, 10s, 2m or 1h", "ms, s, m or h")
    } else {
        ("250ms, 10s or 2m", "ms, s or m")
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}`: expected a duration like {examples}"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" if hours => value * 3600.0,
        _ => return Err(format!("`{text}`: unit must be {units}")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|error| format!("`{text}`: {error}"))
}
