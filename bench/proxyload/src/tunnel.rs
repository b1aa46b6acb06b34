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

#[cfg(test)]
mod tests {
    use tokio::net::TcpListener;

    use super::*;

    /// A proxy that reads the request head, then writes `answer` in one piece.
    async fn answering(answer: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut byte = [0; 1];
            while !head.ends_with(b"\r\n\r\n") {
                stream.read_exact(&mut byte).await.unwrap();
                head.push(byte[0]);
            }
            let text = String::from_utf8(head).unwrap();
            // base64("u:p")
            assert!(
                text.contains("Proxy-Authorization: Basic dTpw\r\n"),
                "{text}"
            );
            stream.write_all(answer).await.unwrap();
            // Held open until the client is done.
            let _ = stream.read(&mut byte).await;
        });
        addr
    }

    #[tokio::test]
    async fn the_first_byte_may_come_with_the_answer() {
        let proxy = answering(b"HTTP/1.1 200 Connection established\r\n\r\n!").await;
        let target = "127.0.0.1:9".parse().unwrap();
        let mut tunnel = Proxy::new(proxy, "u", "p").open(target).await.unwrap();
        assert_eq!(tunnel.early, b"!");
        tunnel.first_byte().await.unwrap();
        assert!(tunnel.early.is_empty());
    }

    #[tokio::test]
    async fn any_answer_but_200_is_a_refusal() {
        let proxy = answering(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n").await;
        let target = "127.0.0.1:9".parse().unwrap();
        let error = Proxy::new(proxy, "u", "p")
            .open(target)
            .await
            .err()
            .unwrap();
        assert!(error.to_string().contains("407"), "{error}");
    }
}
