//! The tap on the decrypted client stream: copies the first client bytes into a shared buffer,
//! up to the byte cap (stored with the connection); past the cap, it keeps only the bytes the
//! request-head follower has not read yet, in a bounded window, so the heads of a long
//! connection's later requests are still read. It also notes the time of the last activity, for
//! the idle timeout, and since when bytes read have waited for the server, for the request
//! deadline.
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

use super::replay::Replay;

/// Bytes past the cap that the follower has not read yet, at most: two maximum-size HTTP/2
/// frames (RFC 9113 section 4.2, 16,384 bytes by default) and their headers. A connection that
/// sends more between two echoed requests (a large body, many requests to routes that echo
/// nothing) loses the heads after it ([`TapBuffer::follow_lost`]).
pub const FOLLOW_WINDOW: usize = 2 * (16_384 + 9);

/// `pending_since_ms` when no byte read waits for the server.
const NONE_PENDING: u64 = u64::MAX;

/// What the tap kept of one connection's decrypted client bytes.
#[derive(Debug)]
pub struct TapBuffer {
    kept: Mutex<Kept>,
    cap: usize,
    /// Set once more bytes arrived than the cap let the tap keep.
    truncated: AtomicBool,
    start: Instant,
    /// Milliseconds after `start` of the last read or write.
    last_activity_ms: AtomicU64,
    /// Milliseconds after `start` of the first byte read since the server last took a request
    /// head or wrote ([`NONE_PENDING`] when nothing was read since).
    pending_since_ms: AtomicU64,
}

#[derive(Debug, Default)]
struct Kept {
    /// The first `cap` bytes of the stream.
    prefix: Vec<u8>,
    /// Bytes past the cap the follower has not read yet, from stream offset `beyond_at` on.
    beyond: Vec<u8>,
    beyond_at: usize,
    /// The window overflowed: bytes were dropped, nothing past the cap can be followed.
    beyond_lost: bool,
}

impl TapBuffer {
    /// An empty buffer keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self {
            kept: Mutex::new(Kept {
                beyond_at: cap,
                ..Kept::default()
            }),
            cap,
            truncated: AtomicBool::new(false),
            start: Instant::now(),
            last_activity_ms: AtomicU64::new(0),
            pending_since_ms: AtomicU64::new(NONE_PENDING),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A copy of the bytes kept so far (at most the cap).
    pub fn snapshot(&self) -> Bytes {
        Bytes::copy_from_slice(&self.lock().prefix)
    }

    /// Runs `read` on the bytes kept so far (at most the cap), without copying them (the tap
    /// waits meanwhile).
    pub fn with_bytes<T>(&self, read: impl FnOnce(&[u8]) -> T) -> T {
        read(&self.lock().prefix)
    }

    /// Runs `read` on the stream's bytes from offset `from` to the last one that arrived;
    /// `None` when they are no longer kept (past the cap, after the window overflowed or was
    /// released past `from`). Copies only once per connection, when `from` is below the cap and
    /// bytes past it arrived.
    pub fn follow<T>(&self, from: usize, read: impl FnOnce(&[u8]) -> T) -> Option<T> {
        let kept = self.lock();
        if let Some(below) = kept.prefix.get(from..).filter(|_| from < self.cap) {
            if kept.beyond.is_empty() || kept.beyond_at != self.cap {
                return Some(read(below));
            }
            return Some(read(&[below, &kept.beyond].concat()));
        }
        if kept.beyond_lost {
            return None;
        }
        let at = from.checked_sub(kept.beyond_at)?;
        kept.beyond.get(at..).map(read)
    }

    /// The follower has read the stream up to offset `upto`: the window drops what lies before.
    pub fn release(&self, upto: usize) {
        let mut kept = self.lock();
        let done = upto.saturating_sub(kept.beyond_at).min(kept.beyond.len());
        if done > 0 {
            kept.beyond.drain(..done);
            kept.beyond_at += done;
        }
    }

    /// Bytes kept so far (at most the cap).
    pub fn len(&self) -> usize {
        self.lock().prefix.len()
    }

    /// Whether the client sent more than the cap (the snapshot is then a prefix).
    pub fn truncated(&self) -> bool {
        self.truncated.load(Ordering::Relaxed)
    }

    /// Whether bytes past the cap overflowed the follower's window ([`FOLLOW_WINDOW`]).
    pub fn follow_lost(&self) -> bool {
        self.lock().beyond_lost
    }

    /// Time since the last byte was read or written.
    pub fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_activity_ms.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }

    /// How long bytes read have waited for the server: since the first byte read after it last
    /// took a request head or wrote (`None` when it has done either since the last read). On
    /// HTTP/1 that is how long the request head now arriving, or the body after a head, has
    /// taken so far; the server's own time on a request does not count.
    pub fn pending_for(&self) -> Option<Duration> {
        let since = self.pending_since_ms.load(Ordering::Relaxed);
        (since != NONE_PENDING).then(|| {
            self.start
                .elapsed()
                .saturating_sub(Duration::from_millis(since))
        })
    }

    /// The server took a request head: the bytes read so far no longer wait for it.
    pub fn took_request(&self) {
        self.pending_since_ms.store(NONE_PENDING, Ordering::Relaxed);
    }

    /// Notes activity now; the time noted.
    fn touch(&self) -> u64 {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(NONE_PENDING - 1);
        self.last_activity_ms.store(now, Ordering::Relaxed);
        now
    }

    fn read_some(&self) {
        let now = self.touch();
        if self.pending_since_ms.load(Ordering::Relaxed) == NONE_PENDING {
            self.pending_since_ms.store(now, Ordering::Relaxed);
        }
    }

    fn wrote_some(&self) {
        self.touch();
        self.pending_since_ms.store(NONE_PENDING, Ordering::Relaxed);
    }

    fn keep(&self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let mut kept = self.lock();
        let room = self.cap.saturating_sub(kept.prefix.len());
        let (below, rest) = data.split_at(data.len().min(room));
        kept.prefix.extend_from_slice(below);
        if rest.is_empty() {
            return;
        }
        self.truncated.store(true, Ordering::Relaxed);
        if kept.beyond_lost {
            return;
        }
        if kept.beyond.len() + rest.len() > FOLLOW_WINDOW {
            kept.beyond_lost = true;
            kept.beyond = Vec::new();
        } else {
            kept.beyond.extend_from_slice(rest);
        }
    }
}

/// A stream wrapper that copies what the client sends into a [`TapBuffer`].
#[derive(Debug)]
pub struct Tap<S> {
    /// Replays the peeked bytes (already in the buffer) before the stream's next ones.
    inner: Replay<S>,
    buffer: std::sync::Arc<TapBuffer>,
}

impl<S> Tap<S> {
    /// Wraps `inner`, copying into `buffer`.
    pub fn new(inner: S, buffer: std::sync::Arc<TapBuffer>) -> Self {
        Self {
            inner: Replay::new(Bytes::new(), inner),
            buffer,
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
                self.inner.replay(Bytes::from(seen));
                return Ok(Some(answer));
            }
            // Nothing is replayed while peeking: this reads the stream.
            let read = self.inner.read(&mut chunk).await?;
            let Some(data) = chunk.get(..read) else {
                return Err(io::Error::other("read past the buffer"));
            };
            if data.is_empty() {
                self.inner.replay(Bytes::from(seen));
                return Ok(None);
            }
            self.buffer.read_some();
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
        if this.inner.replaying() {
            return Pin::new(&mut this.inner).poll_read(cx, out);
        }
        let before = out.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(cx, out);
        if let Poll::Ready(Ok(())) = result {
            if let Some(new) = out.filled().get(before..) {
                if !new.is_empty() {
                    this.buffer.read_some();
                    this.buffer.keep(new);
                }
            }
        }
        result
    }
}

// Vectored writes are left to the default (not vectored) on purpose: h2 then copies a DATA
// payload under 1 KiB into its frame buffer, so the answers of several streams leave in one
// write and one TLS record. Forwarded to the TLS stream, each `/api/clean` answer (~450 bytes)
// was its own record: 3,050 seals for 3,000 keep-alive requests instead of 1,371, and 1.7 % more
// instructions per request (callgrind).
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
                this.buffer.wrote_some();
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

    #[test]
    fn past_the_cap_the_window_holds_what_the_follower_has_not_read() {
        let buffer = TapBuffer::new(4);
        buffer.keep(b"abcdef");
        assert_eq!(&buffer.snapshot()[..], b"abcd");
        // Across the cap, from below it: one contiguous view.
        assert_eq!(buffer.follow(2, <[u8]>::to_vec), Some(b"cdef".to_vec()));
        buffer.release(5);
        buffer.keep(b"gh");
        assert_eq!(buffer.follow(5, <[u8]>::to_vec), Some(b"fgh".to_vec()));
        // Released bytes are gone; the stored prefix stays.
        assert_eq!(buffer.follow(4, <[u8]>::to_vec), None);
        assert_eq!(buffer.follow(2, <[u8]>::to_vec), Some(b"cd".to_vec()));
        assert!(!buffer.follow_lost());

        buffer.keep(&vec![0; FOLLOW_WINDOW]);
        assert!(
            buffer.follow_lost(),
            "more than the window between two reads"
        );
        assert_eq!(buffer.follow(5, <[u8]>::to_vec), None);
        buffer.keep(b"more");
        assert_eq!(buffer.follow(8, <[u8]>::to_vec), None);
        assert_eq!(&buffer.snapshot()[..], b"abcd");
    }
}
