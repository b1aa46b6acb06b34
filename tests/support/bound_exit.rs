//! A tiny HTTP CONNECT exit of the tests' own that dials every target from a source address it
//! is given (127.0.0.x, several in turn for a rotating exit), so the echo server sees a distinct
//! egress per exit. Loopback only: whatever the CONNECT target's host, it dials 127.0.0.1.
//! [`BoundExit::with_stacks`] also sets the IP TTL and TCP MSS of its outgoing sockets, so its
//! SYNs look like another host's stack (an initial TTL of 128 is Windows's).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Largest CONNECT head read.
const MAX_HEAD: usize = 8192;

/// A running exit; it lives as long as the test process.
pub struct BoundExit {
    /// Its CONNECT port on 127.0.0.1.
    pub port: u16,
}

impl BoundExit {
    /// An exit whose n-th connection leaves from `sources[n % len]`.
    pub fn start(sources: &[Ipv4Addr]) -> Self {
        Self::with_stacks(sources, &[Stack::default()])
    }

    /// An exit whose n-th connection leaves from `sources[n % len]` with the socket options
    /// of `stacks[n % len]`.
    pub fn with_stacks(sources: &[Ipv4Addr], stacks: &[Stack]) -> Self {
        assert!(
            sources.iter().all(Ipv4Addr::is_loopback),
            "loopback sources only"
        );
        let sources: Arc<Vec<Ipv4Addr>> = Arc::new(sources.to_vec());
        let stacks: Arc<Vec<Stack>> = Arc::new(stacks.to_vec());
        let next = Arc::new(AtomicUsize::new(0));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                while let Ok((client, _)) = listener.accept().await {
                    let turn = next.fetch_add(1, Ordering::Relaxed);
                    let source = sources[turn % sources.len()];
                    let stack = stacks[turn % stacks.len()];
                    tokio::spawn(async move {
                        let _ = forward(client, source, stack).await;
                    });
                }
            });
        });
        Self { port }
    }
}

/// Socket options of an exit's outgoing connections (`None`: the kernel's default).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stack {
    /// `IP_TTL`.
    pub ttl: Option<u32>,
    /// `TCP_MAXSEG`.
    pub mss: Option<u32>,
}

async fn forward(mut client: TcpStream, source: Ipv4Addr, stack: Stack) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_HEAD || client.read(&mut byte).await? == 0 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head);
    let port: Option<u16> = text
        .split_whitespace()
        .nth(1)
        .and_then(|authority| authority.rsplit(':').next())
        .and_then(|p| p.parse().ok());
    let Some(port) = port else {
        return client.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
    };
    let socket = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    if let Some(ttl) = stack.ttl {
        socket.set_ttl_v4(ttl)?;
    }
    if let Some(mss) = stack.mss {
        socket.set_tcp_mss(mss)?;
    }
    socket.set_nonblocking(true)?;
    let socket = TcpSocket::from_std_stream(std::net::TcpStream::from(socket));
    socket.bind(SocketAddr::from((source, 0)))?;
    let mut upstream = socket
        .connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .await?;
    client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}
