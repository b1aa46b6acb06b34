//! The IP header of a SYN: IPv4 (RFC 791 section 3.1) or IPv6 (RFC 8200 section 3), and the
//! quirks p0f reads from it.

use super::error::SynError;
use super::quirks::Quirks;
use crate::codec::Reader;

/// IP protocol number of TCP.
const TCP: u8 = 6;
/// Shortest IPv4 header (RFC 791 section 3.1).
const IPV4_MIN: usize = 20;
/// The IPv6 fixed header (RFC 8200 section 3).
const IPV6_LEN: usize = 40;
/// IPv4 flags: reserved ("must be zero"), don't fragment, more fragments (RFC 791 section 3.1).
const IPV4_RESERVED: u16 = 0x8000;
const IPV4_DF: u16 = 0x4000;
/// The two ECN bits of the traffic class (RFC 3168 section 5): ECT or CE set means ECN.
const ECN_BITS: u8 = 0x03;

/// What a SYN's IP header said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpHeader {
    /// 4 or 6.
    pub version: u8,
    /// TTL or hop limit, as received.
    pub ttl: u8,
    /// IPv4 DF (never for IPv6).
    pub df: bool,
    /// The IPv4 identification (`None` for IPv6).
    pub id: Option<u16>,
    /// Bytes of IPv4 options (p0f's `olen`; 0 for IPv6, as p0f reads it).
    pub options_len: u8,
    /// Bytes of the IP header, options included.
    pub header_len: usize,
    /// Bytes after the IP header, as the header's length field claims (the kernel's saved SYN
    /// keeps only the headers, so a payload is counted from here, not from the bytes given).
    pub claimed_payload: usize,
}

/// Reads the IP header at the start of `bytes`, setting its quirks in `quirks`.
pub(crate) fn parse(bytes: &[u8], quirks: &mut Quirks) -> Result<IpHeader, SynError> {
    let Some(first) = bytes.first() else {
        return Err(truncated("IP", 1, 0));
    };
    match first >> 4 {
        4 => ipv4(bytes, quirks),
        6 => ipv6(bytes, quirks),
        other => Err(SynError::IpVersion(other)),
    }
}

fn truncated(header: &'static str, needed: usize, available: usize) -> SynError {
    SynError::Truncated {
        header,
        needed,
        available,
    }
}

fn ipv4(bytes: &[u8], quirks: &mut Quirks) -> Result<IpHeader, SynError> {
    let short = || truncated("IPv4", IPV4_MIN, bytes.len());
    let mut r = Reader::new(bytes);
    let words = r.u8().ok_or_else(short)? & 0x0f;
    let tos = r.u8().ok_or_else(short)?;
    let total_len = usize::from(r.u16().ok_or_else(short)?);
    let id = r.u16().ok_or_else(short)?;
    let flags = r.u16().ok_or_else(short)?;
    let ttl = r.u8().ok_or_else(short)?;
    let protocol = r.u8().ok_or_else(short)?;
    r.take(10).ok_or_else(short)?; // checksum, source, destination
    if words < 5 {
        return Err(SynError::IpHeaderLength(words));
    }
    let header_len = usize::from(words) * 4;
    if bytes.len() < header_len {
        return Err(truncated("IPv4", header_len, bytes.len()));
    }
    if protocol != TCP {
        return Err(SynError::NotTcp(protocol));
    }
    if flags & !(IPV4_DF | IPV4_RESERVED) != 0 {
        return Err(SynError::Fragment);
    }
    let df = flags & IPV4_DF != 0;
    if tos & ECN_BITS != 0 {
        quirks.set(Quirks::ECN);
    }
    if flags & IPV4_RESERVED != 0 {
        quirks.set(Quirks::MUST_BE_ZERO);
    }
    // p0f: `id+` is DF with a non-zero ID, `id-` no DF with a zero ID.
    match (df, id) {
        (true, 1..) => quirks.set(Quirks::NONZERO_ID),
        (false, 0) => quirks.set(Quirks::ZERO_ID),
        _ => {}
    }
    if df {
        quirks.set(Quirks::DF);
    }
    Ok(IpHeader {
        version: 4,
        ttl,
        df,
        id: Some(id),
        // `words` is at most 15, so the options are at most 40 bytes.
        options_len: (words - 5) * 4,
        header_len,
        claimed_payload: total_len.saturating_sub(header_len),
    })
}

fn ipv6(bytes: &[u8], quirks: &mut Quirks) -> Result<IpHeader, SynError> {
    let short = || truncated("IPv6", IPV6_LEN, bytes.len());
    let mut r = Reader::new(bytes);
    let first = r.u32().ok_or_else(short)?;
    let payload_len = usize::from(r.u16().ok_or_else(short)?);
    let next_header = r.u8().ok_or_else(short)?;
    let hop_limit = r.u8().ok_or_else(short)?;
    r.take(32).ok_or_else(short)?; // source, destination
                                   // Version (4 bits), traffic class (8), flow label (20): RFC 8200 section 3.
    let traffic_class = (first >> 20) as u8;
    if first & 0x000f_ffff != 0 {
        quirks.set(Quirks::FLOW);
    }
    if traffic_class & ECN_BITS != 0 {
        quirks.set(Quirks::ECN);
    }
    // Extension headers are not walked, as p0f does not walk them: a SYN behind one is no TCP
    // SYN to either of us.
    if next_header != TCP {
        return Err(SynError::NotTcp(next_header));
    }
    Ok(IpHeader {
        version: 6,
        ttl: hop_limit,
        df: false,
        id: None,
        options_len: 0,
        header_len: IPV6_LEN,
        claimed_payload: payload_len,
    })
}
