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
    /// The layer and normalization version: `tlsv2` in `tlsv2_…` (empty without a `_`). Voices
    /// of different schemes can't be compared: a new normalization renames every voice without
    /// any client changing.
    pub fn scheme(&self) -> &str {
        self.0.split_once('_').map_or("", |(scheme, _)| scheme)
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

impl fmt::Display for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::A => "A",
            Self::B => "B",
            Self::C => "C",
            Self::D => "D",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::VoiceId;

    #[test]
    fn scheme_is_layer_and_version() {
        let scheme = |v: &str| VoiceId(v.to_owned()).scheme().to_owned();
        assert_eq!(scheme("tlsv2_0a1b"), "tlsv2");
        assert_eq!(scheme("h2v1_ff"), "h2v1");
        assert_eq!(scheme("h1v1_"), "h1v1");
        assert_eq!(scheme("nounderscore"), "");
    }
}
