//! Durations as exitvoice writes them: `250ms`, `10s`, `2m`, `1h` (where hours are allowed), or a
//! bare number of seconds. The command line (and so the `--config` file, whose values go through
//! the flags' own parsers) and the exits file (`sticky = "90m"`) read them with [`parse`].

use std::time::{Duration, TryFromFloatSecsError};

/// Why a duration was refused. It quotes the text: a duration is never a secret.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// What comes before the unit is not a number.
    #[error("`{text}`: expected a duration like {}", examples(*hours))]
    Number {
        /// The text as given.
        text: String,
        /// Whether hours were allowed.
        hours: bool,
    },
    /// Too large for a [`Duration`].
    #[error("`{text}`: {error}")]
    Range {
        /// The text as given.
        text: String,
        /// What the conversion said.
        error: TryFromFloatSecsError,
    },
    /// The unit is not one of those allowed.
    #[error("`{text}`: unit must be {}", units(*hours))]
    Unit {
        /// The text as given.
        text: String,
        /// Whether hours were allowed.
        hours: bool,
    },
}

fn examples(hours: bool) -> &'static str {
    if hours {
        "250ms, 10s, 2m or 1h"
    } else {
        "250ms, 10s or 2m"
    }
}

fn units(hours: bool) -> &'static str {
    if hours {
        "ms, s, m or h"
    } else {
        "ms, s or m"
    }
}

/// Parses `text`; `hours` says whether the `h` unit is accepted (the scheduler's intervals, a
/// gateway's sticky window) or not (the server's timeouts, where an hour is surely a typo).
///
/// # Errors
/// A [`DurationError`] naming the text and what is wrong with it.
pub fn parse(text: &str, hours: bool) -> Result<Duration, DurationError> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let value: f64 = number.parse().map_err(|_| DurationError::Number {
        text: text.to_owned(),
        hours,
    })?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" if hours => value * 3600.0,
        _ => {
            return Err(DurationError::Unit {
                text: text.to_owned(),
                hours,
            })
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|error| DurationError::Range {
        text: text.to_owned(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_bare_seconds() {
        assert_eq!(parse("250ms", false), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1.5", false), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("90m", true), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1.5h", true), Ok(Duration::from_secs(5400)));
    }

    #[test]
    fn errors_read_as_the_command_line_always_printed_them() {
        for (text, hours, message) in [
            (
                "fast",
                true,
                "`fast`: expected a duration like 250ms, 10s, 2m or 1h",
            ),
            (
                "-1s",
                false,
                "`-1s`: expected a duration like 250ms, 10s or 2m",
            ),
            ("10h", false, "`10h`: unit must be ms, s or m"),
            ("1d", true, "`1d`: unit must be ms, s, m or h"),
        ] {
            let error = parse(text, hours).map_err(|e| e.to_string()).err();
            assert_eq!(error.as_deref(), Some(message), "{text}");
        }
        assert!(matches!(
            parse(&format!("{}h", u64::MAX), true),
            Err(DurationError::Range { .. })
        ));
    }
}
