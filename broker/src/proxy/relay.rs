//! The tunnel once open: bytes copied both ways as they come, never read for meaning, until
//! either side closes, the tunnel moves nothing for `--tunnel-idle`, or its lease ends.
//!
//! Each direction holds its buffer only while bytes move: it is taken for a read and given
//! back when the read finds nothing and nothing waits to be written, so an idle tunnel (a
//! browser's or a pool's kept connection) holds none.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use exitvoice_exits::dial::Tunnel;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio_util::sync::CancellationToken;

use super::deadline::Deadline;

/// Bytes buffered per direction while bytes move.
const BUFFER: usize = 8 * 1024;

/// Why a tunnel closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// The client closed its side first (or both closed).
    Client,
    /// The exit (the target, through it) closed its side first.
    Exit,
    /// Either side failed (reset).
    Reset,
    /// Nothing moved for the idle limit.
    Idle,
    /// Its lease ended.
    LeaseEnded,
    /// Its lease's deadline passed by this instance's clock, renewed or not.
    RanOut,
}

impl Closed {
    /// The metrics' reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Exit => "exit",
            Self::Reset => "reset",
            Self::Idle => "idle",
            Self::LeaseEnded => "lease_ended",
            Self::RanOut => "lease_ran_out",
        }
    }
}

/// What a tunnel carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Carried {
    /// Bytes from the client to the exit.
    pub up: u64,
    /// Bytes from the exit to the client.
    pub down: u64,
    /// Why it closed.
    pub closed: Closed,
}

/// What the two sides share: bytes each way, the last moment a byte moved, which side ended
/// first.
#[derive(Debug)]
struct Traffic {
    started: Instant,
    /// Ms since `started` of the last read that moved a byte.
    last_ms: AtomicU64,
    up: AtomicU64,
    down: AtomicU64,
    /// The exit's side ended before the client's.
    exit_first: AtomicBool,
    client_ended: AtomicBool,
}

impl Traffic {
    fn moved(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.started + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// One side's stream, counting what is read from it.
struct Counted {
    stream: Box<dyn Tunnel>,
    traffic: Arc<Traffic>,
    /// Reads count toward `up` (the client's side) or `down` (the exit's).
    client: bool,
    /// Past it, nothing more is written to the exit.
    deadline: Arc<Deadline>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let n = (buf.filled().len() - before) as u64;
            let t = &self.traffic;
            if n > 0 {
                let counter = if self.client { &t.up } else { &t.down };
                counter.fetch_add(n, Ordering::Relaxed);
                t.moved();
            } else if self.client {
                t.client_ended.store(true, Ordering::Relaxed);
            } else if !t.client_ended.load(Ordering::Relaxed) {
                t.exit_first.store(true, Ordering::Relaxed);
            }
        }
        polled
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !self.client && self.deadline.passed() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the lease ran out",
            )));
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Copies `client` ↔ `exit` (after sending `early`, the client's bytes read with its
/// handshake, to the exit) until one of the ends in [`Closed`]; nothing is written to the exit
/// once `deadline` has passed.
pub async fn relay(
    client: Box<dyn Tunnel>,
    exit: Box<dyn Tunnel>,
    early: &[u8],
    idle: Duration,
    ended: &CancellationToken,
    deadline: &Arc<Deadline>,
) -> Carried {
    let traffic = Arc::new(Traffic {
        started: Instant::now(),
        last_ms: AtomicU64::new(0),
        up: AtomicU64::new(early.len() as u64),
        down: AtomicU64::new(0),
        exit_first: AtomicBool::new(false),
        client_ended: AtomicBool::new(false),
    });
    let mut client = Counted {
        stream: client,
        traffic: traffic.clone(),
        client: true,
        deadline: deadline.clone(),
    };
    let mut exit = Counted {
        stream: exit,
        traffic: traffic.clone(),
        client: false,
        deadline: deadline.clone(),
    };
    let closed = tokio::select! {
        biased;
        () = ended.cancelled() => Closed::LeaseEnded,
        () = deadline.passes() => Closed::RanOut,
        () = idle_out(&traffic, idle) => Closed::Idle,
        copied = async {
            if !early.is_empty() {
                exit.write_all(early).await?;
            }
            copy_both(&mut client, &mut exit).await
        } => match copied {
            Err(_) if deadline.passed() => Closed::RanOut,
            Ok(_) if traffic.exit_first.load(Ordering::Relaxed) => Closed::Exit,
            Ok(_) => Closed::Client,
            Err(_) => Closed::Reset,
        },
    };
    Carried {
        up: traffic.up.load(Ordering::Relaxed),
        down: traffic.down.load(Ordering::Relaxed),
        closed,
    }
}

/// One direction of the copy: what was read and not yet written, in a buffer held only while
/// there is some or a read is under way.
#[derive(Default)]
struct Direction {
    buf: Option<Box<[u8]>>,
    /// Written up to `pos` of the `cap` bytes read into `buf`.
    pos: usize,
    cap: usize,
    /// The reader ended.
    read_done: bool,
    /// Written since the last flush.
    need_flush: bool,
}

impl Direction {
    /// Copies `reader` to `writer` until the reader ends, then shuts the writer down.
    fn poll_copy<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        mut reader: Pin<&mut R>,
        mut writer: Pin<&mut W>,
    ) -> Poll<io::Result<()>>
    where
        R: AsyncRead + ?Sized,
        W: AsyncWrite + ?Sized,
    {
        loop {
            if self.pos == self.cap && !self.read_done {
                let buf = self
                    .buf
                    .get_or_insert_with(|| vec![0; BUFFER].into_boxed_slice());
                let mut read = ReadBuf::new(buf);
                match reader.as_mut().poll_read(cx, &mut read) {
                    Poll::Pending => {
                        // Nothing to write: the buffer goes back until the next bytes come
                        // (a reader keeps no hold on it past the call).
                        self.buf = None;
                        if self.need_flush {
                            ready!(writer.as_mut().poll_flush(cx))?;
                            self.need_flush = false;
                        }
                        return Poll::Pending;
                    }
                    Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                    Poll::Ready(Ok(())) => {
                        let n = read.filled().len();
                        self.read_done = n == 0;
                        (self.pos, self.cap) = (0, n);
                    }
                }
            }
            while self.pos < self.cap {
                let pending = self.buf.as_deref().and_then(|b| b.get(self.pos..self.cap));
                let n = ready!(writer.as_mut().poll_write(cx, pending.unwrap_or_default()))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.pos += n;
                self.need_flush = true;
            }
            if self.read_done {
                self.buf = None;
                if self.need_flush {
                    ready!(writer.as_mut().poll_flush(cx))?;
                    self.need_flush = false;
                }
                return writer.as_mut().poll_shutdown(cx);
            }
        }
    }
}

/// Copies `a` to `b` and `b` to `a` until both readers ended (each end's writer shut down
/// after its reader ended), or either side failed.
async fn copy_both<A, B>(a: &mut A, b: &mut B) -> io::Result<()>
where
    A: AsyncRead + AsyncWrite + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let (mut up, mut down) = (Direction::default(), Direction::default());
    let (mut up_done, mut down_done) = (false, false);
    std::future::poll_fn(|cx| {
        if !up_done {
            if let Poll::Ready(result) = up.poll_copy(cx, Pin::new(&mut *a), Pin::new(&mut *b)) {
                result?;
                up_done = true;
            }
        }
        if !down_done {
            if let Poll::Ready(result) = down.poll_copy(cx, Pin::new(&mut *b), Pin::new(&mut *a)) {
                result?;
                down_done = true;
            }
        }
        if up_done && down_done {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Resolves once nothing has moved for `idle`.
async fn idle_out(traffic: &Traffic, idle: Duration) {
    loop {
        let due = traffic.last() + idle;
        if Instant::now() >= due {
            return;
        }
        tokio::time::sleep_until(due.into()).await;
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// A direction holds a buffer only while bytes move: none while its reader has nothing,
    /// none once what came is written; the writer is shut down when the reader ends.
    #[tokio::test]
    async fn an_idle_direction_holds_no_buffer() {
        let (mut far_in, mut reader) = tokio::io::duplex(64 * 1024);
        let (mut writer, mut far_out) = tokio::io::duplex(64 * 1024);
        let mut copy = Direction::default();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut poll = |copy: &mut Direction| {
            copy.poll_copy(&mut cx, Pin::new(&mut reader), Pin::new(&mut writer))
        };
        assert!(poll(&mut copy).is_pending());
        assert!(copy.buf.is_none(), "nothing read yet");
        far_in.write_all(b"some bytes").await.unwrap();
        assert!(poll(&mut copy).is_pending());
        assert!(
            copy.buf.is_none(),
            "given back once written and the read pends"
        );
        let mut got = [0; 10];
        far_out.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"some bytes");
        drop(far_in);
        assert!(matches!(poll(&mut copy), Poll::Ready(Ok(()))));
        assert_eq!(
            far_out.read(&mut got).await.unwrap(),
            0,
            "shut down after the reader"
        );
    }

    /// Bytes pass until the deadline; then the tunnel closes as run out, and the exit gets
    /// nothing written after it, however much the client still sends.
    #[tokio::test]
    async fn nothing_reaches_the_exit_past_the_deadline() {
        let (client, mut client_far) = tokio::io::duplex(64 * 1024);
        let (exit, mut exit_far) = tokio::io::duplex(64 * 1024);
        let deadline = Arc::new(Deadline::new(
            Instant::now() + super::super::deadline::AHEAD + Duration::from_millis(300),
        ));
        let ended = CancellationToken::new();
        let relaying = tokio::spawn({
            let deadline = deadline.clone();
            async move {
                relay(
                    Box::new(client),
                    Box::new(exit),
                    b"early",
                    Duration::from_secs(60),
                    &ended,
                    &deadline,
                )
                .await
            }
        });
        let sender = tokio::spawn(async move {
            // Written every 10 ms until the relay lets go.
            while client_far.write_all(b"x").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        let mut got = Vec::new();
        let mut buf = [0; 1024];
        let mut last_byte_at = Instant::now();
        loop {
            match exit_far.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    last_byte_at = Instant::now();
                }
            }
        }
        let carried = relaying.await.unwrap();
        sender.abort();
        assert_eq!(carried.closed, Closed::RanOut);
        assert!(got.starts_with(b"early"), "{got:?}");
        assert!(
            got.len() > 10,
            "bytes passed before the deadline: {}",
            got.len()
        );
        // Read a moment after it was written: 5 ms of slack, while the client sends every 10.
        assert!(
            last_byte_at <= deadline.at() + Duration::from_millis(5),
            "a byte reached the exit {:?} after the deadline",
            last_byte_at - deadline.at()
        );
    }
}
