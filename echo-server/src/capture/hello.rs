//! Reading the raw ClientHello records off the socket before rustls sees them, and replaying
//! them into rustls afterwards.
//!
//! The server reads until [`exitvoice_protocol::tls::scan_capped`] says the records read so far carry a
//! complete ClientHello, never more than the byte cap, and the caller runs the read under the
//! handshake deadline. The bytes go into a caller-owned buffer, so when the deadline cancels the
//! read the partial hello is still there to be stored. [`super::replay::Replay`] then hands
//! exactly those bytes to rustls before any further socket bytes, so rustls sees the stream
//! unchanged.

use std::io;

use bytes::BufMut as _;
use exitvoice_protocol::tls::{scan_capped, HelloScan, TlsError};
use exitvoice_schema::Failure;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest single read while waiting for the hello: one maximal TLS record (RFC 8446 5.1).
const READ_CHUNK: usize = exitvoice_protocol::tls::MAX_RECORD_LEN + 5;
/// Bytes a read asks for at least: a usual ClientHello whole (Chrome's, with its post-quantum
/// key share, is about 1,900 bytes), so it takes one read where reading the record header
/// first took two.
const FIRST_READ: usize = 2048;

/// Why no complete ClientHello was read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HelloError {
    /// The peer closed the connection before the hello was complete.
    #[error("peer closed after {received} bytes, before a complete ClientHello")]
    Closed {
        /// Bytes received before the close.
        received: usize,
    },
    /// The bytes can never become a ClientHello (not TLS, SSLv2, another record type, …).
    #[error("not a ClientHello: {0}")]
    Invalid(TlsError),
    /// The hello needs more bytes than the cap allows.
    #[error("ClientHello needs at least {needed} bytes, over the cap of {cap}")]
    TooLarge {
        /// Bytes the records announce, at least.
        needed: usize,
        /// The cap in force.
        cap: usize,
    },
    /// Reading the socket failed.
    #[error("socket error while reading the ClientHello: {0}")]
    Io(#[from] io::Error),
}

impl HelloError {
    /// The typed reason, for counters and stored observations.
    pub fn failure(&self) -> Failure {
        match self {
            Self::Closed { .. } => Failure::HelloClosed,
            Self::Invalid(_) => Failure::HelloInvalid,
            Self::TooLarge { .. } => Failure::HelloTooLarge,
            Self::Io(_) => Failure::HelloIo,
        }
    }

    /// Short stable reason, for counters and stored observations.
    pub fn reason(&self) -> &'static str {
        self.failure().as_str()
    }
}

/// Reads from `stream` into `buf` until `buf` starts with whole records carrying a complete
/// ClientHello, and returns their length. `buf` may end up holding a few bytes past that length
/// (whatever the peer sent next in the same read); they must be replayed too.
///
/// Never reads more than `cap` bytes in total. Run it under the handshake deadline: it waits as
/// long as the peer keeps the hello incomplete.
///
/// # Errors
/// [`HelloError`] when the peer closes early, sends bytes that cannot be a ClientHello, needs more
/// than `cap` bytes, or the socket fails. `buf` keeps whatever was read.
pub async fn read_client_hello<S: AsyncRead + Unpin>(
    stream: &mut S,
    cap: usize,
    buf: &mut Vec<u8>,
) -> Result<usize, HelloError> {
    loop {
        let at_least = match scan_capped(buf, cap) {
            HelloScan::Complete { len } => return Ok(len),
            HelloScan::Invalid(TlsError::HandshakeTooLong { len, .. }) => {
                return Err(HelloError::TooLarge { needed: len, cap })
            }
            HelloScan::Invalid(error) => return Err(HelloError::Invalid(error)),
            HelloScan::NeedMore { at_least } => at_least,
        };
        if at_least > cap {
            return Err(HelloError::TooLarge {
                needed: at_least,
                cap,
            });
        }
        // Read what the next step needs at least, and what else already arrived up to
        // FIRST_READ (one read takes a whole usual hello; bytes past it are replayed too), never
        // more than a record's length at once, never past the cap.
        let room = cap.saturating_sub(buf.len()).max(1);
        let want = at_least
            .saturating_sub(buf.len())
            .clamp(FIRST_READ, READ_CHUNK)
            .min(room);
        buf.reserve(want);
        // `read_buf` fills `buf`'s spare room and lengthens it only by what arrived, so a deadline
        // that cancels this future leaves `buf` holding exactly the bytes received.
        let start = buf.len();
        if stream.read_buf(&mut (&mut *buf).limit(want)).await? == 0 {
            return Err(HelloError::Closed { received: start });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ClientHello handshake message body: version, random, empty session id, one
    /// cipher suite, null compression, no extensions.
    fn hello_body() -> Vec<u8> {
        let mut body = vec![0x03, 0x03];
        body.extend([0x11; 32]);
        body.extend([0x00, 0x00, 0x02, 0x13, 0x01, 0x01, 0x00]);
        body
    }

    fn handshake(body: &[u8]) -> Vec<u8> {
        let len = u32::try_from(body.len()).expect("small");
        let mut msg = vec![0x01];
        msg.extend(&len.to_be_bytes()[1..]);
        msg.extend(body);
        msg
    }

    fn record(fragment: &[u8]) -> Vec<u8> {
        let len = u16::try_from(fragment.len()).expect("small");
        let mut rec = vec![0x16, 0x03, 0x01];
        rec.extend(len.to_be_bytes());
        rec.extend(fragment);
        rec
    }

    #[tokio::test]
    async fn reads_a_hello_split_over_two_records_and_trickled_bytes() {
        let msg = handshake(&hello_body());
        let (first, second) = msg.split_at(10);
        let mut wire = record(first);
        wire.extend(record(second));
        let (mut client, mut server) = tokio::io::duplex(64);
        let sent = wire.clone();
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for chunk in sent.chunks(3) {
                client.write_all(chunk).await.expect("write");
                tokio::task::yield_now().await;
            }
            client
        });
        let mut buf = Vec::new();
        let len = read_client_hello(&mut server, 1024, &mut buf)
            .await
            .expect("complete hello");
        assert_eq!(len, wire.len());
        assert_eq!(buf, wire);
        drop(writer.await.expect("writer"));
    }

    #[tokio::test]
    async fn garbage_oversize_and_early_close_are_typed() {
        let mut garbage: &[u8] = b"GET / HTTP/1.1\r\n\r\n";
        let mut buf = Vec::new();
        let error = read_client_hello(&mut garbage, 1024, &mut buf).await;
        assert!(matches!(error, Err(HelloError::Invalid(_))), "{error:?}");

        // A handshake header announcing 70 KiB, with a 64 KiB cap.
        let mut big: &[u8] = &[0x16, 0x03, 0x01, 0x40, 0x00, 0x01, 0x01, 0x18, 0x00];
        let mut buf = Vec::new();
        let error = read_client_hello(&mut big, 64 * 1024, &mut buf).await;
        assert!(
            matches!(error, Err(HelloError::TooLarge { .. })),
            "{error:?}"
        );

        let whole = record(&handshake(&hello_body()));
        let mut half = &whole[..whole.len() / 2];
        let mut buf = Vec::new();
        let error = read_client_hello(&mut half, 1024, &mut buf).await;
        assert!(matches!(error, Err(HelloError::Closed { .. })), "{error:?}");
        assert_eq!(buf, &whole[..whole.len() / 2]);
    }
}
