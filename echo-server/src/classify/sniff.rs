//! What protocol the client's first decrypted bytes are.

use exitvoice_schema::Spoken;

use crate::h2::PREFACE;

/// Longest method token accepted when sniffing HTTP/1 (`PROPPATCH`, `MKCALENDAR`, …).
const MAX_METHOD_LEN: usize = 16;

/// Classify the first bytes of a connection, which may be a partial first read.
///
/// [`Spoken::H2`] once at least `PRI ` has arrived and everything so far matches the preface
/// (RFC 9113 section 3.4); [`Spoken::Http1`] once a method token and a space have arrived (and
/// the bytes are not the preface); otherwise [`Spoken::Unknown`] (empty, too short to tell, or
/// neither).
pub fn sniff(first_bytes: &[u8]) -> Spoken {
    let n = first_bytes.len().min(PREFACE.len());
    let head = first_bytes.get(..n).unwrap_or_default();
    if n >= 4 && PREFACE.starts_with(head) {
        return Spoken::H2;
    }
    let method_len = first_bytes
        .iter()
        .take(MAX_METHOD_LEN + 1)
        .position(|&b| b == b' ');
    match method_len {
        Some(len) if len > 0 => {
            let method = first_bytes.get(..len).unwrap_or_default();
            if method
                .iter()
                .all(|b| b.is_ascii_uppercase() || *b == b'-' || *b == b'_')
            {
                Spoken::Http1
            } else {
                Spoken::Unknown
            }
        }
        _ => Spoken::Unknown,
    }
}
