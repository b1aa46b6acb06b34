//! TLS key logs in the NSS format (`SSLKEYLOGFILE`), from a pcapng Decryption Secrets Block or
//! from a file.
//!
//! Each line is `LABEL <client_random hex> <secret hex>`; `#` starts a comment
//! (<https://www.ietf.org/archive/id/draft-ietf-tls-keylogfile-02.html#section-2>). Lines we
//! cannot read or do not use are skipped, as NSS, OpenSSL and Wireshark do. Only the secrets that
//! decrypt what the client sent, and the server handshake secret (for the negotiated ALPN), are
//! kept. The secrets never appear in `Debug` output.

use std::collections::HashMap;
use std::fmt;

/// Length of the ClientHello random that keys every line.
const RANDOM_LEN: usize = 32;
/// Longest secret accepted: the 48-byte TLS 1.2 master secret, and TLS 1.3 secrets up to SHA-512.
const MAX_SECRET_LEN: usize = 64;

/// The client-side secrets logged for one connection.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct ClientSecrets {
    /// TLS 1.3 `CLIENT_HANDSHAKE_TRAFFIC_SECRET`.
    pub(crate) handshake: Option<Vec<u8>>,
    /// TLS 1.3 `CLIENT_TRAFFIC_SECRET_0`.
    pub(crate) traffic: Option<Vec<u8>>,
    /// TLS 1.2 `CLIENT_RANDOM` (the master secret).
    pub(crate) master: Option<Vec<u8>>,
    /// TLS 1.3 `SERVER_HANDSHAKE_TRAFFIC_SECRET`, to read the negotiated ALPN protocol from the
    /// server's EncryptedExtensions.
    pub(crate) server_handshake: Option<Vec<u8>>,
}

impl fmt::Debug for ClientSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSecrets")
            .field("handshake", &self.handshake.is_some())
            .field("traffic", &self.traffic.is_some())
            .field("master", &self.master.is_some())
            .field("server_handshake", &self.server_handshake.is_some())
            .finish()
    }
}

/// Secrets by ClientHello random (the client-side ones, and the server handshake secret).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KeyLog {
    by_random: HashMap<[u8; RANDOM_LEN], ClientSecrets>,
}

impl fmt::Debug for KeyLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyLog")
            .field("connections", &self.by_random.len())
            .finish()
    }
}

impl KeyLog {
    /// Reads every usable line of `text`.
    pub fn parse(text: &str) -> Self {
        let mut log = Self::default();
        log.extend(text);
        log
    }

    /// Adds every usable line of `text`; a later line replaces an earlier one.
    pub fn extend(&mut self, text: &str) {
        for line in text.lines() {
            let mut fields = line.split_ascii_whitespace();
            let (Some(label), Some(random), Some(secret), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let Some(random) = decode_random(random) else {
                continue;
            };
            let Some(secret) = decode_secret(secret) else {
                continue;
            };
            let entry = self.by_random.entry(random).or_default();
            match label {
                "CLIENT_HANDSHAKE_TRAFFIC_SECRET" => entry.handshake = Some(secret),
                "CLIENT_TRAFFIC_SECRET_0" => entry.traffic = Some(secret),
                "CLIENT_RANDOM" => entry.master = Some(secret),
                "SERVER_HANDSHAKE_TRAFFIC_SECRET" => entry.server_handshake = Some(secret),
                _ => {}
            }
        }
        self.by_random.retain(|_, s| *s != ClientSecrets::default());
    }

    /// Number of connections with at least one secret kept.
    pub fn len(&self) -> usize {
        self.by_random.len()
    }

    /// Whether no usable line was read.
    pub fn is_empty(&self) -> bool {
        self.by_random.is_empty()
    }

    /// The secrets of the connection whose ClientHello carried `random`.
    pub(crate) fn client(&self, random: &[u8; RANDOM_LEN]) -> Option<&ClientSecrets> {
        self.by_random.get(random)
    }
}

fn decode_random(hex_text: &str) -> Option<[u8; RANDOM_LEN]> {
    let mut out = [0u8; RANDOM_LEN];
    hex::decode_to_slice(hex_text, &mut out).ok()?;
    Some(out)
}

fn decode_secret(hex_text: &str) -> Option<Vec<u8>> {
    if hex_text.len() > MAX_SECRET_LEN * 2 {
        return None;
    }
    let secret = hex::decode(hex_text).ok()?;
    (!secret.is_empty()).then_some(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RANDOM: &str = "0101010101010101010101010101010101010101010101010101010101010101";

    #[test]
    fn keeps_client_secrets_and_skips_the_rest() {
        let text = format!(
            "# comment\n\
             SERVER_TRAFFIC_SECRET_0 {RANDOM} aa\n\
             CLIENT_HANDSHAKE_TRAFFIC_SECRET {RANDOM} 0a0b\n\
             CLIENT_TRAFFIC_SECRET_0 {RANDOM} 0c0d\r\n\
             CLIENT_RANDOM 0101 0e\n\
             CLIENT_RANDOM {RANDOM} zz\n\
             CLIENT_TRAFFIC_SECRET_0 {RANDOM} 0c0d extra\n"
        );
        let log = KeyLog::parse(&text);
        assert_eq!(log.len(), 1);
        let secrets = log.client(&[1; 32]).expect("secrets for the random");
        assert_eq!(secrets.handshake.as_deref(), Some(&[0x0a, 0x0b][..]));
        assert_eq!(secrets.traffic.as_deref(), Some(&[0x0c, 0x0d][..]));
        assert_eq!(secrets.master, None);
        assert_eq!(secrets.server_handshake, None);
        assert!(!format!("{secrets:?}").contains("0c"));
    }

    #[test]
    fn server_traffic_secrets_are_not_kept() {
        let log = KeyLog::parse(&format!("SERVER_TRAFFIC_SECRET_0 {RANDOM} 01\n"));
        assert!(log.is_empty());
    }
}
