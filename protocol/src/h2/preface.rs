//! The client connection preface (RFC 9113 section 3.4).

/// "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", the 24 octets every HTTP/2 client connection starts with.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How `bytes` relate to the preface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PrefaceMatch {
    /// The full preface is there.
    Complete,
    /// `bytes` is a proper prefix of the preface (a cut capture or a partial read).
    Partial,
    /// `bytes` diverges from the preface.
    Mismatch,
}

/// Compare the start of `bytes` with the preface.
pub(crate) fn check(bytes: &[u8]) -> PrefaceMatch {
    if bytes.starts_with(PREFACE) {
        PrefaceMatch::Complete
    } else if PREFACE.starts_with(bytes) {
        PrefaceMatch::Partial
    } else {
        PrefaceMatch::Mismatch
    }
}
