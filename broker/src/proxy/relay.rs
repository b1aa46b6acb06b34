//! The tunnel once open: bytes copied both ways as they come, never read for meaning, until
//! either side closes, the tunnel moves nothing for `--tunnel-idle`, or its lease ends.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use exitvoice_exits::dial::Tunnel;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio_util::sync::CancellationToken;

/// Bytes buffered per direction.
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
/// handshake, to the exit) until one of the ends in [`Closed`].
pub async fn relay(
    client: Box<dyn Tunnel>,
    exit: Box<dyn Tunnel>,
    early: &[u8],
    idle: Duration,
    ended: &CancellationToken,
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
    };
    let mut exit = Counted {
        stream: exit,
        traffic: traffic.clone(),
        client: false,
    };
    let closed = tokio::select! {
        biased;
        () = ended.cancelled() => Closed::LeaseEnded,
        () = idle_out(&traffic, idle) => Closed::Idle,
        copied = async {
            if !early.is_empty() {
                exit.stream.write_all(early).await?;
            }
            tokio::io::copy_bidirectional_with_sizes(&mut client, &mut exit, BUFFER, BUFFER).await
        } => match copied {
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
