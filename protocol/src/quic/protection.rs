//! Initial packet protection, undone: header protection removal and AEAD decryption with the
//! client's Initial keys (RFC 9001 sections 5.2 to 5.4; RFC 9369 section 3.3 for version 2).
//!
//! The keys come from rustls (`rustls::quic::Keys::initial`, on the aws-lc-rs provider the
//! server already uses): the salts, labels, HKDF, AES-128-GCM and the AES-ECB header mask are
//! rustls's and aws-lc-rs's, not ours. What is ours is where the sample, the first byte and the
//! packet number sit in the packet.

use rustls::quic::{DirectionalKeys, Keys};
use rustls::Side;

use super::header::LongHeader;
use super::version::Version;
use super::QuicError;

/// Bytes of payload sampled for the header protection mask (RFC 9001 section 5.4.2).
const SAMPLE_LEN: usize = 16;
/// The sample starts as if the packet number were 4 bytes long (RFC 9001 section 5.4.2).
const MAX_PN_LEN: usize = 4;

/// The keys that open a client's Initial packets.
pub(crate) struct InitialKeys {
    client: DirectionalKeys,
}

/// An Initial packet with its protection removed.
pub(crate) struct Opened {
    /// The packet number. A client's Initials are the first packets of their space, so the
    /// truncated number is the full one (RFC 9000 section 17.1).
    pub(crate) packet_number: u64,
    /// Length of the packet number field in bytes.
    pub(crate) pn_len: usize,
    /// The unprotected first byte.
    pub(crate) first: u8,
    /// The decrypted frames.
    pub(crate) payload: Vec<u8>,
}

impl InitialKeys {
    /// The client's Initial keys for `version`, derived from the Destination Connection ID of
    /// the client's first Initial (RFC 9001 section 5.2). `None` for versions without keys.
    pub(crate) fn new(version: Version, first_dcid: &[u8]) -> Option<Self> {
        // The Initial AEAD is AES-128-GCM with SHA-256 whatever the ClientHello offers
        // (RFC 9001 section 5.2).
        let suite = rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256
            .tls13()?
            .quic_suite()?;
        // As the server, the "remote" keys are the client's.
        let Keys { remote, .. } = suite.keys(first_dcid, Side::Server, version.rustls()?);
        Some(Self { client: remote })
    }

    /// Removes header protection from the packet `header` describes, at the start of `packet`,
    /// and decrypts its payload.
    ///
    /// # Errors
    /// [`QuicError::TooShortToSample`] and [`QuicError::Decrypt`].
    pub(crate) fn open(&self, header: &LongHeader<'_>, packet: &[u8]) -> Result<Opened, QuicError> {
        let mut buf = packet
            .get(..header.packet_len)
            .ok_or(QuicError::TooShortToSample)?
            .to_vec();
        let sample_start = header.pn_offset + MAX_PN_LEN;
        let sample: [u8; SAMPLE_LEN] = buf
            .get(sample_start..sample_start + SAMPLE_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(QuicError::TooShortToSample)?;
        let (head, rest) = buf.split_at_mut(header.pn_offset);
        let (Some(first), Some(pn_field)) = (head.first_mut(), rest.get_mut(..MAX_PN_LEN)) else {
            return Err(QuicError::TooShortToSample);
        };
        // Unmasks the low 4 bits of the first byte, then as many packet number bytes as the
        // unmasked length says (RFC 9001 section 5.4.1).
        self.client
            .header
            .decrypt_in_place(&sample, first, pn_field)
            .map_err(|_| QuicError::TooShortToSample)?;
        let first = *first;
        let pn_len = usize::from(first & 0x03) + 1;
        let packet_number = pn_field
            .iter()
            .take(pn_len)
            .fold(0u64, |acc, b| acc << 8 | u64::from(*b));
        let (aad, payload) = buf.split_at_mut(header.pn_offset + pn_len);
        let plain_len = self
            .client
            .packet
            .decrypt_in_place(packet_number, aad, payload)
            .map_err(|_| QuicError::Decrypt)?
            .len();
        let mut payload = buf.split_off(header.pn_offset + pn_len);
        payload.truncate(plain_len);
        Ok(Opened {
            packet_number,
            pn_len,
            first,
            payload,
        })
    }
}
