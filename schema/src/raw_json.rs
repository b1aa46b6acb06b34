//! [`RawJson`]: a JSON document kept as text, written once from typed structs and copied as is.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// A JSON document kept as its text: parser detail (the decoded ClientHello, the HTTP/2 frame
/// log) is serialized once from the parser's own types and then copied into every answer, never
/// rebuilt as a `serde_json::Value` tree. Two are equal when they hold the same JSON value
/// (member order and spacing aside: a copy that went through a `Value` tree is still equal).
///
/// The empty state is `null`: detail the store left out because it is derived again from the
/// stored bytes on read (`ObservationQuery::details`).
#[derive(Clone, Debug)]
pub struct RawJson(Box<RawValue>);

impl RawJson {
    /// `null`.
    pub fn null() -> Self {
        Self(RawValue::NULL.to_owned())
    }

    /// `value` written as JSON; `null` when it cannot be (a map with non-string keys).
    pub fn of<T: Serialize + ?Sized>(value: &T) -> Self {
        serde_json::value::to_raw_value(value).map_or_else(|_| Self::null(), Self)
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        self.0.get() == "null"
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The JSON as a borrowed raw value (for borrowed views that serialize it as is).
    pub fn as_raw(&self) -> &RawValue {
        &self.0
    }

    /// The JSON as a tree, for readers that look inside (tests, `exitvoice inspect`).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.0.get()).unwrap_or_default()
    }
}

impl Default for RawJson {
    fn default() -> Self {
        Self::null()
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get() || self.to_value() == other.to_value()
    }
}

impl Eq for RawJson {}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_kept_and_compared_as_written() {
        let raw = RawJson::of(&serde_json::json!({"b": [1, 2], "a": "x"}));
        assert_eq!(raw.get(), r#"{"a":"x","b":[1,2]}"#);
        assert!(!raw.is_null());
        assert!(RawJson::default().is_null());
        let back: RawJson = serde_json::from_str(r#" {"a":"x","b":[1,2]}"#).expect("parse");
        assert_eq!(back, raw, "surrounding whitespace is not part of the value");
        let reordered: RawJson = serde_json::from_str(r#"{"b":[1,2],"a":"x"}"#).expect("parse");
        assert_eq!(reordered, raw, "member order is not part of the value");
        let other: RawJson = serde_json::from_str(r#"{"b":[2,1],"a":"x"}"#).expect("parse");
        assert_ne!(other, raw, "array order is");
        let nested: RawJson =
            serde_json::from_value(serde_json::json!({"k": true})).expect("from a tree too");
        assert_eq!(nested.get(), r#"{"k":true}"#);
        assert_eq!(nested.to_value()["k"], true);
        assert_ne!(RawJson::of(&1), RawJson::of(&2));
    }
}
