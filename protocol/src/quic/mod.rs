//! QUIC client Initials, read without a QUIC stack: long headers, header protection removal
//! and AEAD decryption with the Initial keys (versions 1 and 2), coalesced packets, CRYPTO
//! reassembly into the ClientHello, and the `quic_transport_parameters` it carries.
//!
//! The flow is [`ClientInitials::start`] on a client's first datagram →
//! [`ClientInitials::push`] for its next ones → [`ClientInitials::client_hello`], the handshake
//! message that [`crate::tls::parse_client_hello`] reads like a TCP one (JA4 gets its `q`
//! there, from extension 0x39). Pure functions over bytes: no socket, no UDP listener, no
//! HTTP/3 (see `docs/quic.md`).
//!
//! Untrusted bytes end in a typed [`QuicError`]; every buffer is capped
//! ([`MAX_CRYPTO_BYTES`], [`MAX_INITIAL_PACKETS`]).

mod crypto_stream;
mod error;
mod frame;
mod header;
mod initials;
mod layout;
mod protection;
mod transport_parameters;
mod version;
mod voice;

pub use crypto_stream::MAX_CRYPTO_BYTES;
pub use error::QuicError;
pub use initials::{ClientInitials, InitialPacket, MAX_INITIAL_PACKETS, MIN_INITIAL_DATAGRAM};
pub use layout::{crypto_order, padding_where, CryptoOrder, PaddingWhere};
pub use transport_parameters::{
    decode as decode_transport_parameters, is_grease_parameter,
    of_client_hello as transport_parameters, ParameterValue, TransportParameter,
};
pub use version::Version;
pub use voice::{normalised_parameters, voice_description, voice_id};

/// The Destination Connection ID of a datagram whose first packet is a version 1 or 2
/// Initial: what the live capture keys an attempt by, with the client's address
/// (docs/quic.md, "The UDP listener").
///
/// # Errors
/// Why the datagram opens with no such Initial: a header that does not parse, a version with
/// no Initial keys (GREASE versions among them, RFC 9000 section 15), another packet type.
pub fn initial_dcid(datagram: &[u8]) -> Result<&[u8], QuicError> {
    let header = header::LongHeader::read(datagram)?;
    if !header.is_initial() {
        return Err(QuicError::NotInitial(header.packet_type()));
    }
    Ok(header.dcid)
}
