//! Helpers shared by the fuzz targets: an in-memory proxy connection and a one-shot poll.
//!
//! The dialers' proxy handshakes (`CONNECT`, SOCKS5) are async functions over a byte stream.
//! [`ScriptedStream`] plays the proxy's side from the fuzz input (every read is ready at once,
//! every write is accepted), so one poll of the handshake future with a no-op waker runs it to
//! completion without a runtime. [`poll_ready`] returns `None` if it did not: with a stream
//! that is always ready, that would be a hang, which the targets treat as a bug.

use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The proxy's side of a connection, scripted: reads return the fuzz bytes (at most
/// `chunk` bytes per read, to exercise short reads), then end of stream; writes are recorded.
#[derive(Debug)]
pub struct ScriptedStream {
    reply: Vec<u8>,
    at: usize,
    chunk: usize,
    /// Everything the client wrote.
    pub written: Vec<u8>,
}

impl ScriptedStream {
    /// A stream whose peer sends `reply`, `chunk` bytes (at least 1) per read at most.
    pub fn new(reply: &[u8], chunk: usize) -> Self {
        Self {
            reply: reply.to_vec(),
            at: 0,
            chunk: chunk.max(1),
            written: Vec::new(),
        }
    }

    /// The reply bytes the client has not read.
    pub fn unread(&self) -> &[u8] {
        self.reply.get(self.at..).unwrap_or_default()
    }
}

impl AsyncRead for ScriptedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let rest = this.reply.get(this.at..).unwrap_or_default();
        let n = rest.len().min(buf.remaining()).min(this.chunk);
        buf.put_slice(&rest[..n]);
        this.at += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for ScriptedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.written.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Polls `future` once with a no-op waker: `Some(output)` if it completed.
pub fn poll_ready<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(out) => Some(out),
        Poll::Pending => None,
    }
}
