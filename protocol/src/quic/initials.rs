//! One client's Initial packets, datagram by datagram, until its ClientHello is complete.
//!
//! An attempt starts with a datagram that looks like a client's first flight (RFC 9000
//! sections 7.2 and 14.1: at least 1200 bytes, an Initial with a Destination Connection ID of
//! 8 to 20 bytes). Its keys come from that first DCID for the whole Initial space, even after
//! the client switches to the server's connection id (RFC 9001 section 5.2). Each datagram may
//! coalesce several packets (RFC 9000 section 12.2): Initials are opened, other long-header
//! packets (0-RTT, Handshake) are stepped over by their Length, and what follows the last
//! packet that parses is datagram padding.

use serde::Serialize;

use super::crypto_stream::CryptoStream;
use super::frame::{self, Frame, PADDING};
use super::header::LongHeader;
use super::protection::InitialKeys;
use super::version::Version;
use super::QuicError;

/// A client MUST pad datagrams carrying Initial packets to 1200 bytes (RFC 9000 section 14.1).
pub const MIN_INITIAL_DATAGRAM: usize = 1200;
/// Shortest Destination Connection ID of a client's first Initial (RFC 9000 section 7.2).
const MIN_FIRST_DCID_LEN: usize = 8;
/// Most Initial packets, and most datagrams, one attempt may use before its hello is complete
/// (Chrome's ML-KEM hellos take 2; retransmissions add a few).
pub const MAX_INITIAL_PACKETS: usize = 8;

/// What one opened Initial packet looked like.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InitialPacket {
    /// The packet number.
    pub packet_number: u64,
    /// Length of the packet number field in bytes.
    pub pn_len: usize,
    /// Length of the Destination Connection ID.
    pub dcid_len: usize,
    /// Length of the Source Connection ID.
    pub scid_len: usize,
    /// Length of the token (non-zero after a Retry or with a NEW_TOKEN token).
    pub token_len: usize,
    /// The reserved bits after header protection removal, which must be 0 (RFC 9000
    /// section 17.2); recorded, not rejected.
    pub reserved_bits: u8,
    /// Frame types in wire order, a run of PADDING counted as one.
    pub frames: Vec<u64>,
    /// CRYPTO frames in the packet.
    pub crypto_frames: usize,
    /// The offsets of its CRYPTO frames, in wire order.
    pub crypto_offsets: Vec<u64>,
    /// Bytes that are no packet followed it in its datagram: padding after the packet rather
    /// than PADDING frames in it (RFC 9000 section 14.1 allows both).
    pub padding_after: bool,
}

/// A client's Initials, read so far.
pub struct ClientInitials {
    version: Version,
    first_dcid: Vec<u8>,
    keys: InitialKeys,
    crypto: CryptoStream,
    packets: Vec<InitialPacket>,
    datagram_sizes: Vec<usize>,
    hello: Option<Vec<u8>>,
}

impl std::fmt::Debug for ClientInitials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientInitials")
            .field("version", &self.version)
            .field("first_dcid", &hex::encode(&self.first_dcid))
            .field("packets", &self.packets)
            .field("datagram_sizes", &self.datagram_sizes)
            .field("complete", &self.hello.is_some())
            .finish_non_exhaustive()
    }
}

impl ClientInitials {
    /// Starts an attempt from a datagram that must open with a client's first Initial, and
    /// reads that datagram.
    ///
    /// # Errors
    /// A [`QuicError`] when the datagram is no client first flight: too short, not an Initial
    /// of version 1 or 2, a DCID shorter than 8 bytes, or a first packet that does not decrypt
    /// or parse.
    pub fn start(datagram: &[u8]) -> Result<Self, QuicError> {
        let header = LongHeader::read(datagram)?;
        if !header.is_initial() {
            return Err(QuicError::NotInitial(header.packet_type()));
        }
        if header.dcid.len() < MIN_FIRST_DCID_LEN {
            return Err(QuicError::ConnectionIdLength(header.dcid.len()));
        }
        if datagram.len() < MIN_INITIAL_DATAGRAM {
            return Err(QuicError::DatagramTooShort(datagram.len()));
        }
        let keys = InitialKeys::new(header.version, header.dcid)
            .ok_or(QuicError::UnsupportedVersion(header.version.0))?;
        let mut initials = Self {
            version: header.version,
            first_dcid: header.dcid.to_vec(),
            keys,
            crypto: CryptoStream::default(),
            packets: Vec::new(),
            datagram_sizes: Vec::new(),
            hello: None,
        };
        initials.push(datagram)?;
        Ok(initials)
    }

    /// Reads one more datagram of the same client. Once the hello is complete, datagrams are
    /// ignored.
    ///
    /// # Errors
    /// The first [`QuicError`] met in an Initial packet of the datagram (the packets before it
    /// are kept), or [`QuicError::TooManyPackets`] past the caps.
    pub fn push(&mut self, datagram: &[u8]) -> Result<(), QuicError> {
        if self.hello.is_some() {
            return Ok(());
        }
        if self.datagram_sizes.len() >= MAX_INITIAL_PACKETS {
            return Err(QuicError::TooManyPackets(MAX_INITIAL_PACKETS));
        }
        self.datagram_sizes.push(datagram.len());
        let mut rest = datagram;
        let mut first = true;
        let mut opened: Option<usize> = None;
        while !rest.is_empty() {
            let header = match LongHeader::read(rest) {
                Ok(header) => header,
                // The first packet must parse; after it, what does not is padding.
                Err(error) if first => return Err(error),
                Err(_) => {
                    if let Some(packet) = opened.and_then(|i| self.packets.get_mut(i)) {
                        packet.padding_after = true;
                    }
                    break;
                }
            };
            first = false;
            let packet_len = header.packet_len;
            // Once the hello is whole, the rest of its datagram is only walked (for padding).
            if header.is_initial() && header.version == self.version && self.hello.is_none() {
                self.open(&header, rest)?;
                opened = self.packets.len().checked_sub(1);
            }
            rest = rest.get(packet_len..).unwrap_or_default();
        }
        Ok(())
    }

    fn open(&mut self, header: &LongHeader<'_>, packet: &[u8]) -> Result<(), QuicError> {
        if self.packets.len() >= MAX_INITIAL_PACKETS {
            return Err(QuicError::TooManyPackets(MAX_INITIAL_PACKETS));
        }
        let opened = self.keys.open(header, packet)?;
        let frames = frame::frames(&opened.payload)?;
        let mut types: Vec<u64> = Vec::new();
        let mut crypto_offsets = Vec::new();
        for frame in &frames {
            let kind = match frame {
                Frame::Other(kind) => *kind,
                Frame::Crypto { offset, data } => {
                    crypto_offsets.push(*offset);
                    self.crypto.insert(*offset, data)?;
                    frame::CRYPTO
                }
            };
            if !(kind == PADDING && types.last() == Some(&PADDING)) {
                types.push(kind);
            }
        }
        self.packets.push(InitialPacket {
            packet_number: opened.packet_number,
            pn_len: opened.pn_len,
            dcid_len: header.dcid.len(),
            scid_len: header.scid.len(),
            token_len: header.token.len(),
            reserved_bits: (opened.first >> 2) & 0x03,
            frames: types,
            crypto_frames: crypto_offsets.len(),
            crypto_offsets,
            padding_after: false,
        });
        if let Some(hello) = self.crypto.client_hello()? {
            self.hello = Some(hello.to_vec());
        }
        Ok(())
    }

    /// The QUIC version of the attempt.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The Destination Connection ID of the client's first Initial.
    pub fn first_dcid(&self) -> &[u8] {
        &self.first_dcid
    }

    /// The Initial packets opened, in the order read.
    pub fn packets(&self) -> &[InitialPacket] {
        &self.packets
    }

    /// Sizes of the datagrams read, in order.
    pub fn datagram_sizes(&self) -> &[usize] {
        &self.datagram_sizes
    }

    /// The complete ClientHello handshake message (`01 LL LL LL …`), once reassembled: the
    /// input of [`crate::tls::parse_client_hello`].
    pub fn client_hello(&self) -> Option<&[u8]> {
        self.hello.as_deref()
    }
}
