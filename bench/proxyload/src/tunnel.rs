//! A tunnel through an HTTP proxy: `CONNECT` with `Proxy-Authorization: Basic` (RFC 9110
//! §9.3.6, RFC 7617), the `200` read, and the target's bytes that came with it kept.

use std::net::SocketAddr;

use anyhow::{bail, Context as _};
use base64::Engine as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// The longest answer head read.
const MAX_HEAD: usize = 4096;

/// A proxy and the credentials given to it.
#[derive(Clone, Debug)]
pub struct Proxy {
    addr: SocketAddr,
    authorization: String,
}

/// An open tunnel: the stream, and the target's bytes read with the proxy's answer.
pub struct Tunnel {
    pub stream: TcpStream,
    pub early: Vec<u8>,
}

impl Proxy {
    /// The proxy at `addr`, asked as `user` with `password`.
    pub fn new(addr: SocketAddr, user: &str, password: &str) -> Self {
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Self {
            addr,
            authorization: format!("Basic {basic}"),
        }
    }

    /// Opens a tunnel to `target`.
    ///
    /// # Errors
    /// The connection failed, or the proxy answered anything but `200`.
    pub async fn open(&self, target: SocketAddr) -> anyhow::Result<Tunnel> {
        let mut stream = TcpStream::connect(self.addr).await?;
        stream.set_nodelay(true)?;
        let request = format!(
            "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: {}\r\n\r\n",
            self.authorization
        );
        stream.write_all(request.as_bytes()).await?;
        let mut head = Vec::with_capacity(256);
        let mut chunk = [0; 512];
        let end = loop {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                bail!("the proxy closed before answering");
            }
            head.extend_from_slice(chunk.get(..n).unwrap_or_default());
            if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            if head.len() > MAX_HEAD {
                bail!("the proxy's answer head is longer than {MAX_HEAD} bytes");
            }
        };
        let status = head.split(|&b| b == b'\r').next().unwrap_or_default();
        let status = String::from_utf8_lossy(status);
        let code = status.split(' ').nth(1).context("no status code")?;
        if code != "200" {
            bail!("the proxy answered {status}");
        }
        let early = head.split_off(end);
        Ok(Tunnel { stream, early })
    }
}

impl Tunnel {
    /// Waits for the target's first byte (it sends one at once).
    ///
    /// # Errors
    /// The tunnel closed or failed first.
    pub async fn first_byte(&mut self) -> anyhow::Result<()> {
        if self.early.is_empty() {
            let mut byte = [0; 1];
            if self.stream.read(&mut byte).await? == 0 {
                bail!("the tunnel closed before the target's first byte");
            }
        } else {
            self.early.remove(0);
        }
        Ok(())
    }
}
