//! The frames a client may put in an Initial packet (RFC 9000 sections 12.4 and 19): PADDING,
//! PING, ACK, CRYPTO and CONNECTION_CLOSE. Anything else is a protocol violation and ends the
//! packet ([`QuicError::UnexpectedFrame`]).

use super::QuicError;
use crate::codec::Reader;

/// PADDING (RFC 9000 section 19.1).
pub(crate) const PADDING: u64 = 0x00;
/// PING (RFC 9000 section 19.2).
const PING: u64 = 0x01;
/// ACK, without and with ECN counts (RFC 9000 section 19.3).
const ACK: u64 = 0x02;
const ACK_ECN: u64 = 0x03;
/// CRYPTO (RFC 9000 section 19.6).
pub(crate) const CRYPTO: u64 = 0x06;
/// CONNECTION_CLOSE of the transport (RFC 9000 section 19.19).
const CONNECTION_CLOSE: u64 = 0x1c;

/// One frame of an Initial packet; only CRYPTO keeps its contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// A frame that carries nothing we read (its type, wire value).
    Other(u64),
    /// CRYPTO data at a stream offset.
    Crypto {
        /// Offset in the Initial CRYPTO stream.
        offset: u64,
        /// The data.
        data: &'a [u8],
    },
}

fn truncated(field: &'static str) -> QuicError {
    QuicError::Truncated { field }
}

/// Reads every frame of a decrypted Initial payload, in order.
///
/// # Errors
/// [`QuicError::Truncated`] for a frame cut short, [`QuicError::UnexpectedFrame`] for a frame
/// type not allowed in Initial packets.
pub(crate) fn frames(payload: &[u8]) -> Result<Vec<Frame<'_>>, QuicError> {
    let mut r = Reader::new(payload);
    let mut out = Vec::new();
    while !r.is_empty() {
        let kind = r.varint().ok_or(truncated("frame type"))?;
        match kind {
            PADDING | PING => out.push(Frame::Other(kind)),
            ACK | ACK_ECN => {
                // Largest Acknowledged, ACK Delay, ACK Range Count, First ACK Range.
                for field in ["ACK largest", "ACK delay"] {
                    r.varint().ok_or(truncated(field))?;
                }
                let ranges = r.varint().ok_or(truncated("ACK range count"))?;
                r.varint().ok_or(truncated("ACK first range"))?;
                // Each range is at least two bytes, so a huge count runs out of bytes quickly.
                for _ in 0..ranges {
                    r.varint().ok_or(truncated("ACK gap"))?;
                    r.varint().ok_or(truncated("ACK range length"))?;
                }
                if kind == ACK_ECN {
                    for _ in 0..3 {
                        r.varint().ok_or(truncated("ACK ECN count"))?;
                    }
                }
                out.push(Frame::Other(kind));
            }
            CRYPTO => {
                let offset = r.varint().ok_or(truncated("CRYPTO offset"))?;
                let len = r.varint().ok_or(truncated("CRYPTO length"))?;
                let data = usize::try_from(len)
                    .ok()
                    .and_then(|len| r.take(len))
                    .ok_or(truncated("CRYPTO data"))?;
                out.push(Frame::Crypto { offset, data });
            }
            CONNECTION_CLOSE => {
                r.varint().ok_or(truncated("CONNECTION_CLOSE error code"))?;
                r.varint().ok_or(truncated("CONNECTION_CLOSE frame type"))?;
                let len = r.varint().ok_or(truncated("CONNECTION_CLOSE reason"))?;
                usize::try_from(len)
                    .ok()
                    .and_then(|len| r.take(len))
                    .ok_or(truncated("CONNECTION_CLOSE reason"))?;
                out.push(Frame::Other(kind));
            }
            other => return Err(QuicError::UnexpectedFrame(other)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_ping_ack_and_crypto_are_read() {
        #[rustfmt::skip]
        let payload = [
            0x00, 0x00, 0x01,
            0x03, 0x05, 0x00, 0x01, 0x00, 0x02, 0x01, 0x07, 0x08, 0x09,
            0x06, 0x40, 0x10, 0x02, 0xaa, 0xbb,
        ];
        assert_eq!(
            frames(&payload),
            Ok(vec![
                Frame::Other(0),
                Frame::Other(0),
                Frame::Other(1),
                Frame::Other(3),
                Frame::Crypto {
                    offset: 16,
                    data: &[0xaa, 0xbb]
                },
            ])
        );
    }

    #[test]
    fn stream_frames_and_cut_frames_are_typed_errors() {
        assert_eq!(frames(&[0x08, 0x00]), Err(QuicError::UnexpectedFrame(0x08)));
        assert_eq!(
            frames(&[0x06, 0x00, 0x05, 0x01]),
            Err(QuicError::Truncated {
                field: "CRYPTO data"
            })
        );
        assert_eq!(
            frames(&[0x02, 0x00, 0x00, 0xbf]),
            Err(QuicError::Truncated {
                field: "ACK range count"
            })
        );
    }
}
