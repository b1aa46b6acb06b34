//! What can go wrong while reading a client's Initial packets.

/// Why a datagram, packet or frame could not be read as part of a client's Initials.
///
/// Every variant comes from untrusted bytes; none is a bug in the reader.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuicError {
    /// The bytes ended inside the named field.
    #[error("QUIC {field} truncated")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// The first byte is not a long header with the fixed bit (RFC 9000 section 17.2).
    #[error("not a QUIC long header (first byte {0:#04x})")]
    NotLongHeader(u8),
    /// A version this reader has no Initial keys for (GREASE, drafts, Version Negotiation).
    #[error("unsupported QUIC version {0:#010x}")]
    UnsupportedVersion(u32),
    /// A long-header packet of a supported version that is not an Initial.
    #[error("not an Initial packet (long packet type {0})")]
    NotInitial(u8),
    /// A connection id longer than 20 bytes (RFC 9000 section 17.2), or a client's first
    /// Destination Connection ID shorter than 8 bytes (RFC 9000 section 7.2).
    #[error("bad connection id length {0}")]
    ConnectionIdLength(usize),
    /// The datagram carrying a client's first Initial is shorter than 1200 bytes
    /// (RFC 9000 section 14.1).
    #[error("datagram of {0} bytes is too short for a client Initial")]
    DatagramTooShort(usize),
    /// The packet's Length field runs past the end of the datagram.
    #[error("packet length {length} runs past the {available} bytes left in the datagram")]
    LengthBeyondDatagram {
        /// The Length field's value.
        length: u64,
        /// Bytes left after the Length field.
        available: usize,
    },
    /// Too few bytes after the packet number offset for the header protection sample
    /// (RFC 9001 section 5.4.2).
    #[error("packet too short to sample for header protection")]
    TooShortToSample,
    /// The AEAD tag did not verify: not this client's Initial, or corrupted.
    #[error("Initial packet does not decrypt with the Initial keys")]
    Decrypt,
    /// A frame type that is not allowed in an Initial packet (RFC 9000 section 12.4).
    #[error("frame type {0:#x} is not allowed in an Initial packet")]
    UnexpectedFrame(u64),
    /// CRYPTO data past the reassembly cap.
    #[error("CRYPTO data ends at byte {end}, past the cap of {cap}")]
    CryptoBeyondCap {
        /// Offset just past the frame's data.
        end: u64,
        /// The cap.
        cap: usize,
    },
    /// Two CRYPTO frames carry different bytes for the same offset.
    #[error("CRYPTO frames disagree at offset {0}")]
    CryptoConflict(usize),
    /// The CRYPTO stream does not start with a ClientHello (handshake type 1).
    #[error("CRYPTO stream starts with handshake type {0}, not a ClientHello")]
    NotClientHello(u8),
    /// More Initial packets or datagrams than one attempt may use.
    #[error("more than {0} Initial packets or datagrams without a complete ClientHello")]
    TooManyPackets(usize),
}
