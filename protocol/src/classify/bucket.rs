//! The bucket primitive (DESIGN.md, "bucket").
//!
//! Rules, first match wins:
//! 1. the client did not offer h2 in ALPN → no bucket;
//! 2. ALPN negotiated h2 but the client spoke HTTP/1.x → **D** (silent downgrade);
//! 3. h2 was offered but not negotiated, or nothing recognisable was spoken → no bucket (there is
//!    no HTTP/2 shape to judge);
//! 4. h2 spoken, but this request came after another probe's request on the same connection, or
//!    the connection had no preface + SETTINGS of its own → **C** (gateway re-mux);
//! 5. the prefix matches a browser profile → **A**;
//! 6. otherwise → **B** (library h2).

use exitvoice_schema::{Bucket, Spoken};

/// The facts the bucket is decided from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketInput {
    /// The ClientHello's ALPN list contains `h2`.
    pub alpn_offered_h2: bool,
    /// The server selected `h2`.
    pub alpn_negotiated_h2: bool,
    /// What the client's first decrypted bytes were.
    pub spoken: Spoken,
    /// The connection began with its own preface and a non-ACK SETTINGS frame.
    pub own_preface_and_settings: bool,
    /// Position of the request on its connection, 1 for the first.
    pub request_index: u32,
    /// An earlier request on the same connection carried a different probe token.
    pub earlier_other_probe: bool,
    /// The HTTP/2 prefix matches a browser profile ([`super::browser_profile`]).
    pub browser_profile: bool,
}

/// Which of the rules above decided a bucket, so a reader can be shown why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BucketRule {
    /// Rule 1: h2 not offered.
    NotOffered,
    /// Rule 2: h2 negotiated, HTTP/1.x spoken.
    Downgrade,
    /// Rule 3: h2 offered but not negotiated, or nothing recognisable spoken.
    NoHttp2,
    /// Rule 4: after another probe's request on the same connection.
    Remux,
    /// Rule 4: no preface and SETTINGS of its own.
    NoOwnPreface,
    /// Rule 5: a browser profile matched.
    BrowserProfile,
    /// Rule 6: h2 without a browser profile.
    Library,
}

impl BucketRule {
    /// The rule in a sentence.
    pub fn explain(self) -> &'static str {
        match self {
            Self::NotOffered => "the client did not offer h2 in ALPN: no bucket",
            Self::Downgrade => {
                "ALPN negotiated h2 but the client spoke HTTP/1.x: D (silent downgrade)"
            }
            Self::NoHttp2 => {
                "h2 was offered but not negotiated, or nothing recognisable was spoken: no bucket"
            }
            Self::Remux => {
                "the request came after another probe's request on the same connection: \
                 C (gateway re-mux)"
            }
            Self::NoOwnPreface => {
                "the connection had no preface and SETTINGS of its own: C (gateway re-mux)"
            }
            Self::BrowserProfile => "the HTTP/2 prefix matches a browser profile: A (browser h2)",
            Self::Library => "h2 was spoken and no browser profile matched: B (library h2)",
        }
    }
}

/// The bucket of one request, or `None` when the client did not offer (or did not get) h2.
pub fn bucket(input: &BucketInput) -> Option<Bucket> {
    decide(input).0
}

/// The bucket of one request and the rule that decided it.
pub fn decide(input: &BucketInput) -> (Option<Bucket>, BucketRule) {
    if !input.alpn_offered_h2 {
        return (None, BucketRule::NotOffered);
    }
    if input.alpn_negotiated_h2 && input.spoken == Spoken::Http1 {
        return (Some(Bucket::D), BucketRule::Downgrade);
    }
    if !input.alpn_negotiated_h2 || input.spoken != Spoken::H2 {
        return (None, BucketRule::NoHttp2);
    }
    if input.request_index > 1 && input.earlier_other_probe {
        return (Some(Bucket::C), BucketRule::Remux);
    }
    if !input.own_preface_and_settings {
        return (Some(Bucket::C), BucketRule::NoOwnPreface);
    }
    if input.browser_profile {
        (Some(Bucket::A), BucketRule::BrowserProfile)
    } else {
        (Some(Bucket::B), BucketRule::Library)
    }
}
