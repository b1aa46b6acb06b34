//! [`Secret`]: a string that never prints.
//!
//! Proxy passwords live in a `Secret` from the moment the exits file is parsed. `Debug`,
//! `Display` and `Serialize` all write `***`; the clear value is reachable only through
//! [`Secret::expose`], which the dialers call when they put credentials on the wire.

use std::fmt;

use serde::{Serialize, Serializer};

/// What every printed form of a [`Secret`] looks like.
pub const REDACTED: &str = "***";

/// A secret string (a proxy password). Prints as `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a clear value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The clear value, for the wire only. Never log or store what this returns.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_printed_form_is_redacted() {
        let secret = Secret::new("hunter2@:/");
        assert_eq!(format!("{secret}"), REDACTED);
        assert_eq!(format!("{secret:?}"), REDACTED);
        assert_eq!(format!("{secret:#?}"), REDACTED);
        assert_eq!(
            serde_json::to_string(&secret).ok().as_deref(),
            Some("\"***\"")
        );
        assert_eq!(secret.expose(), "hunter2@:/");
    }
}
