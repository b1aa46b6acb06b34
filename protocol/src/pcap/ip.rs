//! IPv4 and IPv6: from an IP packet to the TCP segment or UDP datagram inside it.
//!
//! Only unfragmented TCP and UDP are followed. IPv4 fragments other than a complete first fragment, and
//! IPv6 packets with a Fragment header, are skipped (TLS and HTTP clients set DF and fit segments
//! to the path MTU, so fragmented TCP is rare enough not to be worth a reassembly buffer).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::codec::Reader;

/// IP protocol number of TCP.
const TCP: u8 = 6;
/// IP protocol number of UDP.
const UDP: u8 = 17;
/// IPv6 extension headers we step over (RFC 8200 section 4): Hop-by-Hop Options, Routing,
/// Destination Options. The Fragment header (44) is not in the list: such packets are skipped.
const IPV6_SKIPPABLE: [u8; 3] = [0, 43, 60];
/// IPv6 Authentication Header (RFC 4302 section 2.2): its length counts 4-byte units, minus 2.
const IPV6_AH: u8 = 51;
/// Most IPv6 extension headers we walk before giving up on a packet.
const MAX_IPV6_EXTENSIONS: usize = 8;

/// A TCP segment or UDP datagram with the addresses of its IP packet.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct IpPayload<'a> {
    /// Source address.
    pub(crate) src: IpAddr,
    /// Destination address.
    pub(crate) dst: IpAddr,
    /// The TCP or UDP header and payload.
    pub(crate) segment: &'a [u8],
}

/// The TCP segment in `packet`, or `None` for other protocols, fragments and short packets.
pub(crate) fn tcp_packet(packet: &[u8]) -> Option<IpPayload<'_>> {
    transport(packet, TCP)
}

/// The UDP datagram (header included) in `packet`, or `None` for other protocols, fragments
/// and short packets.
pub(crate) fn udp_packet(packet: &[u8]) -> Option<IpPayload<'_>> {
    transport(packet, UDP)
}

fn transport(packet: &[u8], protocol: u8) -> Option<IpPayload<'_>> {
    let version = packet.first()? >> 4;
    match version {
        4 => ipv4(packet, protocol),
        6 => ipv6(packet, protocol),
        _ => None,
    }
}

/// RFC 791 section 3.1.
fn ipv4(packet: &[u8], wanted: u8) -> Option<IpPayload<'_>> {
    let mut r = Reader::new(packet);
    let header_len = usize::from(r.u8()? & 0x0f) * 4;
    r.u8()?; // DSCP, ECN
    let total_len = usize::from(r.u16()?);
    r.u16()?; // identification
    let fragment = r.u16()?;
    // More Fragments set, or a fragment offset: part of a fragmented datagram.
    if fragment & 0x3fff != 0 {
        return None;
    }
    r.u8()?; // TTL
    let protocol = r.u8()?;
    r.u16()?; // checksum
    let src = Ipv4Addr::from(r.u32()?);
    let dst = Ipv4Addr::from(r.u32()?);
    if protocol != wanted || header_len < 20 || total_len < header_len {
        return None;
    }
    // Trim link-layer padding after the datagram; keep a truncated capture as it is (TSO
    // captures write 0 in the total length, so fall back to what was captured).
    let end = if total_len == 0 {
        packet.len()
    } else {
        total_len.min(packet.len())
    };
    let segment = packet.get(header_len..end)?;
    Some(IpPayload {
        src: IpAddr::V4(src),
        dst: IpAddr::V4(dst),
        segment,
    })
}

/// RFC 8200 sections 3 and 4.
fn ipv6(packet: &[u8], wanted: u8) -> Option<IpPayload<'_>> {
    let mut r = Reader::new(packet);
    r.u32()?; // version, traffic class, flow label
    let payload_len = usize::from(r.u16()?);
    let mut next = r.u8()?;
    r.u8()?; // hop limit
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(r.take(16)?).ok()?);
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(r.take(16)?).ok()?);
    // A zero payload length means a jumbogram (RFC 2675) or TSO: use what was captured.
    let mut payload = if payload_len == 0 {
        r.rest()
    } else {
        let rest = r.rest();
        rest.get(..payload_len).unwrap_or(rest)
    };
    for _ in 0..MAX_IPV6_EXTENSIONS {
        if next == wanted {
            return Some(IpPayload {
                src: IpAddr::V6(src),
                dst: IpAddr::V6(dst),
                segment: payload,
            });
        }
        let mut ext = Reader::new(payload);
        let following = ext.u8()?;
        let len_field = usize::from(ext.u8()?);
        let len = if IPV6_SKIPPABLE.contains(&next) {
            (len_field + 1) * 8
        } else if next == IPV6_AH {
            (len_field + 2) * 4
        } else {
            return None;
        };
        payload = payload.get(len..)?;
        next = following;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_header(total_len: u16, flags_fragment: u16, protocol: u8) -> Vec<u8> {
        let mut p = vec![0x45, 0];
        p.extend_from_slice(&total_len.to_be_bytes());
        p.extend_from_slice(&[0, 1]);
        p.extend_from_slice(&flags_fragment.to_be_bytes());
        p.extend_from_slice(&[64, protocol, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        p
    }

    #[test]
    fn ipv4_trims_ethernet_padding() {
        let mut p = ipv4_header(24, 0x4000, TCP);
        p.extend_from_slice(&[1, 2, 3, 4, 0, 0, 0]);
        let tcp = tcp_packet(&p).expect("a TCP packet");
        assert_eq!(tcp.segment, &[1, 2, 3, 4]);
        assert_eq!(tcp.src, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
    }

    #[test]
    fn ipv4_fragments_udp_and_bad_lengths_are_skipped() {
        assert!(tcp_packet(&ipv4_header(20, 0x2000, TCP)).is_none());
        assert!(tcp_packet(&ipv4_header(20, 0x0001, TCP)).is_none());
        assert!(tcp_packet(&ipv4_header(20, 0, 17)).is_none());
        assert!(tcp_packet(&ipv4_header(10, 0, TCP)).is_none());
        assert!(tcp_packet(&[0x45, 0, 0]).is_none());
    }

    #[test]
    fn ipv6_steps_over_hop_by_hop() {
        let mut p = vec![0x60, 0, 0, 0, 0, 12, 0, 64];
        p.extend_from_slice(&[0; 15]);
        p.push(1);
        p.extend_from_slice(&[0; 15]);
        p.push(2);
        p.extend_from_slice(&[TCP, 0, 1, 4, 0, 0, 0, 0, 9, 9, 9, 9]);
        let tcp = tcp_packet(&p).expect("a TCP packet");
        assert_eq!(tcp.segment, &[9, 9, 9, 9]);
        assert_eq!(tcp.dst, IpAddr::V6(Ipv6Addr::from(2u128)));
        // A Fragment header is not followed.
        p[6] = 44;
        assert!(tcp_packet(&p).is_none());
    }
}
