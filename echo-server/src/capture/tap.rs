//! The tap on the decrypted client stream: copies the first client bytes into a shared buffer,
//! up to the byte cap, then stops copying; and notes the time of the last activity either way,
//! for the idle timeout.
//!
//! The tap also lets the connection peek at the first bytes before choosing the HTTP/1 or HTTP/2
//! server ([`Tap::peek`]): peeked bytes are captured once and then served again to hyper, so
//! hyper reads the stream unchanged.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// What the tap kept of one connection's decrypted client bytes.
#[derive(Debug)]
pub struct TapBuffer {
    bytes: Mutex<Vec<u8>>,
    cap: usize,
    /// Set once more bytes arrived than the cap let the tap keep.
    truncated: AtomicBool,
    start: Instant,
    /// Milliseconds after `start` of the last read or write.
    last_activity_ms: AtomicU64,
}

impl TapBuffer {
    /// An empty buffer keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self {
            bytes: Mutex::new(Vec::new()),
            cap,
            truncated: AtomicBool::new(false),
            start: Instant::now(),
            last_activity_ms: AtomicU64::new(0),
        }
    }

    /// A copy of the bytes kept so far.
    pub fn snapshot(&self) -> Bytes {
        let bytes = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        Bytes::copy_from_slice(&bytes)
    }

    /// Runs `read` on the bytes kept so far, without copying them (the tap waits meanwhile).
    pub fn with_bytes<T>(&self, read: impl FnOnce(&[u8]) -> T) -> T {
        let bytes = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        read(&bytes)
    }

    /// Bytes kept so far.
    pub fn len(&self) -> usize {
        self.bytes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether the client sent more than the cap (the snapshot is then a prefix).
    pub fn truncated(&self) -> bool {
        self.truncated.load(Ordering::Relaxed)
    }

    /// Time since the last byte was read or written.
    pub fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_activity_ms.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }

    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_activity_ms.store(now, Ordering::Relaxed);
    }

    fn keep(&self, data: &[u8]) {
        if data.is_empty() || self.truncated.load(Ordering::Relaxed) {
            return;
        }
        let mut bytes = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        let room = self.cap.saturating_sub(bytes.len());
        let (kept, rest) = data.split_at(data.len().min(room));
        bytes.extend_from_slice(kept);
        if !rest.is_empty() {
            self.truncated.store(true, Ordering::Relaxed);
        }
    }
}

/// A stream wrapper that copies what the client sends into a [`TapBuffer`].
#[derive(Debug)]
pub struct Tap<S> {
    inner: S,
    buffer: std::sync::Arc<TapBuffer>,
    /// Peeked bytes not yet handed to the reader (already in the buffer).
    peeked: Bytes,
}

impl<S> Tap<S> {
    /// Wraps `inner`, copying into `buffer`.
    pub fn new(inner: S, buffer: std::sync::Arc<TapBuffer>) -> Self {
        Self {
            inner,
            buffer,
            peeked: Bytes::new(),
        }
    }
}

impl<S: AsyncRead + Unpin> Tap<S> {
    /// Reads until `decided` returns `Some` for the bytes read so far (or the peer stops
    /// sending), and returns its answer (`None` on EOF before a decision). Later reads see the
    /// peeked bytes first.
    ///
    /// # Errors
    /// Socket or TLS errors while reading.
    pub async fn peek<T>(&mut self, decided: impl Fn(&[u8]) -> Option<T>) -> io::Result<Option<T>> {
        let mut seen = Vec::new();
        let mut chunk = [0_u8; 512];
        loop {
            if let Some(answer) = decided(&seen) {
                self.peeked = Bytes::from(seen);
                return Ok(Some(answer));
            }
            let read = self.inner.read(&mut chunk).await?;
            let Some(data) = chunk.get(..read) else {
                return Err(io::Error::other("read past the buffer"));
            };
            if data.is_empty() {
                self.peeked = Bytes::from(seen);
                return Ok(None);
            }
            self.buffer.touch();
            self.buffer.keep(data);
            seen.extend_from_slice(data);
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tap<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.peeked.is_empty() {
            let len = this.peeked.len().min(out.remaining());
            out.put_slice(&this.peeked.split_to(len));
            return Poll::Ready(Ok(()));
        }
        let before = out.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(cx, out);
        if let Poll::Ready(Ok(())) = result {
            if let Some(new) = out.filled().get(before..) {
                if !new.is_empty() {
                    this.buffer.touch();
                    this.buffer.keep(new);
                }
            }
        }
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tap<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = result {
            if written > 0 {
                this.buffer.touch();
            }
        }
        result
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn keeps_the_first_bytes_up_to_the_cap_and_peeks_without_loss() {
        let buffer = Arc::new(TapBuffer::new(8));
        let mut tap = Tap::new(&b"PRI * HTTP/2.0 and more"[..], Arc::clone(&buffer));
        let first = tap
            .peek(|seen| (seen.len() >= 3).then(|| seen.starts_with(b"PRI")))
            .await
            .expect("peek");
        assert_eq!(first, Some(true));
        let mut all = String::new();
        tap.read_to_string(&mut all).await.expect("read");
        assert_eq!(all, "PRI * HTTP/2.0 and more");
        assert_eq!(&buffer.snapshot()[..], b"PRI * HT");
        assert!(buffer.truncated());
    }

    #[tokio::test]
    async fn peek_reports_eof_before_a_decision() {
        let buffer = Arc::new(TapBuffer::new(64));
        let mut tap = Tap::new(&b"PR"[..], Arc::clone(&buffer));
        let answer = tap
            .peek(|seen| (seen.len() >= 24).then_some(()))
            .await
            .expect("peek");
        assert_eq!(answer, None);
        assert_eq!(&buffer.snapshot()[..], b"PR");
    }
}
