//! What protocol the client's first decrypted bytes are: one rule for the live server (which
//! calls it on each read until it decides) and for `exitvoice inspect`.

use exitvoice_schema::Spoken;

use crate::h2::PREFACE;

/// Longest method token waited for before calling the bytes neither HTTP/2 nor HTTP/1.
const MAX_METHOD_LEN: usize = 32;

/// What the first bytes say about the protocol, once they say enough: the whole HTTP/2 preface
/// (RFC 9113 section 3.4), an HTTP/1.x request line's method token and a space (RFC 9112
/// section 3), or neither. `None` while the bytes so far could still become either.
pub fn sniff(seen: &[u8]) -> Option<Spoken> {
    let common = seen.len().min(PREFACE.len());
    if seen.get(..common) == PREFACE.get(..common) {
        return (seen.len() >= PREFACE.len()).then_some(Spoken::H2);
    }
    let token_len = seen
        .iter()
        .take_while(|b| b.is_ascii_uppercase() || **b == b'-' || **b == b'_')
        .count();
    match seen.get(token_len) {
        Some(b' ') if token_len > 0 => Some(Spoken::Http1),
        None if token_len < MAX_METHOD_LEN => None,
        _ => Some(Spoken::Unknown),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniff_decides_on_the_preface_or_the_first_divergence() {
        assert_eq!(sniff(b""), None);
        assert_eq!(sniff(b"PRI * HTTP/2"), None);
        assert_eq!(sniff(PREFACE), Some(Spoken::H2));
        assert_eq!(sniff(b"GET / HTTP/1.1\r\n"), Some(Spoken::Http1));
        assert_eq!(sniff(b"POST"), None);
        assert_eq!(sniff(b"POST /x"), Some(Spoken::Http1));
        assert_eq!(sniff(b"post /x"), Some(Spoken::Unknown));
        assert_eq!(sniff(b"\x00\x01garbage"), Some(Spoken::Unknown));
    }
}
