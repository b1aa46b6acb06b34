//! ALPN as three facts of a connection — offered, negotiated, spoken — in the echo and in what
//! coherence judges. Below both: the echo embeds a coherence verdict, and the verdict is made
//! from these facts.

use serde::{Deserialize, Serialize};

/// The protocol the client actually spoke after the handshake, sniffed from its first bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Spoken {
    /// The connection opened with the HTTP/2 preface (RFC 9113 section 3.4).
    #[serde(rename = "h2")]
    H2,
    /// The connection opened with an HTTP/1.x request line.
    #[serde(rename = "http/1.1")]
    Http1,
    /// Neither: nothing sent, or bytes that are neither.
    #[serde(rename = "unknown")]
    #[default]
    Unknown,
}

/// ALPN as three separate facts: what was offered, what the server chose, what was spoken.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alpn {
    /// Protocol names from the ClientHello ALPN extension, wire order (lossy UTF-8).
    pub offered: Vec<String>,
    /// The protocol the server selected, if any.
    pub negotiated: Option<String>,
    /// What the client's first decrypted bytes were.
    pub spoken: Spoken,
}
