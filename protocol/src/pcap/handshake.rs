//! The cleartext TLS handshake in reassembled streams: the ClientHello records the client sent
//! (every record up to the complete message, and a second ClientHello after a
//! HelloRetryRequest), the records that follow them, and the ServerHello's version, suite and
//! random.
//!
//! The ClientHello need not start the stream: a client may speak HTTP `CONNECT` or SOCKS first,
//! so the first record header that announces a ClientHello within [`MAX_SCAN`] bytes is taken.

use crate::codec::Reader;

/// How far into a stream we look for the first handshake record.
const MAX_SCAN: usize = 64 * 1024;
/// Largest record length accepted: TLSCiphertext may carry 2^14 + 256 bytes (RFC 8446 section
/// 5.2); TLS 1.2 allows 2^14 + 2048 (RFC 5246 section 6.2.3), the bound used here.
const MAX_RECORD_LEN: usize = (1 << 14) + 2048;
/// Most handshake bytes gathered for one hello message (a ClientHello with a big post-quantum
/// key share is ~1.8 KiB; the record layer allows a message to span records, so be generous).
const MAX_HELLO_LEN: usize = 64 * 1024;

/// Record content types (RFC 8446 section 5.1).
pub(crate) const CHANGE_CIPHER_SPEC: u8 = 0x14;
pub(crate) const ALERT: u8 = 0x15;
pub(crate) const HANDSHAKE: u8 = 0x16;
pub(crate) const APPLICATION_DATA: u8 = 0x17;

/// Handshake message types (RFC 8446 section 4).
const CLIENT_HELLO: u8 = 0x01;
const SERVER_HELLO: u8 = 0x02;
/// Extension `supported_versions` (RFC 8446 section 4.2.1).
const SUPPORTED_VERSIONS: u16 = 0x002b;
/// Extension `application_layer_protocol_negotiation` (RFC 7301 section 3.1).
const ALPN: u16 = 0x0010;
/// The ServerHello random that marks a HelloRetryRequest (RFC 8446 section 4.1.3).
const HELLO_RETRY_REQUEST_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// One TLS record as it was on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    /// The 5-byte header: content type, legacy version, length.
    pub(crate) header: [u8; 5],
    /// The record body.
    pub(crate) body: &'a [u8],
}

impl Record<'_> {
    pub(crate) fn content_type(&self) -> u8 {
        let [content_type, ..] = self.header;
        content_type
    }
}

/// Splits `stream` into records, stopping at the first incomplete or implausible one.
pub(crate) fn records(stream: &[u8]) -> impl Iterator<Item = (usize, Record<'_>)> + '_ {
    let mut r = Reader::new(stream);
    std::iter::from_fn(move || {
        let offset = r.offset();
        let mut peek = r.clone();
        let header: [u8; 5] = peek.take(5)?.try_into().ok()?;
        let [content_type, major, _, hi, lo] = header;
        let len = usize::from(u16::from_be_bytes([hi, lo]));
        if !(CHANGE_CIPHER_SPEC..=APPLICATION_DATA).contains(&content_type)
            || major != 0x03
            || len > MAX_RECORD_LEN
        {
            return None;
        }
        let body = peek.take(len)?;
        r = peek;
        Some((offset, Record { header, body }))
    })
}

/// Whether `bytes` start with a record header that announces a ClientHello.
fn starts_client_hello(bytes: &[u8]) -> bool {
    matches!(
        bytes,
        [HANDSHAKE, 0x03, 0x00..=0x04, _, _, CLIENT_HELLO, ..]
    )
}

/// What the client sent in the clear.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ClientFlight<'a> {
    /// Offset of the first ClientHello record in the stream.
    pub(crate) start: usize,
    /// Each ClientHello, as every record that carried it, header included.
    pub(crate) hellos: Vec<&'a [u8]>,
    /// The random of the first ClientHello, which keys the key log.
    pub(crate) random: Option<[u8; 32]>,
    /// The records after the last ClientHello.
    pub(crate) after: Vec<Record<'a>>,
}

/// Finds the ClientHello records in the client's stream.
pub(crate) fn client_flight(stream: &[u8]) -> Option<ClientFlight<'_>> {
    let scan = stream.len().min(MAX_SCAN);
    let start = (0..scan).find(|&at| stream.get(at..).is_some_and(starts_client_hello))?;
    let tail = stream.get(start..)?;
    let mut flight = ClientFlight {
        start,
        ..ClientFlight::default()
    };
    // Handshake bytes of the hello being gathered, and the offset where its records began.
    let mut pending: Option<(usize, Vec<u8>)> = None;
    let mut hellos_done = false;
    for (offset, record) in records(tail) {
        let end = offset + 5 + record.body.len();
        if hellos_done {
            if record.content_type() == HANDSHAKE
                && pending.is_none()
                && looks_like_client_hello(record.body)
            {
                // A second ClientHello, after a HelloRetryRequest (RFC 8446 section 4.1.4).
                flight.after.clear();
                hellos_done = false;
            } else {
                flight.after.push(record);
                continue;
            }
        }
        if record.content_type() != HANDSHAKE {
            break;
        }
        let (hello_start, buf) = pending.get_or_insert_with(|| (offset, Vec::new()));
        if buf.len() + record.body.len() > MAX_HELLO_LEN {
            break;
        }
        buf.extend_from_slice(record.body);
        let mut r = Reader::new(buf);
        let (Some(_), Some(len)) = (r.u8(), r.u24()) else {
            continue;
        };
        if r.remaining() < usize::try_from(len).unwrap_or(usize::MAX) {
            continue;
        }
        if let Some(raw) = tail.get(*hello_start..end) {
            flight.hellos.push(raw);
        }
        if flight.random.is_none() {
            flight.random = buf.get(6..38).and_then(|b| b.try_into().ok());
        }
        pending = None;
        hellos_done = true;
    }
    (!flight.hellos.is_empty()).then_some(flight)
}

/// Whether a handshake record body is a whole ClientHello (type, length and legacy version
/// agree), to tell a second ClientHello from an encrypted TLS 1.2 Finished.
fn looks_like_client_hello(body: &[u8]) -> bool {
    let mut r = Reader::new(body);
    let (Some(CLIENT_HELLO), Some(len), Some(0x0303)) = (r.u8(), r.u24(), r.u16()) else {
        return false;
    };
    usize::try_from(len).is_ok_and(|len| len + 4 == body.len())
}

/// What the ServerHello chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServerHello {
    /// The negotiated version: `supported_versions` if present, else `legacy_version`.
    pub(crate) version: u16,
    /// The cipher suite.
    pub(crate) cipher_suite: u16,
    /// The server random.
    pub(crate) random: [u8; 32],
    /// The protocol the server selected with ALPN, when the ServerHello carries it (TLS 1.2; TLS
    /// 1.3 moves it to the encrypted EncryptedExtensions).
    pub(crate) alpn: Option<Vec<u8>>,
}

/// What the server sent: its ServerHello and the records after it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ServerFlight<'a> {
    /// The ServerHello (not a HelloRetryRequest).
    pub(crate) hello: ServerHello,
    /// The records after the one that completed the ServerHello.
    pub(crate) after: Vec<Record<'a>>,
}

/// Finds the ServerHello (not a HelloRetryRequest) in the server's stream.
pub(crate) fn server_flight(stream: &[u8]) -> Option<ServerFlight<'_>> {
    let scan = stream.len().min(MAX_SCAN);
    let start = (0..scan).find(|&at| {
        matches!(
            stream.get(at..),
            Some([HANDSHAKE, 0x03, 0x00..=0x04, _, _, SERVER_HELLO, ..])
        )
    })?;
    let mut buf = Vec::new();
    let mut walk = records(stream.get(start..)?);
    while let Some((_, record)) = walk.next() {
        match record.content_type() {
            HANDSHAKE => {}
            CHANGE_CIPHER_SPEC => continue,
            _ => break,
        }
        if buf.len() + record.body.len() > MAX_HELLO_LEN {
            break;
        }
        buf.extend_from_slice(record.body);
        let mut r = Reader::new(&buf);
        while let (Some(kind), Some(len)) = (r.u8(), r.u24()) {
            let Some(body) = r.take(usize::try_from(len).unwrap_or(usize::MAX)) else {
                break;
            };
            if kind == SERVER_HELLO {
                match parse_server_hello(body) {
                    Some(hello) if hello.random != HELLO_RETRY_REQUEST_RANDOM => {
                        let after = walk.map(|(_, record)| record).collect();
                        return Some(ServerFlight { hello, after });
                    }
                    Some(_) => {}
                    None => return None,
                }
            }
        }
    }
    None
}

/// RFC 8446 section 4.1.3 (and RFC 5246 section 7.4.1.3, whose extensions are optional).
fn parse_server_hello(body: &[u8]) -> Option<ServerHello> {
    let mut r = Reader::new(body);
    let legacy_version = r.u16()?;
    let random: [u8; 32] = r.take(32)?.try_into().ok()?;
    r.sub_u8()?; // legacy_session_id_echo
    let cipher_suite = r.u16()?;
    r.u8()?; // legacy_compression_method
    let mut version = legacy_version;
    let mut alpn = None;
    if !r.is_empty() {
        let mut extensions = r.sub_u16()?;
        while !extensions.is_empty() {
            let kind = extensions.u16()?;
            let mut data = extensions.sub_u16()?;
            if kind == SUPPORTED_VERSIONS {
                version = data.u16()?;
            } else if kind == ALPN {
                // ProtocolNameList with exactly one name in a ServerHello (RFC 7301 section 3.1).
                alpn = data
                    .sub_u16()?
                    .sub_u8()
                    .map(|mut name| name.rest().to_vec());
            }
        }
    }
    Some(ServerHello {
        version,
        cipher_suite,
        random,
        alpn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(content_type: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![content_type, 0x03, 0x01];
        out.extend_from_slice(&u16::try_from(body.len()).unwrap_or(0).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    fn client_hello_message(random: u8) -> Vec<u8> {
        let mut body = vec![0x03, 0x03];
        body.extend_from_slice(&[random; 32]);
        body.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
        let mut message = vec![CLIENT_HELLO, 0, 0, u8::try_from(body.len()).unwrap_or(0)];
        message.extend_from_slice(&body);
        message
    }

    #[test]
    fn hello_split_over_two_records_after_a_connect_head() {
        let message = client_hello_message(7);
        let (a, b) = message.split_at(10);
        let mut stream = b"CONNECT x:443 HTTP/1.1\r\n\r\n".to_vec();
        let head = stream.len();
        stream.extend(record(HANDSHAKE, a));
        stream.extend(record(HANDSHAKE, b));
        let hello_end = stream.len();
        stream.extend(record(CHANGE_CIPHER_SPEC, &[1]));
        stream.extend(record(APPLICATION_DATA, &[9; 20]));
        let flight = client_flight(&stream).expect("a ClientHello");
        assert_eq!(flight.start, head);
        assert_eq!(flight.hellos, vec![&stream[head..hello_end]]);
        assert_eq!(flight.random, Some([7; 32]));
        let types: Vec<u8> = flight.after.iter().map(Record::content_type).collect();
        assert_eq!(types, vec![CHANGE_CIPHER_SPEC, APPLICATION_DATA]);
    }

    #[test]
    fn second_hello_after_retry() {
        let mut stream = record(HANDSHAKE, &client_hello_message(1));
        stream.extend(record(CHANGE_CIPHER_SPEC, &[1]));
        stream.extend(record(HANDSHAKE, &client_hello_message(1)));
        stream.extend(record(APPLICATION_DATA, &[9; 20]));
        let flight = client_flight(&stream).expect("two ClientHellos");
        assert_eq!(flight.hellos.len(), 2);
        assert_eq!(flight.after.len(), 1);
    }

    #[test]
    fn server_hello_skips_retry_request() {
        let sh = |random: [u8; 32]| {
            let mut body = vec![0x03, 0x03];
            body.extend_from_slice(&random);
            body.extend_from_slice(&[0, 0x13, 0x02, 0, 0, 6, 0, 0x2b, 0, 2, 0x03, 0x04]);
            let mut message = vec![SERVER_HELLO, 0, 0, u8::try_from(body.len()).unwrap_or(0)];
            message.extend_from_slice(&body);
            record(HANDSHAKE, &message)
        };
        let mut stream = sh(HELLO_RETRY_REQUEST_RANDOM);
        stream.extend(record(CHANGE_CIPHER_SPEC, &[1]));
        stream.extend(sh([5; 32]));
        stream.extend(record(APPLICATION_DATA, &[1; 20]));
        let flight = server_flight(&stream).expect("a ServerHello");
        assert_eq!(flight.after.len(), 1);
        assert_eq!(
            flight.hello,
            ServerHello {
                version: 0x0304,
                cipher_suite: 0x1302,
                random: [5; 32],
                alpn: None,
            }
        );
    }
}
