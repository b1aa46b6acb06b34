//! Voices and buckets: the normalized identities both halves of exitvoice compare.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A normalized, hashed identity of one layer (TLS, HTTP/2, HTTP/1).
///
/// Written as `<layer>v<version>_<hex>`, e.g. `tlsv2_…`, `h2v1_…`, `h1v1_…`, so a voice from one
/// layer or normalization version can never be mistaken for another's.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct VoiceId(pub String);

impl VoiceId {
    /// The layer and the normalization version: `("tls", "2")` for `tlsv2_…`, `("h2", "1")` for
    /// `h2v1_…`; `None` for a string not of that form.
    pub fn scheme(&self) -> Option<(&str, &str)> {
        let (scheme, _) = self.0.split_once('_')?;
        scheme.rsplit_once('v')
    }

    /// Whether two voices can be compared: not when they are of one layer and two normalization
    /// versions (a new normalization renames every voice of its layer without any client
    /// changing). Voices of two layers (HTTP/2 and HTTP/1) compare: they are different voices.
    pub fn comparable(&self, other: &Self) -> bool {
        match (self.scheme(), other.scheme()) {
            (Some((layer, version)), Some((other_layer, other_version))) => {
                layer != other_layer || version == other_version
            }
            _ => true,
        }
    }
}

impl fmt::Display for VoiceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The HTTP/2 shape the echo server saw (DESIGN.md, "bucket").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Bucket {
    /// Browser-shaped h2: matches a known browser profile.
    A,
    /// Library h2: h2 spoken, no browser profile matched.
    B,
    /// Gateway re-mux: the request arrived mid-connection or without its own preface/SETTINGS.
    C,
    /// Silent downgrade: ALPN negotiated h2, but the client spoke HTTP/1.x.
    D,
}

impl Bucket {
    /// The bucket's letter.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::A => "A",
            Self::B => "B",
            Self::C => "C",
            Self::D => "D",
        }
    }
}

impl fmt::Display for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::VoiceId;

    #[test]
    fn versions_of_one_layer_do_not_compare() {
        let v = |s: &str| VoiceId(s.to_owned());
        assert_eq!(v("tlsv2_0a1b").scheme(), Some(("tls", "2")));
        assert_eq!(v("h2v1_ff").scheme(), Some(("h2", "1")));
        assert_eq!(v("nounderscore").scheme(), None);
        assert!(!v("tlsv1_aa").comparable(&v("tlsv2_bb")));
        assert!(v("tlsv2_aa").comparable(&v("tlsv2_bb")));
        assert!(v("h2v1_aa").comparable(&v("h1v1_bb")));
        assert!(v("a").comparable(&v("b")));
    }
}
