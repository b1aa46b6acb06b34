//! Capture files: classic pcap (both byte orders, micro- and nanosecond, the "modified" variant)
//! and pcapng (several sections, several interfaces, Decryption Secrets Blocks), read with the
//! `pcap-parser` crate from a buffer held in memory.
//!
//! The reader only splits the file into link-layer frames and key-log text; it never looks inside
//! a frame. A block that cannot be parsed ends the walk: the frames read so far are kept and the
//! reason is reported, so a capture cut short by a full disk still yields its connections.

use pcap_parser::pcap::{
    parse_pcap_frame, parse_pcap_frame_be, parse_pcap_frame_modified, parse_pcap_header,
};
use pcap_parser::pcapng::{Block, SecretsType};
use pcap_parser::PcapNGSlice;

use super::PcapError;

/// Magic numbers of a classic pcap file as the first four bytes appear in the file
/// (<https://www.ietf.org/archive/id/draft-ietf-opsawg-pcap-04.html#section-4>): micro- and
/// nanosecond resolution in both byte orders, and Alexey Kuznetsov's "modified" format.
const PCAP_MAGICS: [[u8; 4]; 6] = [
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0x4d, 0x3c, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
    [0x34, 0xcd, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xcd, 0x34],
];

/// Block type of a pcapng Section Header Block, the same in both byte orders
/// (<https://www.ietf.org/archive/id/draft-ietf-opsawg-pcapng-03.html#section-4.1>).
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// The two container formats this reader understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// Classic libpcap.
    Pcap,
    /// pcapng.
    PcapNg,
}

/// The format of `file`, told by its first four bytes, or `None` for anything else.
pub(crate) fn sniff(file: &[u8]) -> Option<Format> {
    let magic: [u8; 4] = file.get(..4)?.try_into().ok()?;
    if magic == PCAPNG_MAGIC {
        Some(Format::PcapNg)
    } else if PCAP_MAGICS.contains(&magic) {
        Some(Format::Pcap)
    } else {
        None
    }
}

/// What a capture file holds, in file order.
#[derive(Debug, Default)]
pub(crate) struct Contents<'a> {
    /// Link-layer frames: (link type, captured bytes).
    pub(crate) frames: Vec<(i32, &'a [u8])>,
    /// Each frame's capture time in nanoseconds since the epoch (the interface's offset left
    /// out: only differences within a connection are read); `None` when it has none (a pcapng
    /// Simple Packet Block) or its resolution is not one pcapng allows.
    pub(crate) times_ns: Vec<Option<u64>>,
    /// Bodies of pcapng Decryption Secrets Blocks of type TLS key log.
    pub(crate) key_logs: Vec<&'a [u8]>,
    /// Why the walk ended before the end of the file, if it did.
    pub(crate) stopped: Option<PcapError>,
}

/// Splits a capture file into frames and key logs.
///
/// # Errors
/// [`PcapError::NotACapture`] when the file is neither pcap nor pcapng, and
/// [`PcapError::BadHeader`] when its file header cannot be read. Later damage is reported in
/// [`Contents::stopped`].
pub(crate) fn read(file: &[u8]) -> Result<Contents<'_>, PcapError> {
    match sniff(file) {
        Some(Format::Pcap) => read_pcap(file),
        Some(Format::PcapNg) => read_pcapng(file),
        None => Err(PcapError::NotACapture),
    }
}

fn read_pcap(file: &[u8]) -> Result<Contents<'_>, PcapError> {
    let (mut rest, header) = parse_pcap_header(file).map_err(|_| PcapError::BadHeader)?;
    let parse = if header.is_modified_format() {
        parse_pcap_frame_modified
    } else if header.is_bigendian() {
        parse_pcap_frame_be
    } else {
        parse_pcap_frame
    };
    let mut contents = Contents::default();
    while !rest.is_empty() {
        let offset = file.len() - rest.len();
        match parse(rest) {
            Ok((next, frame)) => {
                contents.frames.push((header.network.0, frame.data));
                let fraction = if header.is_nanosecond_precision() {
                    1_000_000_000
                } else {
                    1_000_000
                };
                contents.times_ns.push(nanos(
                    u64::from(frame.ts_sec) * fraction + u64::from(frame.ts_usec),
                    fraction,
                ));
                rest = next;
            }
            Err(error) => {
                contents.stopped = Some(stop_reason(&error, offset));
                break;
            }
        }
    }
    Ok(contents)
}

fn read_pcapng(file: &[u8]) -> Result<Contents<'_>, PcapError> {
    let mut blocks = PcapNGSlice::from_slice(file).map_err(|_| PcapError::BadHeader)?;
    let mut contents = Contents::default();
    // Link type and time resolution (units per second) of each interface of the current
    // section, by interface id (pcapng section 4.2: interface ids count from zero in each
    // section).
    let mut interfaces: Vec<(i32, Option<u64>)> = Vec::new();
    let mut offset = 0usize;
    let mut big_endian = false;
    loop {
        if block_too_short(file, offset, big_endian) {
            contents.stopped = Some(PcapError::BadBlock { offset });
            break;
        }
        let Some(block) = blocks.next() else {
            break;
        };
        let block = match block {
            Ok(pcap_parser::PcapBlockOwned::NG(block)) => block,
            Ok(_) => continue,
            Err(error) => {
                contents.stopped = Some(stop_reason(&error, offset));
                break;
            }
        };
        offset = offset.saturating_add(block_len(&block));
        match block {
            Block::SectionHeader(shb) => {
                interfaces.clear();
                big_endian = shb.big_endian();
            }
            Block::InterfaceDescription(idb) => {
                interfaces.push((idb.linktype.0, idb.ts_resolution()));
            }
            Block::EnhancedPacket(epb) => {
                let link = usize::try_from(epb.if_id)
                    .ok()
                    .and_then(|id| interfaces.get(id));
                if let Some(&(link, resolution)) = link {
                    let len = usize::try_from(epb.caplen).unwrap_or(usize::MAX);
                    contents
                        .frames
                        .push((link, epb.data.get(..len).unwrap_or(epb.data)));
                    let units = u64::from(epb.ts_high) << 32 | u64::from(epb.ts_low);
                    contents
                        .times_ns
                        .push(resolution.and_then(|per_second| nanos(units, per_second)));
                }
            }
            Block::SimplePacket(spb) => {
                // A Simple Packet Block belongs to the first interface (pcapng section 4.4),
                // and carries no time.
                if let Some(&(link, _)) = interfaces.first() {
                    let len = usize::try_from(spb.origlen).unwrap_or(usize::MAX);
                    contents
                        .frames
                        .push((link, spb.data.get(..len).unwrap_or(spb.data)));
                    contents.times_ns.push(None);
                }
            }
            Block::DecryptionSecrets(dsb) if dsb.secrets_type == SecretsType::TlsKeyLog => {
                let len = usize::try_from(dsb.secrets_len).unwrap_or(usize::MAX);
                let body = dsb.data.get(..len).unwrap_or(dsb.data);
                contents.key_logs.push(body);
            }
            _ => {}
        }
    }
    Ok(contents)
}

/// `units` of `1 / per_second` seconds in nanoseconds; `None` for a resolution of zero or a
/// time past the year 2554.
fn nanos(units: u64, per_second: u64) -> Option<u64> {
    let per_second = u128::from(per_second);
    if per_second == 0 {
        return None;
    }
    let units = u128::from(units);
    let ns = units / per_second * 1_000_000_000 + units % per_second * 1_000_000_000 / per_second;
    u64::try_from(ns).ok()
}

/// Whether the block at `offset` declares a total length under 12 bytes, the size of the
/// type and the two length fields (pcapng section 3.1). pcap-parser 0.17 subtracts 12 from it
/// unchecked for a Process Information Block (its minimum header size is set to 4): an
/// integer overflow panic in builds with overflow checks (found by the `pcap` fuzz target).
/// Section Header Blocks are left to pcap-parser, which checks them and knows their byte order.
fn block_too_short(file: &[u8], offset: usize, big_endian: bool) -> bool {
    let Some(&[t0, t1, t2, t3, l0, l1, l2, l3]) = file
        .get(offset..)
        .and_then(|rest| rest.get(..8))
        .and_then(|header| <&[u8; 8]>::try_from(header).ok())
    else {
        return false;
    };
    if [t0, t1, t2, t3] == PCAPNG_MAGIC {
        return false;
    }
    let len = if big_endian {
        u32::from_be_bytes([l0, l1, l2, l3])
    } else {
        u32::from_le_bytes([l0, l1, l2, l3])
    };
    len < 12
}

/// Length of a pcapng block as written in its header, for error offsets.
fn block_len(block: &Block<'_>) -> usize {
    let len = match block {
        Block::SectionHeader(b) => b.block_len1,
        Block::InterfaceDescription(b) => b.block_len1,
        Block::EnhancedPacket(b) => b.block_len1,
        Block::SimplePacket(b) => b.block_len1,
        Block::NameResolution(b) => b.block_len1,
        Block::InterfaceStatistics(b) => b.block_len1,
        Block::SystemdJournalExport(b) => b.block_len1,
        Block::DecryptionSecrets(b) => b.block_len1,
        Block::ProcessInformation(b) => b.block_len1,
        Block::Custom(b) => b.block_len1,
        Block::Unknown(b) => b.block_len1,
    };
    usize::try_from(len).unwrap_or(usize::MAX)
}

fn stop_reason<I>(
    error: &pcap_parser::nom::Err<pcap_parser::PcapError<I>>,
    offset: usize,
) -> PcapError {
    match error {
        pcap_parser::nom::Err::Incomplete(_) => PcapError::Truncated { offset },
        _ => PcapError::BadBlock { offset },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_both_formats_and_nothing_else() {
        assert_eq!(sniff(&[0xd4, 0xc3, 0xb2, 0xa1, 0]), Some(Format::Pcap));
        assert_eq!(sniff(&[0x0a, 0x0d, 0x0d, 0x0a]), Some(Format::PcapNg));
        assert_eq!(sniff(b"\x16\x03\x01\x02\x00"), None);
        assert_eq!(sniff(&[0xd4, 0xc3]), None);
    }

    #[test]
    fn header_only_pcap_has_no_frames() {
        let mut file = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
        file.extend_from_slice(&[0; 8]);
        file.extend_from_slice(&65_535u32.to_le_bytes());
        file.extend_from_slice(&1u32.to_le_bytes());
        let contents = read(&file).expect("a valid header");
        assert!(contents.frames.is_empty());
        assert!(contents.stopped.is_none());
        assert_eq!(read(&file[..20]).err(), Some(PcapError::BadHeader));
    }
}
