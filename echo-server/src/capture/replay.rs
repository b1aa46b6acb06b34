//! A stream that hands back bytes already read before reading on: the raw ClientHello records
//! read off the socket go to rustls this way ([`super::hello`]), and the decrypted bytes the
//! connection peeked at to choose its HTTP server go to hyper ([`super::tap`]), so each reader
//! sees its stream unchanged.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A stream that yields `prefix` first, then reads from the inner stream; writes go straight
/// through.
#[derive(Debug)]
pub struct Replay<S> {
    prefix: Bytes,
    inner: S,
}

impl<S> Replay<S> {
    /// Wraps `inner`, replaying `prefix` before its bytes.
    pub fn new(prefix: Bytes, inner: S) -> Self {
        Self { prefix, inner }
    }

    /// The stream read after the bytes to replay.
    pub fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Whether the next read is served from the bytes to replay.
    pub fn replaying(&self) -> bool {
        !self.prefix.is_empty()
    }

    /// Replays `bytes` (read through this stream, none left to replay) before what follows.
    pub fn replay(&mut self, bytes: Bytes) {
        debug_assert!(
            self.prefix.is_empty(),
            "bytes to replay are replayed in order"
        );
        self.prefix = bytes;
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replay<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.prefix.is_empty() {
            return Pin::new(&mut this.inner).poll_read(cx, out);
        }
        let len = this.prefix.len().min(out.remaining());
        out.put_slice(&this.prefix.split_to(len));
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replay<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt as _;

    use super::*;

    #[tokio::test]
    async fn replay_yields_prefix_then_inner_and_replays_again_in_order() {
        let mut replay = Replay::new(Bytes::from_static(b"abc"), &b"defgh"[..]);
        let mut first = [0_u8; 5];
        replay.read_exact(&mut first).await.expect("read");
        assert_eq!(&first, b"abcde");
        assert!(!replay.replaying());
        replay.replay(Bytes::from_static(b"XY"));
        assert!(replay.replaying());
        let mut out = String::new();
        replay.read_to_string(&mut out).await.expect("read");
        assert_eq!(out, "XYfgh");
    }
}
