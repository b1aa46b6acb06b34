//! HTTP/2 PINGs the echo sends on its own, between hyper and the tapped stream, to time the
//! client's stack through every proxy on the way: RFC 9113 section 6.7 obliges a receiver to
//! answer a PING with an ACK carrying the same 8 bytes, "with higher priority than any other
//! frame".
//!
//! The first PING goes right after the server's SETTINGS (the connection's first frame,
//! RFC 9113 section 3.4), the next ones each as soon as the one before is answered, up to
//! [`QUICK_PINGS`] (the smallest of a few samples outlasts a busy moment of either side's
//! scheduler); after them, one at most every [`PING_SPACING`] while the server writes, up to
//! [`MAX_PINGS`]. One is in flight at a time. A PING is slipped in between two of hyper's
//! frames, never inside one. The client's ACKs of our PINGs are taken out of the stream before
//! hyper reads it (hyper sent them not, and would log each); everything else passes unchanged.
//! The tap below keeps the client's bytes as sent, ACKs included. After the last PING is
//! answered, both directions pass untouched.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::round_trip::{RoundTripCell, QUICK_PINGS};

/// PINGs sent per connection, at most.
pub(crate) const MAX_PINGS: u8 = 5;
/// Time between two PINGs, at least.
pub(crate) const PING_SPACING: Duration = Duration::from_secs(2);

/// The client connection preface (RFC 9113 section 3.4), which precedes its frames.
const PREFACE_LEN: usize = 24;
/// A frame header: length (24 bits), type, flags, stream id (RFC 9113 section 4.1).
const HEADER_LEN: usize = 9;
/// The PING frame type and its ACK flag (RFC 9113 section 6.7).
const PING: u8 = 0x6;
const ACK: u8 = 0x1;
/// Our PINGs' payloads start with these bytes; the last two count them.
const PAYLOAD_TAG: [u8; 6] = *b"exvrtt";

/// Where a direction of the stream is in its frames.
#[derive(Debug, Clone, Copy)]
enum Cursor {
    /// Bytes of the client preface still to pass.
    Preface(usize),
    /// A frame header, `have` bytes of it so far.
    Header {
        header: [u8; HEADER_LEN],
        have: usize,
    },
    /// Payload bytes of the current frame still to pass.
    Payload(usize),
    /// An 8-byte PING ACK payload, `have` bytes of it so far, held back until it is whole.
    Ack {
        header: [u8; HEADER_LEN],
        payload: [u8; 8],
        have: usize,
    },
}

impl Cursor {
    fn header() -> Self {
        Self::Header {
            header: [0; HEADER_LEN],
            have: 0,
        }
    }

    /// At a frame boundary (nothing of a frame begun).
    fn at_boundary(&self) -> bool {
        matches!(self, Self::Header { have: 0, .. })
    }
}

/// Length of the frame `header` describes.
fn payload_len(header: &[u8; HEADER_LEN]) -> usize {
    usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2])
}

/// Bytes of `data` up to and including the end of the frame under `cursor` (an outgoing
/// stream: no preface, no holding back); `None` when the frame does not end within `data`.
fn frame_end(cursor: Cursor, data: &[u8]) -> Option<usize> {
    match cursor {
        Cursor::Payload(left) => (left > 0 && left <= data.len()).then_some(left),
        Cursor::Header { mut header, have } => {
            let need = HEADER_LEN - have;
            let got = data.get(..need)?;
            header[have..].copy_from_slice(got);
            let end = need + payload_len(&header);
            (end <= data.len()).then_some(end)
        }
        Cursor::Preface(_) | Cursor::Ack { .. } => None,
    }
}

/// Moves an outgoing `cursor` over `data` (hyper's frames; nothing is taken out).
fn pass(mut cursor: Cursor, mut data: &[u8]) -> (Cursor, u64) {
    let mut frames = 0;
    while !data.is_empty() {
        cursor = match cursor {
            Cursor::Payload(left) => {
                let step = left.min(data.len());
                data = &data[step..];
                if left == step {
                    frames += 1;
                    Cursor::header()
                } else {
                    Cursor::Payload(left - step)
                }
            }
            Cursor::Header { mut header, have } => {
                let step = (HEADER_LEN - have).min(data.len());
                header[have..have + step].copy_from_slice(&data[..step]);
                data = &data[step..];
                if have + step < HEADER_LEN {
                    Cursor::Header {
                        header,
                        have: have + step,
                    }
                } else if payload_len(&header) == 0 {
                    frames += 1;
                    Cursor::header()
                } else {
                    Cursor::Payload(payload_len(&header))
                }
            }
            Cursor::Preface(_) | Cursor::Ack { .. } => Cursor::header(),
        };
    }
    (cursor, frames)
}

/// A PING in flight: its payload and when it went out.
#[derive(Debug)]
struct InFlight {
    payload: [u8; 8],
    sent: Instant,
}

/// The stream hyper serves HTTP/2 on, with the echo's PINGs in it.
#[derive(Debug)]
pub(crate) struct Pinger<S> {
    inner: S,
    cell: Arc<RoundTripCell>,
    /// Both directions pass untouched: the last PING was answered.
    done: bool,
    out: Cursor,
    /// Frames hyper wrote so far.
    frames_out: u64,
    /// A PING frame still to write, and how much of it is written.
    pending: Option<([u8; HEADER_LEN + 8], usize)>,
    sent: u8,
    last_sent: Option<Instant>,
    in_flight: Option<InFlight>,
    input: Cursor,
    /// Client bytes read and let through, not yet handed to hyper.
    carry: Vec<u8>,
    scratch: Vec<u8>,
}

impl<S> Pinger<S> {
    /// Wraps the decrypted stream of a connection that opened with the HTTP/2 preface.
    pub(crate) fn new(inner: S, cell: Arc<RoundTripCell>) -> Self {
        Self {
            inner,
            cell,
            done: false,
            out: Cursor::header(),
            frames_out: 0,
            pending: None,
            sent: 0,
            last_sent: None,
            in_flight: None,
            input: Cursor::Preface(PREFACE_LEN),
            carry: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Whether a PING should go at the next frame boundary.
    fn due(&self) -> bool {
        !self.done
            && self.pending.is_none()
            && self.in_flight.is_none()
            && self.frames_out > 0
            && self.sent < MAX_PINGS
            && (self.sent < QUICK_PINGS
                || self.last_sent.is_none_or(|at| at.elapsed() >= PING_SPACING))
    }

    /// Queues a PING frame (the caller is at a frame boundary).
    fn queue(&mut self) {
        let mut frame = [0_u8; HEADER_LEN + 8];
        frame[2] = 8;
        frame[3] = PING;
        frame[HEADER_LEN..HEADER_LEN + 6].copy_from_slice(&PAYLOAD_TAG);
        frame[HEADER_LEN + 7] = self.sent;
        self.pending = Some((frame, 0));
    }

    /// Takes the client's bytes in `data` through the input cursor: what hyper must see goes
    /// to `emit`, our PING ACKs are taken out and timed.
    fn filter(&mut self, mut data: &[u8], emit: &mut Vec<u8>) {
        while !data.is_empty() {
            self.input = match self.input {
                Cursor::Preface(left) | Cursor::Payload(left) => {
                    let step = left.min(data.len());
                    emit.extend_from_slice(&data[..step]);
                    data = &data[step..];
                    match (self.input, left - step) {
                        (Cursor::Preface(_), 0) | (Cursor::Payload(_), 0) => Cursor::header(),
                        (Cursor::Preface(_), rest) => Cursor::Preface(rest),
                        (_, rest) => Cursor::Payload(rest),
                    }
                }
                Cursor::Header { mut header, have } => {
                    let step = (HEADER_LEN - have).min(data.len());
                    header[have..have + step].copy_from_slice(&data[..step]);
                    data = &data[step..];
                    if have + step < HEADER_LEN {
                        Cursor::Header {
                            header,
                            have: have + step,
                        }
                    } else if header[3] == PING && header[4] & ACK != 0 && payload_len(&header) == 8
                    {
                        Cursor::Ack {
                            header,
                            payload: [0; 8],
                            have: 0,
                        }
                    } else {
                        emit.extend_from_slice(&header);
                        match payload_len(&header) {
                            0 => Cursor::header(),
                            len => Cursor::Payload(len),
                        }
                    }
                }
                Cursor::Ack {
                    header,
                    mut payload,
                    have,
                } => {
                    let step = (8 - have).min(data.len());
                    payload[have..have + step].copy_from_slice(&data[..step]);
                    data = &data[step..];
                    if have + step < 8 {
                        Cursor::Ack {
                            header,
                            payload,
                            have: have + step,
                        }
                    } else {
                        self.acked(&header, &payload, emit);
                        Cursor::header()
                    }
                }
            };
        }
    }

    /// A whole PING ACK: ours is timed and taken out, any other goes on to hyper.
    fn acked(&mut self, header: &[u8; HEADER_LEN], payload: &[u8; 8], emit: &mut Vec<u8>) {
        match self.in_flight.take() {
            Some(ping) if ping.payload == *payload => {
                self.cell.ping_answered(ping.sent.elapsed());
                // No PING left to send: nothing more to take out, whatever follows.
                self.done = self.sent >= MAX_PINGS;
            }
            other => {
                self.in_flight = other;
                emit.extend_from_slice(header);
                emit.extend_from_slice(payload);
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> Pinger<S> {
    /// Writes what is left of a queued PING, then a new one if one is due and hyper is between
    /// two frames; `Ready(Ok)` once nothing is left to write.
    fn poll_ping(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        if self.due() && self.out.at_boundary() {
            self.queue();
            ready!(self.poll_pending(cx))?;
        }
        Poll::Ready(Ok(()))
    }

    /// Writes what is left of a queued PING; `Ready(Ok)` once none is left.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((frame, at)) = self.pending.as_mut() {
            // Timed from before the write: a pause of this thread between the write and the
            // clock would make the round trip look shorter than it is, never longer.
            let now = Instant::now();
            let written = ready!(Pin::new(&mut self.inner).poll_write(cx, &frame[*at..]))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *at += written;
            if *at == frame.len() {
                let mut payload = [0; 8];
                payload.copy_from_slice(&frame[HEADER_LEN..]);
                self.pending = None;
                self.sent += 1;
                self.last_sent = Some(now);
                self.in_flight = Some(InFlight { payload, sent: now });
                self.cell.ping_sent();
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Pinger<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.carry.is_empty() {
                let len = this.carry.len().min(out.remaining());
                out.put_slice(&this.carry[..len]);
                this.carry.drain(..len);
                return Poll::Ready(Ok(()));
            }
            if this.done {
                return Pin::new(&mut this.inner).poll_read(cx, out);
            }
            let before = out.filled().len();
            ready!(Pin::new(&mut this.inner).poll_read(cx, out))?;
            let read = out.filled().len() - before;
            if read == 0 {
                return Poll::Ready(Ok(()));
            }
            // The common case: the bytes lie inside a frame's payload and pass as they are.
            if let Cursor::Payload(left) = this.input {
                if read < left {
                    this.input = Cursor::Payload(left - read);
                    return Poll::Ready(Ok(()));
                }
            }
            let mut scratch = std::mem::take(&mut this.scratch);
            scratch.clear();
            scratch.extend_from_slice(&out.filled()[before..]);
            out.set_filled(before);
            let mut emit = std::mem::take(&mut this.carry);
            this.filter(&scratch, &mut emit);
            this.scratch = scratch;
            this.carry = emit;
            // The next quick PING goes as its predecessor's answer arrives, whether or not
            // hyper writes meanwhile; a write that cannot go now goes with hyper's next one.
            let _ = this.poll_ping(cx);
            // Only our ACK (or part of a header) arrived: read on rather than report an end.
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Pinger<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.done {
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        }
        ready!(this.poll_ping(cx))?;
        // With a PING due, hyper's bytes go only up to the end of the frame they are in.
        let take = if this.due() {
            frame_end(this.out, buf).unwrap_or(buf.len())
        } else {
            buf.len()
        };
        let written = ready!(Pin::new(&mut this.inner).poll_write(cx, &buf[..take]))?;
        let (cursor, frames) = pass(this.out, &buf[..written]);
        this.out = cursor;
        this.frames_out += frames;
        Poll::Ready(Ok(written))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.done {
            ready!(this.poll_ping(cx))?;
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = u32::try_from(payload.len()).expect("small").to_be_bytes();
        let mut out = vec![len[1], len[2], len[3], kind, flags, 0, 0, 0, 0];
        out.extend_from_slice(payload);
        out
    }

    /// hyper's SETTINGS written in two parts, the client's answers in awkward pieces: the PING
    /// goes after the whole frame, our ACKs never reach hyper, a foreign one does, and each
    /// answered PING is timed and followed by the next.
    #[tokio::test]
    async fn pings_go_between_frames_and_only_our_acks_are_taken_out() {
        let (server, mut client) = tokio::io::duplex(1 << 16);
        let cell = Arc::new(RoundTripCell::default());
        let mut pinger = Pinger::new(server, Arc::clone(&cell));
        let settings = frame(0x4, 0, &[0, 3, 0, 0, 0, 100]);
        pinger.write_all(&settings[..12]).await.expect("write");
        pinger.flush().await.expect("flush");
        pinger.write_all(&settings[12..]).await.expect("write");
        pinger.flush().await.expect("flush");

        let mut seen = vec![0; settings.len() + HEADER_LEN + 8];
        client.read_exact(&mut seen).await.expect("read");
        assert_eq!(
            &seen[..settings.len()],
            &settings[..],
            "hyper's frame whole first"
        );
        let ping = &seen[settings.len()..];
        assert_eq!(&ping[..HEADER_LEN], &[0, 0, 8, PING, 0, 0, 0, 0, 0]);
        assert_eq!(&ping[HEADER_LEN..HEADER_LEN + 6], &PAYLOAD_TAG);
        assert_eq!(ping[HEADER_LEN + 7], 0);
        assert!(cell.awaits_first_ping());

        let ours = frame(PING, ACK, &ping[HEADER_LEN..]);
        let foreign = frame(PING, ACK, &[9; 8]);
        let data = frame(0x0, 0x1, b"body");
        let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        let mut wire = preface.to_vec();
        wire.extend(frame(0x4, ACK, &[]));
        wire.extend(&ours);
        wire.extend(&foreign);
        wire.extend(&data);
        // The ACK's header split across two reads.
        let split = preface.len() + HEADER_LEN + 4;
        client.write_all(&wire[..split]).await.expect("write");
        let mut got = vec![0; preface.len() + HEADER_LEN];
        pinger.read_exact(&mut got).await.expect("read");
        client.write_all(&wire[split..]).await.expect("write");
        let mut rest = vec![0; foreign.len() + data.len()];
        pinger.read_exact(&mut rest).await.expect("read");
        got.extend(rest);
        let mut expected = preface.to_vec();
        expected.extend(frame(0x4, ACK, &[]));
        expected.extend(&foreign);
        expected.extend(&data);
        assert_eq!(got, expected, "everything but our ACK, unchanged");

        let judged = cell.judged();
        assert_eq!(judged.h2_ping_samples_us.len(), 1, "{judged:?}");
        // The answer sent the next PING at once, from the read side.
        let mut next = [0; HEADER_LEN + 8];
        client.read_exact(&mut next).await.expect("read");
        assert_eq!(next[3], PING);
        assert_eq!(next[HEADER_LEN + 7], 1, "the second PING");
    }

    #[test]
    fn a_frame_ends_where_its_header_says() {
        let settings = frame(0x4, 0, &[0, 3, 0, 0, 0, 100]);
        let mut two = settings.clone();
        two.extend(frame(0x8, 0, &[0, 0, 1, 0]));
        assert_eq!(frame_end(Cursor::header(), &two), Some(settings.len()));
        assert_eq!(frame_end(Cursor::header(), &settings[..5]), None);
        let cut = settings.len() + 2;
        let (cursor, frames) = pass(Cursor::header(), &two[..cut]);
        assert_eq!(frames, 1);
        assert!(!cursor.at_boundary(), "inside the second frame's header");
        let (cursor, frames) = pass(cursor, &two[cut..]);
        assert_eq!(frames, 1);
        assert!(cursor.at_boundary());
    }
}
