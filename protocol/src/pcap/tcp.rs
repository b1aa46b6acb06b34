//! TCP: segment headers and stream reassembly per connection and direction.
//!
//! Segments are kept as borrowed slices of the capture (no copy) and put in order by sequence
//! number when a stream is read: retransmitted and overlapping bytes are taken once (the first
//! copy seen wins), out-of-order segments land in their place, and a hole ends the stream there
//! (the bytes after it cannot be framed). Sequence numbers wrap (RFC 9293 section 3.4), so every
//! offset is computed with wrapping arithmetic from the stream's start.
//!
//! Memory is bounded: at most [`MAX_SEGMENTS`] segments per direction are kept, and a stream is
//! assembled up to a caller-given byte cap.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use crate::codec::Reader;

/// Most segments kept per direction of one connection; later ones are dropped.
pub(crate) const MAX_SEGMENTS: usize = 1 << 16;
/// Most connections followed in one capture; packets of further connections are ignored.
pub(crate) const MAX_CONNECTIONS: usize = 1 << 16;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;

/// The fields of a TCP header we use (RFC 9293 section 3.1).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Segment<'a> {
    pub(crate) src_port: u16,
    pub(crate) dst_port: u16,
    pub(crate) seq: u32,
    pub(crate) flags: u8,
    pub(crate) payload: &'a [u8],
    /// When it was captured, nanoseconds (set by the caller from the capture's record).
    pub(crate) time_ns: Option<u64>,
}

impl<'a> Segment<'a> {
    /// Parses a TCP header, or `None` if it is short or its data offset is impossible.
    pub(crate) fn parse(bytes: &'a [u8]) -> Option<Self> {
        let mut r = Reader::new(bytes);
        let src_port = r.u16()?;
        let dst_port = r.u16()?;
        let seq = r.u32()?;
        r.u32()?; // acknowledgment number
        let offset = usize::from(r.u8()? >> 4) * 4;
        let flags = r.u8()?;
        if offset < 20 {
            return None;
        }
        let payload = bytes.get(offset..)?;
        Some(Self {
            src_port,
            dst_port,
            seq,
            flags,
            payload,
            time_ns: None,
        })
    }

    fn is(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Whether this is a client's SYN: SYN set, ACK clear.
    pub(crate) fn opens(&self) -> bool {
        self.is(SYN) && !self.is(ACK)
    }
}

/// One direction of a connection, as captured.
#[derive(Debug, Default)]
struct Direction<'a> {
    /// Initial sequence number, when the SYN was captured.
    isn: Option<u32>,
    /// (sequence number of the first payload byte, payload), in capture order.
    segments: Vec<(u32, &'a [u8])>,
    /// Segments were dropped because of [`MAX_SEGMENTS`].
    capped: bool,
    /// A FIN or RST was seen: a later SYN from this side opens a new connection.
    closed: bool,
}

/// One TCP connection: the two endpoints in first-seen order and what each sent.
#[derive(Debug)]
pub(crate) struct Flow<'a> {
    /// The two endpoints; `sides[i]` is what `ends[i]` sent.
    pub(crate) ends: [SocketAddr; 2],
    sides: [Direction<'a>; 2],
    /// Which end sent a SYN without ACK (the client), if captured.
    syn_from: Option<usize>,
    /// That SYN, from its IP header on (the first one, when it was retransmitted).
    pub(crate) syn: Option<&'a [u8]>,
    /// Which end sent a SYN with ACK (the server), if captured.
    syn_ack_from: Option<usize>,
    /// 1-based number of the frame that opened this flow.
    pub(crate) first_frame: usize,
    /// When its handshake and first payloads were captured.
    pub(crate) timing: Timing,
}

/// Payload runs kept per connection: the ClientHello, the server's flight, the client's answer
/// and one more.
const MAX_RUNS: usize = 4;

/// Consecutive payload segments from one side, and when the first and last were captured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) side: usize,
    pub(crate) first_ns: u64,
    pub(crate) last_ns: u64,
}

/// The capture times of a connection's handshake and first payloads, as far as the capture
/// carries them.
#[derive(Debug, Default)]
pub(crate) struct Timing {
    /// The SYN-ACK.
    pub(crate) syn_ack_ns: Option<u64>,
    /// Each side's first segment after the SYN-ACK (the client's: its handshake ACK).
    pub(crate) after_syn_ack_ns: [Option<u64>; 2],
    /// The first payload runs, at most [`MAX_RUNS`].
    pub(crate) runs: Vec<Run>,
}

impl Timing {
    fn note(&mut self, side: usize, segment: &Segment<'_>) {
        let Some(at) = segment.time_ns else {
            return;
        };
        if segment.is(SYN) {
            if segment.is(ACK) {
                self.syn_ack_ns.get_or_insert(at);
            }
            return;
        }
        if self.syn_ack_ns.is_some() {
            if let Some(slot) = self.after_syn_ack_ns.get_mut(side) {
                slot.get_or_insert(at);
            }
        }
        if segment.payload.is_empty() {
            return;
        }
        match self.runs.last_mut() {
            Some(run) if run.side == side => run.last_ns = at,
            _ => {
                if self.runs.len() < MAX_RUNS {
                    self.runs.push(Run {
                        side,
                        first_ns: at,
                        last_ns: at,
                    });
                }
            }
        }
    }
}

/// A reassembled byte stream of one direction.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Stream {
    /// The contiguous bytes from the start of the stream.
    pub(crate) bytes: Vec<u8>,
    /// A hole in the sequence space ended the stream before the last captured byte.
    pub(crate) gap: bool,
    /// Captured bytes beyond the cap, or segments beyond [`MAX_SEGMENTS`], were left out.
    pub(crate) capped: bool,
    /// The start of the stream (the SYN) was not captured; it starts at the lowest sequence
    /// number seen.
    pub(crate) start_guessed: bool,
}

impl<'a> Flow<'a> {
    fn new(a: SocketAddr, b: SocketAddr, first_frame: usize) -> Self {
        Self {
            ends: [a, b],
            sides: [Direction::default(), Direction::default()],
            syn_from: None,
            syn: None,
            syn_ack_from: None,
            first_frame,
            timing: Timing::default(),
        }
    }

    /// The index of the client end, told by the handshake: the sender of the SYN, or the
    /// receiver of the SYN-ACK. `None` when neither was captured.
    pub(crate) fn client_by_handshake(&self) -> Option<usize> {
        self.syn_from.or(self.syn_ack_from.map(|server| 1 - server))
    }

    /// The reassembled stream sent by end `side` (0 or 1), up to `cap` bytes.
    pub(crate) fn stream(&self, side: usize, cap: usize) -> Stream {
        match self.sides.get(side) {
            Some(direction) => assemble(direction, cap),
            None => Stream::default(),
        }
    }
}

/// Offset of `seq` from `base` in the sequence space, in the window either side of it.
fn offset(seq: u32, base: u32) -> i64 {
    // Reinterpreting the wrapped difference as signed is the RFC 1982 serial-number comparison.
    i64::from(seq.wrapping_sub(base) as i32)
}

fn assemble(direction: &Direction<'_>, cap: usize) -> Stream {
    let mut stream = Stream {
        capped: direction.capped,
        ..Stream::default()
    };
    let Some(&(first_seq, _)) = direction.segments.first() else {
        return stream;
    };
    let base = match direction.isn {
        Some(isn) => isn.wrapping_add(1),
        None => {
            stream.start_guessed = true;
            let lowest = direction
                .segments
                .iter()
                .map(|&(seq, _)| offset(seq, first_seq))
                .min()
                .unwrap_or(0);
            first_seq.wrapping_add(lowest as u32)
        }
    };
    // Lay every segment into place in capture order, byte by byte, so that where copies
    // disagree the first one captured wins, whatever their order in sequence space.
    let placed: Vec<(usize, &[u8])> = direction
        .segments
        .iter()
        .filter_map(|&(seq, payload)| {
            let start = offset(seq, base);
            // Bytes before the start of the stream (a SYN retransmitted with data) are cut off.
            let skip = usize::try_from(start.min(0).unsigned_abs()).ok()?;
            let payload = payload.get(skip..)?;
            Some((usize::try_from(start.max(0)).ok()?, payload))
        })
        .collect();
    // The contiguous run from offset 0, found on the intervals first, so that a segment far
    // ahead in sequence space costs nothing: only bytes that will be kept are allocated.
    let mut intervals: Vec<(usize, usize)> = placed
        .iter()
        .map(|&(start, payload)| (start, start.saturating_add(payload.len())))
        .collect();
    intervals.sort_unstable();
    let mut covered = 0usize;
    let mut beyond = false;
    for &(start, end) in &intervals {
        if start > covered {
            beyond = true;
            break;
        }
        covered = covered.max(end);
    }
    if covered > cap {
        stream.capped = true;
    } else if beyond {
        stream.gap = true;
    }
    let len = covered.min(cap);
    let mut bytes = vec![0u8; len];
    let mut filled = vec![false; len];
    for (start, payload) in placed {
        let Some(dst) = bytes.get_mut(start..) else {
            continue;
        };
        let Some(done) = filled.get_mut(start..) else {
            continue;
        };
        for ((byte, is_filled), &src) in dst.iter_mut().zip(done.iter_mut()).zip(payload) {
            if !*is_filled {
                *byte = src;
                *is_filled = true;
            }
        }
    }
    stream.bytes = bytes;
    stream
}

/// Every TCP connection of a capture, in the order their first packet appeared.
#[derive(Debug, Default)]
pub(crate) struct Tracker<'a> {
    flows: Vec<Flow<'a>>,
    /// Current flow of each endpoint pair, keyed with the smaller endpoint first.
    by_pair: HashMap<(SocketAddr, SocketAddr), usize>,
    /// Connections beyond [`MAX_CONNECTIONS`] were ignored.
    pub(crate) capped: bool,
}

impl<'a> Tracker<'a> {
    /// Adds one TCP segment sent from `src` to `dst`, seen in frame `frame` (1-based); returns
    /// the index of its flow (`None`: past [`MAX_CONNECTIONS`]).
    pub(crate) fn add(
        &mut self,
        src: IpAddr,
        dst: IpAddr,
        segment: Segment<'a>,
        frame: usize,
    ) -> Option<usize> {
        let from = SocketAddr::new(src, segment.src_port);
        let to = SocketAddr::new(dst, segment.dst_port);
        let key = if from <= to { (from, to) } else { (to, from) };
        let opening = segment.is(SYN) && !segment.is(ACK);
        let index = match self.by_pair.get(&key) {
            Some(&index) if !(opening && self.reopens(index, &from, segment.seq)) => index,
            _ => {
                if self.flows.len() >= MAX_CONNECTIONS {
                    self.capped = true;
                    return None;
                }
                self.flows.push(Flow::new(from, to, frame));
                let index = self.flows.len() - 1;
                self.by_pair.insert(key, index);
                index
            }
        };
        let flow = self.flows.get_mut(index)?;
        let side = usize::from(flow.ends[0] != from);
        flow.timing.note(side, &segment);
        let direction = flow.sides.get_mut(side)?;
        let mut seq = segment.seq;
        if segment.is(SYN) {
            direction.isn = Some(segment.seq);
            // Data on a SYN (TCP Fast Open) starts one past the ISN.
            seq = seq.wrapping_add(1);
            if segment.is(ACK) {
                flow.syn_ack_from.get_or_insert(side);
            } else {
                flow.syn_from.get_or_insert(side);
            }
        }
        if segment.is(FIN) || segment.is(RST) {
            direction.closed = true;
        }
        if segment.payload.is_empty() {
            return Some(index);
        }
        if direction.segments.len() >= MAX_SEGMENTS {
            direction.capped = true;
            return Some(index);
        }
        direction.segments.push((seq, segment.payload));
        Some(index)
    }

    /// Keeps `packet` (from its IP header on) as the client's SYN of flow `index`, unless one
    /// was kept already.
    pub(crate) fn keep_syn(&mut self, index: usize, packet: &'a [u8]) {
        if let Some(flow) = self.flows.get_mut(index) {
            flow.syn.get_or_insert(packet);
        }
    }

    /// Whether a SYN from `from` with `isn` starts a new connection on the pair of `index`
    /// (port reuse after the old one closed) rather than retransmitting the old SYN.
    fn reopens(&self, index: usize, from: &SocketAddr, isn: u32) -> bool {
        let Some(flow) = self.flows.get(index) else {
            return true;
        };
        let side = usize::from(flow.ends[0] != *from);
        flow.sides.get(side).is_some_and(|direction| {
            direction.isn.is_some_and(|old| old != isn)
                || (direction.isn.is_none() && !direction.segments.is_empty())
                || direction.closed
        })
    }

    /// The connections, in order of their first packet.
    pub(crate) fn into_flows(self) -> Vec<Flow<'a>> {
        self.flows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const SERVER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    fn seg(seq: u32, flags: u8, payload: &[u8]) -> Segment<'_> {
        Segment {
            src_port: 50_000,
            dst_port: 443,
            seq,
            flags,
            payload,
            time_ns: None,
        }
    }

    #[test]
    fn parses_header_with_options() {
        let mut bytes = vec![0xc3, 0x50, 0x01, 0xbb, 0, 0, 0, 7, 0, 0, 0, 0, 0x60, SYN];
        bytes.extend_from_slice(&[0; 10]);
        bytes.extend_from_slice(b"hi");
        let s = Segment::parse(&bytes).expect("a header");
        assert_eq!(
            (s.src_port, s.dst_port, s.seq, s.payload),
            (50_000, 443, 7, &b"hi"[..])
        );
        bytes[12] = 0x40; // data offset 16: impossible
        assert!(Segment::parse(&bytes).is_none());
    }

    #[test]
    fn reorders_drops_retransmits_and_wraps() {
        let mut t = Tracker::default();
        let isn = u32::MAX - 2;
        t.add(CLIENT, SERVER, seg(isn, SYN, b""), 1);
        t.add(CLIENT, SERVER, seg(isn.wrapping_add(4), ACK, b"defg"), 2);
        t.add(CLIENT, SERVER, seg(isn.wrapping_add(1), ACK, b"abc"), 3);
        t.add(CLIENT, SERVER, seg(isn.wrapping_add(1), ACK, b"abcXYZ"), 4);
        t.add(CLIENT, SERVER, seg(isn.wrapping_add(8), ACK, b"h"), 5);
        let flows = t.into_flows();
        assert_eq!(flows.len(), 1);
        let flow = flows.first().expect("one flow");
        assert_eq!(flow.client_by_handshake(), Some(0));
        let stream = flow.stream(0, 1024);
        assert_eq!(stream.bytes, b"abcdefgh");
        assert!(!stream.gap && !stream.capped && !stream.start_guessed);
        let capped = flow.stream(0, 5);
        assert_eq!(capped.bytes, b"abcde");
        assert!(capped.capped);
    }

    #[test]
    fn a_hole_ends_the_stream() {
        let mut t = Tracker::default();
        t.add(CLIENT, SERVER, seg(100, ACK, b"later"), 1);
        t.add(CLIENT, SERVER, seg(90, ACK, b"first"), 2);
        let flows = t.into_flows();
        let stream = flows.first().expect("one flow").stream(0, 1024);
        assert_eq!(stream.bytes, b"first");
        assert!(stream.gap && stream.start_guessed);
    }

    #[test]
    fn a_segment_far_ahead_is_a_gap_not_an_allocation() {
        let mut t = Tracker::default();
        t.add(CLIENT, SERVER, seg(1, SYN, b""), 1);
        t.add(CLIENT, SERVER, seg(2, ACK, b"head"), 2);
        t.add(CLIENT, SERVER, seg(2 + (1 << 30), ACK, b"far"), 3);
        let flows = t.into_flows();
        let stream = flows.first().expect("one flow").stream(0, usize::MAX);
        assert_eq!(stream.bytes, b"head");
        assert_eq!(
            stream.bytes.capacity(),
            4,
            "only the kept bytes were allocated"
        );
        assert!(stream.gap && !stream.capped);
    }

    #[test]
    fn a_new_syn_after_close_opens_a_new_flow() {
        let mut t = Tracker::default();
        t.add(CLIENT, SERVER, seg(1, SYN, b""), 1);
        t.add(CLIENT, SERVER, seg(1, SYN, b""), 2); // retransmitted SYN
        t.add(CLIENT, SERVER, seg(2, FIN | ACK, b"x"), 3);
        t.add(CLIENT, SERVER, seg(5000, SYN, b""), 4);
        let flows = t.into_flows();
        assert_eq!(flows.len(), 2);
        assert_eq!(flows.get(1).map(|f| f.first_frame), Some(4));
    }
}
