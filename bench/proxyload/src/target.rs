//! The target at the far end of every tunnel: on loopback, in the driver's process. Each
//! connection gets one byte at once (the first byte the latency waits for); then, if the client
//! sends a count (8 bytes, big-endian), that many bytes, and the connection closes; otherwise it
//! stays open, silent, until the client closes.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// Bytes written per call while streaming.
const CHUNK: usize = 64 * 1024;

/// Binds a loopback port and serves it for the life of the runtime; its address.
///
/// # Errors
/// No port could be bound.
pub async fn start() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(serve(stream));
                }
                // Out of descriptors: the driver's own tunnel then fails and counts as refused.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            }
        }
    });
    Ok(addr)
}

async fn serve(mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    if stream.write_all(b"!").await.is_err() {
        return;
    }
    let mut count = [0; 8];
    if stream.read_exact(&mut count).await.is_err() {
        return;
    }
    let mut left = u64::from_be_bytes(count);
    let chunk = vec![0x5a; CHUNK];
    while left > 0 {
        let n = usize::try_from(left).unwrap_or(CHUNK).min(CHUNK);
        if stream
            .write_all(chunk.get(..n).unwrap_or_default())
            .await
            .is_err()
        {
            return;
        }
        left -= n as u64;
    }
    let _ = stream.shutdown().await;
}
