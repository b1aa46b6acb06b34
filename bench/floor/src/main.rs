//! `floor-echo`: `baseline-echo` plus the least of the work exitvoice must do on every connection,
//! done the shortest way: the floor under exitvoice's cost per new connection.
//!
//! Beside the baseline's rustls + hyper-util server (its TLS configuration and answer come from
//! `exitvoice_baseline`, so both do the same TLS and HTTP work) it takes each connection's SYN
//! from the kernel at accept (`TCP_SAVE_SYN` on the listener, the echo's own calls), copies the
//! ClientHello's first record as rustls reads it and the decrypted client bytes as hyper reads
//! them (those the follower has not read yet, up to 64 KiB), analyses the connection once with exitvoice's own
//! [`analyse`] at its first request, reads each request's head with exitvoice's [`Follower`],
//! answers `/api/clean`'s fields, and queues the connection's row (at its first request) and
//! each request's row to one batching writer task that writes them through exitvoice's
//! [`Store::write_batch`] (up to 256 jobs, 100 ms after the first, as `exitvoice serve`). No
//! deadlines, shutdown signal, admission, metrics, ledger, router, record of a failed handshake
//! or multi-record ClientHello: what exitvoice does beyond this is what a hardened server adds
//! on top of the work.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use clap::Parser;
use exitvoice_baseline::{json, tls_config, Serving, OK};
use exitvoice_echo::saved_syn::{self, SavedSyn};
use exitvoice_protocol::analysis::{self, analyse, Analysis, ConnectionInput, Follower};
use exitvoice_protocol::tls::{CipherSuite, ProtocolVersion};
use exitvoice_schema::{CleanEcho, ConnectionRow, PeerPolicy, RequestRecord};
use exitvoice_store::{Batch, Store};
use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;

/// Flags of `floor-echo`.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    serving: Serving,
    /// SQLite database (created with exitvoice's schema if missing).
    #[arg(long)]
    db: PathBuf,
    /// The work done, each part with the ones before it: `nothing` (the baseline's work, in
    /// this binary), `capture` (copy the hello and the decrypted bytes, answer `{"ok":true}`),
    /// `analysis` (and analyse, read each head, answer the clean fields), `store` (and store
    /// the rows).
    #[arg(long, value_enum, default_value_t = Upto::Store)]
    upto: Upto,
}

/// How much of the work `floor-echo` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Upto {
    /// `baseline-echo`'s work: a control for this binary's size and layout.
    Nothing,
    /// Copy the ClientHello and the decrypted client bytes.
    Capture,
    /// And analyse the connection and read each request's head.
    Analysis,
    /// And store the connection's row and each request's.
    Store,
}

/// Decrypted client bytes kept per connection and not yet read by its follower (exitvoice's
/// default `--capture-bytes`).
const CAPTURE_BYTES: usize = 64 * 1024;
/// Jobs per batch at most, and how long the writer waits for more after the first.
const BATCH: usize = 256;
const FLUSH: Duration = Duration::from_millis(100);

/// One connection: its bytes, its analysis, its requests.
struct Conn {
    id: String,
    accepted_ms: i64,
    peer: SocketAddr,
    syn: SavedSyn,
    hello: Vec<u8>,
    alpn: Option<String>,
    tls_version: Option<&'static str>,
    cipher: Option<&'static str>,
    stream: Mutex<Stream>,
    analysis: OnceLock<Analysis>,
    requests: AtomicU32,
}

/// The decrypted client bytes from stream offset `base` on (from the first byte until the
/// first request's head was read, then what the follower has not read yet), and the follower
/// that reads each request's head from them.
#[derive(Default)]
struct Stream {
    bytes: Vec<u8>,
    base: usize,
    follower: Option<Follower>,
}

/// What the writer stores.
enum Job {
    Connection(Box<ConnectionRow>),
    Request(Box<RequestRecord>),
}

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Where a [`Copying`] stream puts the bytes read through it.
trait Sink {
    fn copy(&mut self, read: &[u8]);
}

/// A stream that hands every byte read through it to its sink.
struct Copying<S, K> {
    inner: S,
    sink: K,
}

impl<S: AsyncRead + Unpin, K: Sink + Unpin> AsyncRead for Copying<S, K> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let start = buf.filled().len();
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        let read = &buf.filled()[start..];
        if !read.is_empty() {
            this.sink.copy(read);
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin, K: Unpin> AsyncWrite for Copying<S, K> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The first TLS record the client sends (its ClientHello), as rustls reads it.
#[derive(Default)]
struct Hello {
    bytes: Vec<u8>,
    done: bool,
}

impl Sink for Hello {
    fn copy(&mut self, read: &[u8]) {
        if self.done {
            return;
        }
        self.bytes.extend_from_slice(read);
        if let [_, _, _, high, low, ..] = self.bytes[..] {
            // The record header's length (RFC 8446 section 5.1).
            let end = 5 + usize::from(u16::from_be_bytes([high, low]));
            if self.bytes.len() >= end {
                self.bytes.truncate(end);
                self.done = true;
            }
        }
    }
}

/// The connection's decrypted client bytes, as hyper reads them.
struct Tap(Arc<Conn>);

impl Sink for Tap {
    fn copy(&mut self, read: &[u8]) {
        let mut stream = self.0.stream.lock().unwrap_or_else(PoisonError::into_inner);
        let room = CAPTURE_BYTES.saturating_sub(stream.bytes.len());
        stream
            .bytes
            .extend_from_slice(&read[..read.len().min(room)]);
    }
}

/// Analyses the connection at its first request, reads the request's own head, queues the
/// rows and answers the clean echo.
fn answer(
    conn: &Conn,
    request: &Request<Incoming>,
    upto: Upto,
    queue: &mpsc::Sender<Job>,
) -> Bytes {
    if upto == Upto::Capture {
        return Bytes::from_static(OK);
    }
    let store = upto == Upto::Store;
    let index = conn.requests.fetch_add(1, Ordering::Relaxed) + 1;
    let mut stream = conn.stream.lock().unwrap_or_else(PoisonError::into_inner);
    let analysis = conn.analysis.get_or_init(|| {
        analyse(&ConnectionInput {
            syn: conn.syn.source(),
            p0f_db: None,
            hello: &conn.hello,
            prefix: &stream.bytes,
            alpn_negotiated: conn.alpn.as_deref(),
            tls_version: conn.tls_version,
            cipher: conn.cipher,
            spoken: None,
        })
    });
    let facts = &analysis.facts;
    let Stream {
        bytes,
        base,
        follower,
    } = &mut *stream;
    let follower = follower.get_or_insert_with(|| Follower::new(facts.alpn.spoken));
    let head = follower.head(bytes, *base, index).0;
    let read = follower.offset();
    if store && index == 1 {
        let row = ConnectionRow {
            conn_id: conn.id.clone(),
            time_unix_ms: conn.accepted_ms,
            peer: PeerPolicy::Full.apply(conn.peer),
            facts: Arc::clone(facts),
            failure: None,
            failure_detail: None,
            requests: 1,
            prefix_truncated: false,
            analysed_prefix_len: Some(analysis.prefix_len),
            hello: conn.hello.clone(),
            prefix: stream.bytes.clone(),
            syn: match &conn.syn {
                SavedSyn::Saved(bytes) => bytes.clone(),
                SavedSyn::Absent(_) => Vec::new(),
            },
            latency: None,
        };
        let _ = queue.try_send(Job::Connection(Box::new(row)));
    }
    // The bytes the follower has read are no longer needed.
    let consumed = read.saturating_sub(stream.base).min(stream.bytes.len());
    stream.bytes.drain(..consumed);
    stream.base += consumed;
    drop(stream);
    let record = RequestRecord {
        conn_id: conn.id.clone(),
        index,
        time_unix_ms: unix_ms(),
        token: None,
        method: request.method().as_str().to_owned(),
        path: request
            .uri()
            .path_and_query()
            .map_or_else(String::new, |p| p.as_str().to_owned()),
        stream_id: head.stream_id,
        bucket: analysis::bucket(facts, index, false),
        pseudo_header_order: head.pseudo_header_order,
        header_order: head.header_order,
        http1: head.http1,
    };
    let mut body = Vec::with_capacity(1024);
    let _ = serde_json::to_writer(&mut body, &CleanEcho::new(facts, &record));
    if store {
        let _ = queue.try_send(Job::Request(Box::new(record)));
    }
    body.into()
}

/// Writes the queued rows in batches, one transaction each.
async fn write(store: Store, mut queue: mpsc::Receiver<Job>) {
    let mut jobs = Vec::with_capacity(BATCH);
    while queue.recv_many(&mut jobs, BATCH).await > 0 {
        // Up to a batch, or what came within the flush interval after the first.
        let flush = tokio::time::sleep(FLUSH);
        tokio::pin!(flush);
        while jobs.len() < BATCH {
            let room = BATCH - jobs.len();
            tokio::select! {
                received = queue.recv_many(&mut jobs, room) => if received == 0 { break },
                () = &mut flush => break,
            }
        }
        let mut batch = Batch::default();
        for job in jobs.drain(..) {
            match job {
                Job::Connection(row) => batch.connections.push(*row),
                Job::Request(record) => batch.requests.push(*record),
            }
        }
        if let Err(error) = store.write_batch(&batch).await {
            eprintln!("floor-echo: batch not stored: {error}");
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let upto = args.upto;
    let acceptor = TlsAcceptor::from(Arc::new(tls_config(&args.serving.cert, &args.serving.key)?));
    let store = Store::open(&args.db).await?;
    let (queue, jobs) = mpsc::channel(16_384);
    tokio::spawn(write(store, jobs));
    let listener = TcpListener::bind(args.serving.listen).await?;
    if upto != Upto::Nothing {
        saved_syn::keep(&listener)?;
    }
    println!(
        "floor-echo: listening on https://{}",
        listener.local_addr()?
    );
    let server = Arc::new(auto::Builder::new(TokioExecutor::new()));
    let boot = unix_ms();
    let sequence = Arc::new(AtomicU64::new(0));
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                eprintln!("floor-echo: accept: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let (acceptor, server) = (acceptor.clone(), Arc::clone(&server));
        if upto == Upto::Nothing {
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(|_| async { json(Bytes::from_static(OK)) });
                let _ = server.serve_connection(TokioIo::new(tls), service).await;
            });
            continue;
        }
        let syn = saved_syn::take(&tcp);
        let queue = queue.clone();
        let id = format!("{boot}-{:06}", sequence.fetch_add(1, Ordering::Relaxed));
        tokio::spawn(async move {
            let accepted_ms = unix_ms();
            let copy = Copying {
                inner: tcp,
                sink: Hello {
                    bytes: Vec::with_capacity(2048),
                    done: false,
                },
            };
            let Ok(mut tls) = acceptor.accept(copy).await else {
                return;
            };
            let hello = std::mem::take(&mut tls.get_mut().0.sink.bytes);
            let (_, session) = tls.get_ref();
            let conn = Arc::new(Conn {
                id,
                accepted_ms,
                peer,
                syn,
                hello,
                alpn: session
                    .alpn_protocol()
                    .map(|p| String::from_utf8_lossy(p).into_owned()),
                tls_version: session
                    .protocol_version()
                    .and_then(|v| ProtocolVersion(u16::from(v)).name()),
                cipher: session
                    .negotiated_cipher_suite()
                    .and_then(|s| CipherSuite(u16::from(s.suite())).name()),
                stream: Mutex::new(Stream::default()),
                analysis: OnceLock::new(),
                requests: AtomicU32::new(0),
            });
            let tap = Copying {
                inner: tls,
                sink: Tap(Arc::clone(&conn)),
            };
            let service = service_fn(move |request: Request<Incoming>| {
                let answered = json(answer(&conn, &request, upto, &queue));
                async move { answered }
            });
            let _ = server.serve_connection(TokioIo::new(tap), service).await;
        });
    }
}
