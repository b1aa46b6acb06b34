//! The client's side of a proxy connection while its handshake is read: the stream (TCP, or
//! TLS to the proxy) and the bytes read from it that no step has taken yet.

use std::io;

use exitvoice_exits::dial::Tunnel;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Bytes read from the client per read during the handshake.
const READ: usize = 2048;

/// A client stream and what was read from it ahead of the step that takes it.
pub struct Client {
    stream: Box<dyn Tunnel>,
    read: Vec<u8>,
}

impl Client {
    /// `stream`, with `read` already read from it.
    pub fn new(stream: Box<dyn Tunnel>, read: Vec<u8>) -> Self {
        Self { stream, read }
    }

    /// What was read and not taken.
    pub fn read(&self) -> &[u8] {
        &self.read
    }

    /// Reads more; `false` at the end of the stream.
    ///
    /// # Errors
    /// The stream's.
    pub async fn more(&mut self) -> io::Result<bool> {
        let mut chunk = [0; READ];
        let n = self.stream.read(&mut chunk).await?;
        self.read.extend_from_slice(&chunk[..n]);
        Ok(n > 0)
    }

    /// Reads until `n` bytes are waiting.
    ///
    /// # Errors
    /// The stream's, or `UnexpectedEof` when it ends first.
    pub async fn need(&mut self, n: usize) -> io::Result<()> {
        while self.read.len() < n {
            if !self.more().await? {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(())
    }

    /// Takes the first `n` waiting bytes (after [`Self::need`]).
    pub fn take(&mut self, n: usize) -> Vec<u8> {
        let rest = self.read.split_off(n.min(self.read.len()));
        std::mem::replace(&mut self.read, rest)
    }

    /// Writes `bytes` to the client and flushes them.
    ///
    /// # Errors
    /// The stream's.
    pub async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    /// The stream, and the bytes read from it that belong to what follows the handshake.
    pub fn into_parts(self) -> (Box<dyn Tunnel>, Vec<u8>) {
        (self.stream, self.read)
    }
}
