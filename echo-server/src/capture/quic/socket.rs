//! The UDP socket quinn reads from, wrapped so the capture sees each client datagram that may
//! carry an Initial before quinn does (docs/quic.md, "The UDP listener", step 1).
//!
//! The copy goes into a bounded channel with `try_send`: a full channel drops the copy and
//! counts it, it never makes quinn wait.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::metrics::Metrics;

/// One client datagram copied for the capture.
#[derive(Debug)]
pub(crate) struct Datagram {
    /// Who sent it.
    pub(crate) from: SocketAddr,
    /// Its bytes.
    pub(crate) bytes: Vec<u8>,
    /// When it was read.
    pub(crate) at: Instant,
}

/// A datagram opening with a long header (RFC 9000 section 17.2): the only kind that can carry
/// an Initial. Short ones are copied too, so malformed Initials are counted by kind; short-header
/// datagrams go to quinn alone.
fn candidate(datagram: &[u8]) -> bool {
    datagram.first().is_some_and(|b| b & 0xc0 == 0xc0)
}

/// quinn's socket with the tee.
pub(crate) struct TapSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    copies: mpsc::Sender<Datagram>,
    metrics: Arc<Metrics>,
}

impl fmt::Debug for TapSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TapSocket").finish_non_exhaustive()
    }
}

impl TapSocket {
    pub(crate) fn new(
        inner: Arc<dyn AsyncUdpSocket>,
        copies: mpsc::Sender<Datagram>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            inner,
            copies,
            metrics,
        }
    }

    fn copy(&self, from: SocketAddr, datagram: &[u8]) {
        self.metrics.quic("datagrams");
        if !candidate(datagram) {
            return;
        }
        let copy = Datagram {
            from,
            bytes: datagram.to_vec(),
            at: Instant::now(),
        };
        if self.copies.try_send(copy).is_err() {
            self.metrics.quic("tap_drops");
        }
    }
}

impl AsyncUdpSocket for TapSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Arc::clone(&self.inner).create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let polled = self.inner.poll_recv(cx, bufs, meta);
        if let Poll::Ready(Ok(count)) = &polled {
            for (buf, meta) in bufs.iter().zip(meta.iter()).take(*count) {
                let received = buf.get(..meta.len).unwrap_or_default();
                // With GRO one buffer holds several datagrams, `stride` bytes apart
                // (quinn-rs/quinn#1847); the last may be shorter.
                for datagram in received.chunks(meta.stride.max(1)) {
                    self.copy(meta.addr, datagram);
                }
            }
        }
        polled
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}
