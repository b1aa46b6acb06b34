//! Link layers: from a captured frame to the IP packet inside it.
//!
//! Understood: Ethernet II (with any number of 802.1Q / 802.1ad VLAN tags), Linux cooked capture
//! v1 and v2, raw IP, and BSD loopback (`NULL`, host byte order, and `LOOP`, network byte order).
//! Link-type numbers are from <https://www.tcpdump.org/linktypes.html>. Anything else, and any
//! frame too short for its header, is skipped: a capture may mix traffic we don't follow.

use crate::codec::Reader;

/// `LINKTYPE_NULL`: BSD loopback, a 4-byte address family in the capturing host's byte order.
const NULL: i32 = 0;
/// `LINKTYPE_ETHERNET`.
const ETHERNET: i32 = 1;
/// `DLT_RAW` as some BSDs number it.
const RAW_BSD: i32 = 12;
/// `DLT_RAW` on OpenBSD.
const RAW_OPENBSD: i32 = 14;
/// `LINKTYPE_RAW`: the frame is an IPv4 or IPv6 packet.
const RAW: i32 = 101;
/// `LINKTYPE_LOOP`: OpenBSD loopback, the address family in network byte order.
const LOOP: i32 = 108;
/// `LINKTYPE_LINUX_SLL`: Linux cooked capture v1, 16-byte header ending in the protocol type.
const LINUX_SLL: i32 = 113;
/// `LINKTYPE_IPV4`.
const IPV4: i32 = 228;
/// `LINKTYPE_IPV6`.
const IPV6: i32 = 229;
/// `LINKTYPE_LINUX_SLL2`: Linux cooked capture v2, 20-byte header starting with the protocol type.
const LINUX_SLL2: i32 = 276;

/// EtherType of IPv4.
const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherTypes of VLAN tags: 802.1Q, 802.1ad (QinQ) and the older 0x9100 QinQ tag.
const ETHERTYPE_VLAN: [u16; 3] = [0x8100, 0x88a8, 0x9100];
/// Most VLAN tags we peel before giving up on a frame.
const MAX_VLAN_TAGS: usize = 4;

/// The IP packet carried by `frame` on link type `link`, or `None` when the frame carries
/// something else or is too short.
pub(crate) fn ip_packet(link: i32, frame: &[u8]) -> Option<&[u8]> {
    let mut r = Reader::new(frame);
    match link {
        ETHERNET => {
            r.take(12)?; // destination and source MAC
            ethertype_payload(r.u16()?, r)
        }
        LINUX_SLL => {
            r.take(14)?; // packet type, ARPHRD type, address length, 8 bytes of address
            ethertype_payload(r.u16()?, r)
        }
        LINUX_SLL2 => {
            let ethertype = r.u16()?;
            r.take(18)?; // reserved, interface index, ARPHRD type, packet type, address
            ethertype_payload(ethertype, r)
        }
        NULL | LOOP => {
            // The family value differs between systems (AF_INET6 is 10, 24, 28 or 30); the IP
            // version nibble tells the same thing without a table.
            r.take(4)?;
            Some(r.rest())
        }
        RAW | RAW_BSD | RAW_OPENBSD | IPV4 | IPV6 => Some(r.rest()),
        _ => None,
    }
}

fn ethertype_payload(mut ethertype: u16, mut r: Reader<'_>) -> Option<&[u8]> {
    for _ in 0..MAX_VLAN_TAGS {
        if !ETHERTYPE_VLAN.contains(&ethertype) {
            break;
        }
        r.u16()?; // priority, DEI, VLAN id
        ethertype = r.u16()?;
    }
    match ethertype {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Some(r.rest()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethernet_with_two_vlan_tags() {
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x88, 0xa8, 0x00, 0x01, 0x81, 0x00, 0x00, 0x02, 0x08, 0x00]);
        frame.extend_from_slice(&[0x45, 0x00]);
        assert_eq!(ip_packet(ETHERNET, &frame), Some(&[0x45, 0x00][..]));
    }

    #[test]
    fn non_ip_and_short_frames_are_skipped() {
        let mut arp = vec![0u8; 12];
        arp.extend_from_slice(&[0x08, 0x06, 1, 2]);
        assert_eq!(ip_packet(ETHERNET, &arp), None);
        assert_eq!(ip_packet(ETHERNET, &[0; 5]), None);
        assert_eq!(ip_packet(LINUX_SLL2, &[0x86, 0xdd, 0, 0]), None);
        assert_eq!(ip_packet(9999, &[0x45; 40]), None);
    }

    #[test]
    fn cooked_and_loopback_headers() {
        let mut sll = vec![0u8; 14];
        sll.extend_from_slice(&[0x86, 0xdd, 0x60]);
        assert_eq!(ip_packet(LINUX_SLL, &sll), Some(&[0x60][..]));
        let mut sll2 = vec![0x08, 0x00];
        sll2.extend_from_slice(&[0u8; 18]);
        sll2.push(0x45);
        assert_eq!(ip_packet(LINUX_SLL2, &sll2), Some(&[0x45][..]));
        assert_eq!(ip_packet(NULL, &[2, 0, 0, 0, 0x45]), Some(&[0x45][..]));
        assert_eq!(ip_packet(RAW, &[0x60]), Some(&[0x60][..]));
    }
}
