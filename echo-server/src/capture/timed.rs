//! The accepted TCP stream, timed: from the server's last handshake flight written to the
//! client's answer read (the TLS flight's round trip, through every proxy between), and the
//! kernel's round-trip estimates (`tcp_info.rs`) when the handshake is done and when the
//! connection ends (on drop, while the socket is still open).
//!
//! A flight is timed from the last write before a read to the first read after it: in TLS 1.3
//! the server's ServerHello…Finished against the client's Finished (RFC 8446 section 2); in
//! TLS 1.2 the server's ServerHelloDone flight against the client's key exchange and Finished
//! (RFC 5246 section 7.3), the server's own Finished coming after. The ClientHello is read
//! before this stream sees a byte (`hello.rs`), so it never counts. A write is timed from before
//! the call, a read from after it: a pause of the server's thread can only lengthen a flight.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::round_trip::{micros, RoundTripCell};
use super::tcp_info;

/// The flight clock while the handshake runs.
#[derive(Debug, Default)]
struct Clock {
    /// When the server last wrote, while no read followed yet.
    awaiting_since: Option<Instant>,
    /// The last flight timed: from a write to the first read after it.
    flight: Option<std::time::Duration>,
}

/// A TCP stream that times the handshake's flights and reads the kernel's round trip.
#[derive(Debug)]
pub(crate) struct TimedTcp {
    inner: TcpStream,
    /// `None` once the handshake is done: later reads and writes are not timed.
    clock: Option<Clock>,
    cell: Arc<RoundTripCell>,
    /// Whether the kernel's estimate is the client's (not a load balancer's).
    read_tcp: bool,
}

impl TimedTcp {
    /// Times `inner` into `cell`; `read_tcp` false when the TCP peer is not the client.
    pub(crate) fn new(inner: TcpStream, cell: Arc<RoundTripCell>, read_tcp: bool) -> Self {
        Self {
            inner,
            clock: Some(Clock::default()),
            cell,
            read_tcp,
        }
    }

    /// The handshake is done: records its flight and the kernel's estimate, stops timing.
    pub(crate) fn handshake_done(&mut self) {
        let flight = self.clock.take().and_then(|clock| clock.flight);
        let tcp = self.read_tcp.then(|| tcp_info::read(&self.inner)).flatten();
        self.cell.handshake(tcp, flight.map(micros));
    }
}

impl Drop for TimedTcp {
    fn drop(&mut self) {
        if self.read_tcp {
            self.cell.closed(tcp_info::read(&self.inner));
        }
    }
}

impl AsyncRead for TimedTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = out.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(cx, out);
        if let (Some(clock), Poll::Ready(Ok(()))) = (this.clock.as_mut(), &result) {
            if out.filled().len() > before {
                if let Some(since) = clock.awaiting_since.take() {
                    clock.flight = Some(since.elapsed());
                }
            }
        }
        result
    }
}

impl AsyncWrite for TimedTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let now = this.clock.is_some().then(Instant::now);
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let (Some(clock), Poll::Ready(Ok(written))) = (this.clock.as_mut(), &result) {
            if *written > 0 {
                clock.awaiting_since = now;
            }
        }
        result
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let now = this.clock.is_some().then(Instant::now);
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let (Some(clock), Poll::Ready(Ok(written))) = (this.clock.as_mut(), &result) {
            if *written > 0 {
                clock.awaiting_since = now;
            }
        }
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
