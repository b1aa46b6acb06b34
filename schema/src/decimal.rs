//! Decimals in JSON, written by one rule: a share (a part of a whole, 0 to 1) to thousandths,
//! so two thirds reads `0.667`, not `0.6666666666666666`. Values keep their full precision in
//! memory, where rules compare them; only what is written is rounded (serde_json then writes the
//! shortest text that reads back as the rounded number). Coherence scores need no rounding: they
//! are whole tenths by construction.

use serde::{Serialize, Serializer};

/// `value` to the nearest thousandth.
pub fn thousandths(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// Serializes an optional share to thousandths (`#[serde(serialize_with = …)]`).
///
/// # Errors
/// The serializer's.
pub fn share<S: Serializer>(value: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    value.map(thousandths).serialize(serializer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_written_to_thousandths() {
        #[derive(Serialize)]
        struct Shares {
            #[serde(serialize_with = "share")]
            a: Option<f64>,
            #[serde(serialize_with = "share")]
            b: Option<f64>,
            #[serde(serialize_with = "share")]
            c: Option<f64>,
            #[serde(serialize_with = "share")]
            d: Option<f64>,
        }
        let text = serde_json::to_string(&Shares {
            a: Some(2.0 / 3.0),
            b: Some(7.0 / 12.0),
            c: Some(1.0),
            d: None,
        })
        .expect("json");
        assert_eq!(text, r#"{"a":0.667,"b":0.583,"c":1.0,"d":null}"#);
    }
}
