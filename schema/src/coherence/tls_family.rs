//! The TLS family of a ClientHello, by shape: GREASE, the extensions only one stack sends, and
//! the cipher order a stack keeps across releases; the first rule that fits wins.

use super::{families, Family};

/// ALPS, old and new code points (draft-vvv-tls-alps): only Chromium sends it.
const ALPS: [u16; 2] = [0x4469, 0x44cd];
/// record_size_limit (RFC 8449) and delegated_credentials (RFC 9345): Firefox sends both.
const RECORD_SIZE_LIMIT: u16 = 0x001c;
const DELEGATED_CREDENTIALS: u16 = 0x0022;
/// status_request_v2 (RFC 6961): Java's TLS stack still sends it.
const STATUS_REQUEST_V2: u16 = 0x0011;
/// encrypt_then_mac (RFC 7366): OpenSSL sends it, with the renegotiation SCSV cipher.
const ENCRYPT_THEN_MAC: u16 = 0x0016;
/// TLS_EMPTY_RENEGOTIATION_INFO_SCSV (RFC 5746 section 3.3).
const RENEGOTIATION_SCSV: u16 = 0x00ff;
/// rustls' default cipher order starts with the three TLS 1.3 suites, AES-256 then AES-128
/// (OpenSSL's puts ChaCha20 second); it sends the renegotiation SCSV, not encrypt_then_mac.
const RUSTLS_FIRST: [u16; 3] = [0x1302, 0x1301, 0x1303];

/// What the family rules read from a ClientHello: its code points in wire order, GREASE
/// included, and its JA4 (for `exact`).
#[derive(Clone, Copy, Debug)]
pub struct HelloShape<'a> {
    /// Cipher suite code points, wire order.
    pub cipher_suites: &'a [u16],
    /// Extension type code points, wire order.
    pub extensions: &'a [u16],
    /// The hello's JA4 fingerprint.
    pub ja4: &'a str,
}

/// The TLS family a ClientHello looks like, exact when its JA4 is a recorded one of that family.
pub fn tls_family(hello: &HelloShape<'_>) -> Option<Family> {
    let name = family_name(hello)?;
    let exact = families::TLS_EXACT
        .iter()
        .any(|(family, ja4s)| *family == name && ja4s.contains(&hello.ja4));
    Some(Family::new(name, exact))
}

/// The family's name, first rule that fits.
fn family_name(hello: &HelloShape<'_>) -> Option<&'static str> {
    let grease = hello
        .cipher_suites
        .iter()
        .chain(hello.extensions)
        .any(|&v| is_grease(v));
    let ciphers: Vec<u16> = hello
        .cipher_suites
        .iter()
        .copied()
        .filter(|&v| !is_grease(v))
        .collect();
    let has = |code: u16| hello.extensions.contains(&code);
    if ciphers.is_empty() {
        None
    } else if grease && ALPS.iter().any(|&a| has(a)) {
        Some("chrome")
    } else if has(RECORD_SIZE_LIMIT) && has(DELEGATED_CREDENTIALS) {
        Some("firefox")
    } else if has(STATUS_REQUEST_V2) {
        Some("java")
    } else if ciphers.contains(&RENEGOTIATION_SCSV) && has(ENCRYPT_THEN_MAC) {
        Some("openssl")
    } else if ciphers.starts_with(&RUSTLS_FIRST) {
        Some("rustls")
    } else if ciphers.first().is_some_and(|&c| c >> 8 != 0x13) && !grease {
        // Go lists its TLS 1.2 suites first (its TLS 1.3 suites are not configurable).
        Some("go")
    } else {
        None
    }
}

/// Whether a code point is an RFC 8701 GREASE value: both bytes equal, low nibbles `a`
/// (`value & 0x0f0f == 0x0a0a` alone would also accept `0x0a1a`).
fn is_grease(value: u16) -> bool {
    value & 0x0f0f == 0x0a0a && value >> 8 == value & 0x00ff
}
