//! Reassembly of the Initial CRYPTO stream into the ClientHello handshake message
//! (RFC 9000 section 19.6; RFC 9001 section 4.1.3).
//!
//! Clients do not send the hello as one CRYPTO frame at offset 0: Chrome shuffles many small
//! frames through a packet, Firefox sends the halves of a two-packet hello in reverse order
//! (quicwg/ops-drafts#358 lists parsers that assumed otherwise). So frames land at their offset
//! in any order, overlapping bytes must agree, and the hello is complete when the contiguous
//! bytes from offset 0 hold the whole handshake message.

use super::QuicError;

/// Most CRYPTO stream bytes kept per attempt. ClientHellos with an ML-KEM key share and ECH
/// are about 1.8 to 2.3 KB; 16 KiB leaves room and bounds what one client can make us hold.
pub const MAX_CRYPTO_BYTES: usize = 16 * 1024;
/// TLS handshake type of a ClientHello (RFC 8446 section 4).
const CLIENT_HELLO: u8 = 0x01;

/// The client's Initial CRYPTO stream, as received so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct CryptoStream {
    /// Bytes by offset; meaningful only where `have` is set.
    bytes: Vec<u8>,
    /// Which offsets were received.
    have: Vec<bool>,
}

impl CryptoStream {
    /// Adds one CRYPTO frame.
    ///
    /// # Errors
    /// [`QuicError::CryptoBeyondCap`] when the frame ends past [`MAX_CRYPTO_BYTES`], and
    /// [`QuicError::CryptoConflict`] when it contradicts bytes already received.
    pub(crate) fn insert(&mut self, offset: u64, data: &[u8]) -> Result<(), QuicError> {
        let end = offset.saturating_add(data.len() as u64);
        let (Ok(start), Ok(end_usize)) = (usize::try_from(offset), usize::try_from(end)) else {
            return Err(QuicError::CryptoBeyondCap {
                end,
                cap: MAX_CRYPTO_BYTES,
            });
        };
        if end_usize > MAX_CRYPTO_BYTES {
            return Err(QuicError::CryptoBeyondCap {
                end,
                cap: MAX_CRYPTO_BYTES,
            });
        }
        if self.bytes.len() < end_usize {
            self.bytes.resize(end_usize, 0);
            self.have.resize(end_usize, false);
        }
        // Retransmitted or overlapping data must be byte-identical; a client that sends two
        // versions of its hello is not one we can fingerprint.
        let slots = self.bytes.iter_mut().zip(self.have.iter_mut());
        for (at, ((byte, have), new)) in slots.skip(start).zip(data).enumerate() {
            if *have && *byte != *new {
                return Err(QuicError::CryptoConflict(start + at));
            }
            *byte = *new;
            *have = true;
        }
        Ok(())
    }

    /// Bytes received contiguously from offset 0.
    fn contiguous(&self) -> &[u8] {
        let len = self.have.iter().position(|h| !h).unwrap_or(self.have.len());
        self.bytes.get(..len).unwrap_or_default()
    }

    /// The complete ClientHello handshake message (`01 LL LL LL …`), once all its bytes
    /// arrived; bytes after it are ignored.
    ///
    /// # Errors
    /// [`QuicError::NotClientHello`] when the stream starts with another handshake type.
    pub(crate) fn client_hello(&self) -> Result<Option<&[u8]>, QuicError> {
        let prefix = self.contiguous();
        let Some(&kind) = prefix.first() else {
            return Ok(None);
        };
        if kind != CLIENT_HELLO {
            return Err(QuicError::NotClientHello(kind));
        }
        let Some(&[a, b, c]) = prefix.get(1..4) else {
            return Ok(None);
        };
        let len = 4 + (usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c));
        Ok(prefix.get(..len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_order_and_overlapping_frames_make_the_hello() {
        let hello = [0x01, 0x00, 0x00, 0x03, 0xaa, 0xbb, 0xcc];
        let mut stream = CryptoStream::default();
        stream.insert(5, &hello[5..]).expect("in the cap");
        assert_eq!(stream.client_hello(), Ok(None), "no bytes at offset 0 yet");
        stream.insert(0, &hello[..3]).expect("in the cap");
        assert_eq!(stream.client_hello(), Ok(None), "a gap at 3..5");
        stream.insert(2, &hello[2..6]).expect("overlap agrees");
        assert_eq!(stream.client_hello(), Ok(Some(&hello[..])));
    }

    #[test]
    fn conflicts_caps_and_other_messages_are_typed_errors() {
        let mut stream = CryptoStream::default();
        stream.insert(0, &[0x01, 0x00]).expect("in the cap");
        assert_eq!(stream.insert(1, &[0x01]), Err(QuicError::CryptoConflict(1)));
        assert_eq!(
            stream.insert(MAX_CRYPTO_BYTES as u64, &[0]),
            Err(QuicError::CryptoBeyondCap {
                end: MAX_CRYPTO_BYTES as u64 + 1,
                cap: MAX_CRYPTO_BYTES
            })
        );
        assert!(stream.insert(u64::MAX, &[0, 0]).is_err());
        let mut server_hello = CryptoStream::default();
        server_hello.insert(0, &[0x02, 0x00]).expect("in the cap");
        assert_eq!(
            server_hello.client_hello(),
            Err(QuicError::NotClientHello(0x02))
        );
    }
}
