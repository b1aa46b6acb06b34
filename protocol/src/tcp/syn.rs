//! A SYN: the IP header, the TCP header (RFC 9293 section 3.1) and its options, with the quirks
//! p0f reads from them.

use super::error::SynError;
use super::ip::{self, IpHeader};
use super::options::{self, Options};
use super::quirks::Quirks;
use crate::codec::Reader;

/// The fixed TCP header (RFC 9293 section 3.1).
const TCP_MIN: usize = 20;

/// TCP flags (RFC 9293 section 3.1; CWR and ECE: RFC 3168 section 6.1).
const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const URG: u8 = 0x20;
const ECN_FLAGS: u8 = 0xc0;
/// The low bit of the data-offset byte: the historic ECN nonce (RFC 3540, now reserved).
const NS: u8 = 0x01;

/// What a SYN's headers said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Syn {
    /// The IP header.
    pub ip: IpHeader,
    /// The sequence number.
    pub seq: u32,
    /// The window, unscaled.
    pub window: u16,
    /// The TCP header's length (data offset × 4).
    pub tcp_header_len: usize,
    /// The options.
    pub options: Options,
    /// Bytes of data the SYN carried (by the IP header's length; TCP Fast Open sends some).
    pub payload_len: usize,
    /// The quirks p0f names.
    pub quirks: Quirks,
}

/// Reads a SYN from its IP header on (what `TCP_SAVED_SYN` returns, or an IP packet from a
/// capture).
///
/// # Errors
/// [`SynError`] when the bytes are no IPv4 or IPv6 packet carrying a whole TCP header of an
/// initial SYN. Malformed options are not an error: they are the SYN's
/// [`Options::error`] and p0f's `bad` quirk.
pub fn parse_syn(bytes: &[u8]) -> Result<Syn, SynError> {
    let mut quirks = Quirks::default();
    let ip = ip::parse(bytes, &mut quirks)?;
    let segment = bytes.get(ip.header_len..).unwrap_or_default();
    let short = |needed| SynError::Truncated {
        header: "TCP",
        needed,
        available: segment.len(),
    };
    let mut r = Reader::new(segment);
    r.take(4).ok_or_else(|| short(TCP_MIN))?; // ports
    let seq = r.u32().ok_or_else(|| short(TCP_MIN))?;
    let ack = r.u32().ok_or_else(|| short(TCP_MIN))?;
    let offset_byte = r.u8().ok_or_else(|| short(TCP_MIN))?;
    let flags = r.u8().ok_or_else(|| short(TCP_MIN))?;
    let window = r.u16().ok_or_else(|| short(TCP_MIN))?;
    r.u16().ok_or_else(|| short(TCP_MIN))?; // checksum
    let urgent = r.u16().ok_or_else(|| short(TCP_MIN))?;
    let words = offset_byte >> 4;
    if words < 5 {
        return Err(SynError::DataOffset(words));
    }
    let tcp_header_len = usize::from(words) * 4;
    let option_bytes = r
        .take(tcp_header_len - TCP_MIN)
        .ok_or_else(|| short(tcp_header_len))?;
    if flags & (SYN | ACK | FIN | RST) != SYN {
        return Err(SynError::NotSyn(flags));
    }
    if flags & ECN_FLAGS != 0 || offset_byte & NS != 0 {
        quirks.set(Quirks::ECN);
    }
    if seq == 0 {
        quirks.set(Quirks::ZERO_SEQ);
    }
    // A SYN has no ACK flag (checked above), so only `ack+` can apply.
    if ack != 0 {
        quirks.set(Quirks::NONZERO_ACK);
    }
    if flags & URG != 0 {
        quirks.set(Quirks::URG);
    } else if urgent != 0 {
        quirks.set(Quirks::NONZERO_URG);
    }
    if flags & PSH != 0 {
        quirks.set(Quirks::PUSH);
    }
    let options = options::parse(option_bytes, &mut quirks);
    Ok(Syn {
        payload_len: ip.claimed_payload.saturating_sub(tcp_header_len),
        ip,
        seq,
        window,
        tcp_header_len,
        options,
        quirks,
    })
}

impl Syn {
    /// The likely initial TTL: the first of 32, 64, 128 and 255 at or above the received TTL
    /// (p0f's `guess_dist`; README section 5: "Almost all operating systems use 64, 128, or
    /// 255; ancient versions of Windows sometimes used 32").
    pub fn initial_ttl(&self) -> u8 {
        match self.ip.ttl {
            0..=32 => 32,
            33..=64 => 64,
            65..=128 => 128,
            _ => 255,
        }
    }

    /// Hops between the sender and us, if it started at [`Self::initial_ttl`].
    pub fn hops(&self) -> u8 {
        self.initial_ttl() - self.ip.ttl
    }
}
