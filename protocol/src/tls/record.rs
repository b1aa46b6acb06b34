//! The TLS record layer, as far as a ClientHello needs it (RFC 8446 section 5.1).
//!
//! Two jobs: [`scan`] tells the socket capture how many bytes make up the records that carry the
//! complete ClientHello (so it can stop reading and replay them), and [`handshake_message`]
//! reassembles the handshake message from one or several records (or accepts a bare handshake
//! message) for the parser. Both share one walk over the record headers, so the capture and the
//! parser can never disagree on where the hello ends.

use std::borrow::Cow;

use super::error::TlsError;
use crate::codec::Reader;

/// Largest record length accepted: 2^14 + 256 (RFC 8446 section 5.1 allows 2^14 for plaintext;
/// the extra 256 is the TLSCiphertext allowance, kept as slack for odd stacks).
pub const MAX_RECORD_LEN: usize = (1 << 14) + 256;

/// Default cap on the ClientHello handshake message length used by [`scan`]: 64 KiB.
///
/// Real hellos are well under 4 KiB (a post-quantum Chrome hello is about 1.8 KiB).
pub const DEFAULT_MAX_HELLO_LEN: usize = 64 * 1024;

/// Record content type of handshake records.
const CONTENT_HANDSHAKE: u8 = 22;
/// Handshake message type of ClientHello.
const HANDSHAKE_CLIENT_HELLO: u8 = 1;
/// Record header: type(1) version(2) length(2).
const RECORD_HEADER_LEN: usize = 5;
/// Handshake header: type(1) length(3).
const HANDSHAKE_HEADER_LEN: usize = 4;

/// What the bytes read so far from a socket amount to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HelloScan {
    /// The ClientHello is not complete yet: read until the buffer holds at least `at_least`
    /// bytes **in total** (not additional bytes), then scan again.
    NeedMore {
        /// Minimum total buffer length before scanning again can make progress.
        at_least: usize,
    },
    /// The first `len` bytes are whole handshake records that contain the complete ClientHello
    /// handshake message. Bytes after `len` belong to later records (and must be replayed too).
    Complete {
        /// Byte length of the records carrying the ClientHello.
        len: usize,
    },
    /// These bytes can never become a TLS ClientHello.
    Invalid(TlsError),
}

/// Scans socket bytes for a complete ClientHello, with [`DEFAULT_MAX_HELLO_LEN`] as the cap.
pub fn scan(buf: &[u8]) -> HelloScan {
    scan_capped(buf, DEFAULT_MAX_HELLO_LEN)
}

/// Scans socket bytes for a complete ClientHello whose handshake message (body, without its
/// 4-byte header) may be at most `max_hello_len` bytes.
///
/// Errors are reported as early as the bytes allow: the first byte decides TLS / SSLv2 / other,
/// each record header is checked when its 5 bytes are in, the handshake type and length as soon
/// as the first 4 handshake bytes are in. A prefix of a valid hello is therefore always
/// [`HelloScan::NeedMore`].
pub fn scan_capped(buf: &[u8], max_hello_len: usize) -> HelloScan {
    match walk(buf, max_hello_len) {
        Ok(Walk::Complete { len, .. }) => HelloScan::Complete { len },
        Ok(Walk::NeedMore { at_least }) => HelloScan::NeedMore { at_least },
        Err(err) => HelloScan::Invalid(err),
    }
}

/// Classifies a first byte that is not a handshake record (22) nor, for the parser, a bare
/// handshake message.
fn classify_first(buf: &[u8]) -> Result<(), TlsError> {
    let mut r = Reader::new(buf);
    let Some(first) = r.u8() else {
        return Err(TlsError::Empty);
    };
    if first & 0x80 != 0 {
        // SSLv2 two-byte record header, then the message type (1 = CLIENT-HELLO).
        let _len_low = r.u8();
        return match r.u8() {
            Some(HANDSHAKE_CLIENT_HELLO) => Err(TlsError::Sslv2Hello),
            _ => Err(TlsError::NotTls { first }),
        };
    }
    match first {
        CONTENT_HANDSHAKE => Ok(()),
        // change_cipher_spec, alert, application_data, heartbeat.
        20 | 21 | 23 | 24 => Err(TlsError::NotHandshakeRecord {
            content_type: first,
        }),
        _ => Err(TlsError::NotTls { first }),
    }
}

/// Result of walking the record headers.
enum Walk {
    NeedMore {
        at_least: usize,
    },
    Complete {
        /// Bytes of the records that carry the hello.
        len: usize,
        /// Number of those records.
        records: usize,
        /// Handshake message length including its 4-byte header.
        message_len: usize,
    },
}

/// Walks record headers from the start of `buf` until the ClientHello handshake message is
/// complete, checking each record and the handshake header on the way.
fn walk(buf: &[u8], max_hello_len: usize) -> Result<Walk, TlsError> {
    if buf.is_empty() {
        return Ok(Walk::NeedMore { at_least: 1 });
    }
    if let Err(err) = classify_first(buf) {
        // An SSLv2 header needs 3 bytes to be told apart from garbage.
        if matches!(err, TlsError::NotTls { first } if first & 0x80 != 0) && buf.len() < 3 {
            return Ok(Walk::NeedMore { at_least: 3 });
        }
        return Err(err);
    }
    let mut r = Reader::new(buf);
    // First bytes of the handshake message, until its header is known.
    let mut header = [0u8; HANDSHAKE_HEADER_LEN];
    let mut header_have = 0usize;
    // Handshake message bytes (header included) seen in complete records.
    let mut message_have = 0usize;
    let mut message_len: Option<usize> = None;
    let mut records = 0usize;
    loop {
        let record_start = r.offset();
        let Some(mut head) = r.sub(RECORD_HEADER_LEN) else {
            return Ok(Walk::NeedMore {
                at_least: record_start + RECORD_HEADER_LEN,
            });
        };
        let (Some(content_type), Some(version), Some(len)) = (head.u8(), head.u16(), head.u16())
        else {
            return Err(TlsError::Truncated {
                field: "record header",
            });
        };
        if content_type != CONTENT_HANDSHAKE {
            return Err(TlsError::NotHandshakeRecord { content_type });
        }
        if version >> 8 != 3 {
            return Err(TlsError::BadRecordVersion { version });
        }
        let len = usize::from(len);
        if len > MAX_RECORD_LEN {
            return Err(TlsError::RecordTooLong { len });
        }
        if len == 0 {
            return Err(TlsError::EmptyRecord);
        }
        let record_end = record_start + RECORD_HEADER_LEN + len;
        // Look at what is already there of this fragment, to judge the header early.
        let available = r.remaining().min(len);
        let mut fragment = Reader::new(r.take(available).unwrap_or_default());
        while header_have < HANDSHAKE_HEADER_LEN {
            let Some(byte) = fragment.u8() else { break };
            if let Some(slot) = header.get_mut(header_have) {
                *slot = byte;
            }
            header_have += 1;
            if header_have == 1 && byte != HANDSHAKE_CLIENT_HELLO {
                return Err(TlsError::NotClientHello {
                    handshake_type: byte,
                });
            }
            if header_have == HANDSHAKE_HEADER_LEN {
                let [_, a, b, c] = header;
                let body = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
                if body > max_hello_len {
                    return Err(TlsError::HandshakeTooLong {
                        len: body,
                        cap: max_hello_len,
                    });
                }
                message_len = Some(HANDSHAKE_HEADER_LEN + body);
            }
        }
        if available < len {
            return Ok(Walk::NeedMore {
                at_least: record_end,
            });
        }
        records += 1;
        message_have += len;
        if let Some(message_len) = message_len {
            if message_have >= message_len {
                return Ok(Walk::Complete {
                    len: record_end,
                    records,
                    message_len,
                });
            }
        }
    }
}

/// The fragment of the next record. The walk checked every header; this only re-reads
/// type(1) version(2) length(2) and the fragment.
fn fragment<'a>(r: &mut Reader<'a>) -> Option<&'a [u8]> {
    r.take(3)?;
    let len = r.u16()?;
    r.take(usize::from(len))
}

/// The ClientHello handshake message (4-byte header included) from `input`: either a bare
/// handshake message (first byte `0x01`) or TLS records (first byte `0x16`), reassembled when it
/// spans several records.
///
/// Strict about leftovers: bytes after the message inside its last record, or records after
/// the ones carrying it, are [`TlsError::TrailingData`]. Pass exactly the bytes
/// [`HelloScan::Complete`] reported.
pub(crate) fn handshake_message(input: &[u8]) -> Result<Cow<'_, [u8]>, TlsError> {
    if input.is_empty() {
        return Err(TlsError::Empty);
    }
    let mut r = Reader::new(input);
    if r.u8() == Some(HANDSHAKE_CLIENT_HELLO) {
        let Some(body) = r.u24() else {
            return Err(TlsError::Truncated {
                field: "handshake header",
            });
        };
        let body = usize::try_from(body).unwrap_or(usize::MAX);
        if r.take(body).is_none() {
            return Err(TlsError::Truncated {
                field: "handshake message",
            });
        }
        if !r.is_empty() {
            return Err(TlsError::TrailingData {
                field: "handshake message",
                len: r.remaining(),
            });
        }
        return Ok(Cow::Borrowed(input));
    }
    let (len, records, message_len) = match walk(input, usize::MAX)? {
        Walk::NeedMore { .. } => {
            return Err(TlsError::Truncated {
                field: "TLS records",
            })
        }
        Walk::Complete {
            len,
            records,
            message_len,
        } => (len, records, message_len),
    };
    if len < input.len() {
        return Err(TlsError::TrailingData {
            field: "ClientHello records",
            len: input.len() - len,
        });
    }
    let mut r = Reader::new(input);
    let message = if records == 1 {
        let Some(fragment) = fragment(&mut r) else {
            return Err(TlsError::Truncated { field: "record" });
        };
        Cow::Borrowed(fragment)
    } else {
        let mut joined = Vec::with_capacity(message_len);
        while !r.is_empty() {
            let Some(fragment) = fragment(&mut r) else {
                return Err(TlsError::Truncated { field: "record" });
            };
            joined.extend_from_slice(fragment);
        }
        Cow::Owned(joined)
    };
    if message.len() > message_len {
        return Err(TlsError::TrailingData {
            field: "handshake message",
            len: message.len() - message_len,
        });
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny ClientHello-shaped handshake message: type 1, body of `body` bytes.
    fn message(body: usize) -> Vec<u8> {
        let mut m = vec![1, 0, (body >> 8) as u8, body as u8];
        m.extend(std::iter::repeat_n(0xab, body));
        m
    }

    fn records(message: &[u8], sizes: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = message;
        for &size in sizes {
            let (frag, tail) = rest.split_at(size.min(rest.len()));
            out.extend_from_slice(&[22, 3, 1, (frag.len() >> 8) as u8, frag.len() as u8]);
            out.extend_from_slice(frag);
            rest = tail;
        }
        assert!(rest.is_empty(), "sizes must cover the message");
        out
    }

    #[test]
    fn scan_single_and_fragmented() {
        let m = message(100);
        let one = records(&m, &[m.len()]);
        assert_eq!(scan(&one), HelloScan::Complete { len: one.len() });
        let three = records(&m, &[2, 50, 52]);
        assert_eq!(scan(&three), HelloScan::Complete { len: three.len() });
        // Bytes of a later record after the hello are not part of `len`.
        let mut more = three.clone();
        more.extend_from_slice(&[20, 3, 3, 0, 1, 1]);
        assert_eq!(scan(&more), HelloScan::Complete { len: three.len() });
        assert_eq!(
            handshake_message(&three).map(|c| c.into_owned()),
            Ok(m.clone())
        );
        assert!(matches!(
            handshake_message(&more),
            Err(TlsError::TrailingData { .. })
        ));
        for cut in 0..three.len() {
            assert!(
                matches!(scan(&three[..cut]), HelloScan::NeedMore { at_least } if at_least > cut),
                "prefix {cut}"
            );
        }
    }

    #[test]
    fn scan_rejects_early() {
        assert_eq!(
            scan(&[0x80, 0x2e, 0x01]),
            HelloScan::Invalid(TlsError::Sslv2Hello)
        );
        assert_eq!(
            scan(&[23, 3, 3]),
            HelloScan::Invalid(TlsError::NotHandshakeRecord { content_type: 23 })
        );
        assert_eq!(
            scan(b"GET / HTTP/1.1\r\n"),
            HelloScan::Invalid(TlsError::NotTls { first: b'G' })
        );
        assert_eq!(
            scan(&[22, 3, 1, 0x41, 0x01]),
            HelloScan::Invalid(TlsError::RecordTooLong { len: 0x4101 })
        );
        assert_eq!(
            scan(&[22, 3, 1, 0, 4, 2]),
            HelloScan::Invalid(TlsError::NotClientHello { handshake_type: 2 })
        );
        assert_eq!(
            scan_capped(&[22, 3, 1, 0, 4, 1, 0, 1, 0], 255),
            HelloScan::Invalid(TlsError::HandshakeTooLong { len: 256, cap: 255 })
        );
        assert_eq!(
            scan(&[22, 3, 1, 0, 0]),
            HelloScan::Invalid(TlsError::EmptyRecord)
        );
        // A handshake record interleaved with something else before the hello completes.
        let m = message(10);
        let mut bad = records(&m, &[4, 10]);
        bad.truncate(9);
        bad.extend_from_slice(&[21, 3, 3, 0, 2, 2, 40]);
        assert_eq!(
            scan(&bad),
            HelloScan::Invalid(TlsError::NotHandshakeRecord { content_type: 21 })
        );
    }
}
