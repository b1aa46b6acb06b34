//! The PROXY protocol header a trusted load balancer puts before the client's bytes
//! (`--proxy-protocol-from`): version 1 (text) or version 2 (binary), as specified in haproxy's
//! `doc/proxy-protocol.txt` (<https://www.haproxy.org/download/2.6/doc/proxy-protocol.txt>).
//!
//! The header is parsed by the maintained `ppp` crate; this module owns only the reading (under
//! the caller's deadline, into a caller-owned buffer, never more than [`HEADER_CAP`] bytes) and
//! the typed outcome. What follows the header in the buffer is the start of the ClientHello and
//! is handed on to the hello reader untouched, so rustls sees the client's stream unchanged.

use std::io;
use std::net::SocketAddr;

use exitvoice_schema::Failure;
use ppp::v2::{Addresses as V2Addresses, Command, Protocol};
use ppp::{v1, v2, HeaderResult, PartialResult};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Longest PROXY header accepted. A v1 header is at most 107 bytes (spec section 2.1); a v2
/// header is 16 bytes plus its announced length (section 2.2), which may reach 64 KiB. The
/// addresses take at most 216 bytes (two UNIX paths) and the TLVs load balancers send (AWS
/// NLB's VPC endpoint id, haproxy's unique id or SSL summary) a few hundred: 1 KiB leaves room
/// for them and keeps one relayed connection's pre-TLS buffer small.
pub(crate) const HEADER_CAP: usize = 1024;

/// Bytes that open a v2 header (spec section 2.2).
const V2_SIGNATURE: &[u8] = v2::PROTOCOL_PREFIX;
/// Bytes that open a v1 header (spec section 2.1).
const V1_SIGNATURE: &[u8] = b"PROXY ";
/// Bytes of a signature that mark a connection as trying to speak the PROXY protocol: five is
/// what the ClientHello reader has read when it gives up on a first byte that is not TLS.
const SIGNATURE_EVIDENCE: usize = 5;

/// Why no usable PROXY header was read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The connection does not start with either signature (a client connecting directly to a
    /// port that expects a load balancer).
    #[error("no PROXY protocol signature")]
    Missing,
    /// A v1 header that does not parse.
    #[error("PROXY v1: {0}")]
    V1(v1::BinaryParseError),
    /// A v2 header that does not parse.
    #[error("PROXY v2: {0}")]
    V2(v2::ParseError),
    /// A v2 header for a datagram (UDP) flow, on our TCP listener.
    #[error("PROXY v2 header for a datagram flow")]
    Datagram,
    /// The header needs more than [`HEADER_CAP`] bytes.
    #[error("PROXY header needs at least {needed} bytes, over the cap of {cap}")]
    TooLarge {
        /// Bytes the header needs, at least.
        needed: usize,
        /// The cap in force.
        cap: usize,
    },
    /// A v2 `LOCAL` command, a v1 `UNKNOWN` protocol, or a v2 address family that is not IPv4
    /// or IPv6 (`UNSPEC`, `UNIX`): the header carries no client address to report.
    #[error("PROXY header without a client address ({0})")]
    NoAddress(&'static str),
    /// The peer closed before the header was complete.
    #[error("peer closed after {received} bytes, before a complete PROXY header")]
    Closed {
        /// Bytes received before the close.
        received: usize,
    },
    /// Reading the socket failed.
    #[error("socket error while reading the PROXY header: {0}")]
    Io(#[from] io::Error),
}

impl ProxyError {
    /// The typed reason, for counters and stored observations.
    pub fn failure(&self) -> Failure {
        match self {
            Self::Missing | Self::V1(_) | Self::V2(_) | Self::Datagram => Failure::ProxyMalformed,
            Self::TooLarge { .. } => Failure::ProxyTooLarge,
            Self::NoAddress(_) => Failure::ProxyLocal,
            Self::Closed { .. } | Self::Io(_) => Failure::ProxyTruncated,
        }
    }
}

/// What parsing the bytes read so far says.
#[derive(Debug)]
enum Scan {
    /// A whole header of `len` bytes, carrying the client's address.
    Complete { len: usize, client: SocketAddr },
    /// Not yet a whole header: read more.
    NeedMore,
    /// It will never be a usable header.
    Invalid(ProxyError),
}

/// Parses the start of `buf` as a PROXY header.
fn scan(buf: &[u8]) -> Scan {
    if !buf.is_empty() && !V2_SIGNATURE.starts_with(prefix(buf, V2_SIGNATURE.len())) {
        // Not v2: v1 or nothing. `ppp` would try both, but says only "invalid prefix" for bytes
        // that are neither.
        if !V1_SIGNATURE.starts_with(prefix(buf, V1_SIGNATURE.len())) {
            return Scan::Invalid(ProxyError::Missing);
        }
    }
    match HeaderResult::parse(buf) {
        result if result.is_incomplete() => {
            // A v2 header announces its length up front (spec section 2.2): refuse one over the
            // cap before waiting for it. A v1 header over 107 bytes is `HeaderTooLong` below.
            if let HeaderResult::V2(Err(v2::ParseError::Partial(_, announced))) = result {
                let needed = announced.saturating_add(16);
                if needed > HEADER_CAP {
                    return Scan::Invalid(ProxyError::TooLarge {
                        needed,
                        cap: HEADER_CAP,
                    });
                }
            }
            if buf.len() >= HEADER_CAP {
                return Scan::Invalid(ProxyError::TooLarge {
                    needed: buf.len() + 1,
                    cap: HEADER_CAP,
                });
            }
            Scan::NeedMore
        }
        HeaderResult::V1(Ok(header)) => match header.addresses {
            v1::Addresses::Tcp4(ip) => Scan::Complete {
                len: header.header.len(),
                client: SocketAddr::new(ip.source_address.into(), ip.source_port),
            },
            v1::Addresses::Tcp6(ip) => Scan::Complete {
                len: header.header.len(),
                client: SocketAddr::new(ip.source_address.into(), ip.source_port),
            },
            // "UNKNOWN": the sender could not tell the addresses (spec section 2.1).
            v1::Addresses::Unknown => Scan::Invalid(ProxyError::NoAddress("v1 UNKNOWN")),
        },
        HeaderResult::V1(Err(v1::BinaryParseError::Parse(v1::ParseError::HeaderTooLong))) => {
            Scan::Invalid(ProxyError::TooLarge {
                needed: buf.len().max(108),
                cap: 107,
            })
        }
        HeaderResult::V1(Err(error)) => Scan::Invalid(ProxyError::V1(error)),
        HeaderResult::V2(Err(error)) => Scan::Invalid(ProxyError::V2(error)),
        HeaderResult::V2(Ok(header)) => {
            // LOCAL: "the connection was established on purpose by the proxy without being
            // relayed" (a health check; spec section 2.2): there is no client to report.
            if header.command == Command::Local {
                return Scan::Invalid(ProxyError::NoAddress("v2 LOCAL"));
            }
            if header.protocol == Protocol::Datagram {
                return Scan::Invalid(ProxyError::Datagram);
            }
            let client = match header.addresses {
                V2Addresses::IPv4(ip) => SocketAddr::new(ip.source_address.into(), ip.source_port),
                V2Addresses::IPv6(ip) => SocketAddr::new(ip.source_address.into(), ip.source_port),
                V2Addresses::Unspecified => {
                    return Scan::Invalid(ProxyError::NoAddress("v2 UNSPEC"))
                }
                V2Addresses::Unix(_) => return Scan::Invalid(ProxyError::NoAddress("v2 UNIX")),
            };
            Scan::Complete {
                len: header.len(),
                client,
            }
        }
    }
}

/// At most the first `len` bytes of `buf`.
fn prefix(buf: &[u8], len: usize) -> &[u8] {
    buf.get(..len).unwrap_or(buf)
}

/// Whether `bytes` (the first bytes of a connection) open a PROXY header: at least five bytes of
/// the v1 or v2 signature, or all of one. Used on connections from untrusted sources, whose
/// header is refused, never read.
pub(crate) fn looks_like_header(bytes: &[u8]) -> bool {
    [V1_SIGNATURE, V2_SIGNATURE].iter().any(|signature| {
        let seen = bytes.len().min(signature.len());
        seen >= SIGNATURE_EVIDENCE && bytes.get(..seen) == signature.get(..seen)
    })
}

/// Whether a connection whose first bytes are `buf` (not a ClientHello) is opening a PROXY
/// header. The ClientHello reader gives up on the first byte that cannot start a TLS record, so
/// while `buf` is a shorter prefix of a signature this reads on, to [`SIGNATURE_EVIDENCE`]
/// bytes at most, then asks [`looks_like_header`]. Run it under the handshake deadline.
pub(crate) async fn opens_header<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>) -> bool {
    let could_be = |buf: &[u8]| {
        [V1_SIGNATURE, V2_SIGNATURE]
            .iter()
            .any(|signature| signature.starts_with(buf))
    };
    while buf.len() < SIGNATURE_EVIDENCE && could_be(buf) {
        let mut chunk = [0_u8; SIGNATURE_EVIDENCE];
        let want = SIGNATURE_EVIDENCE - buf.len();
        match stream.read(chunk.get_mut(..want).unwrap_or_default()).await {
            Ok(read) if read > 0 => buf.extend_from_slice(chunk.get(..read).unwrap_or_default()),
            _ => break,
        }
    }
    looks_like_header(buf)
}

/// Reads a PROXY header from `stream` into `buf` and returns the client address it carries;
/// the header's bytes are removed from `buf`, which keeps whatever the peer sent after it (the
/// start of the ClientHello).
///
/// Never reads more than [`HEADER_CAP`] bytes. Run it under the handshake deadline: it waits as
/// long as the peer keeps the header incomplete.
///
/// # Errors
/// [`ProxyError`] when the peer closes early, the bytes are not a header, the header is over the
/// cap or carries no client address, or the socket fails. `buf` keeps whatever was read.
pub(crate) async fn read_header<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
) -> Result<SocketAddr, ProxyError> {
    loop {
        match scan(buf) {
            Scan::Complete { len, client } => {
                buf.drain(..len.min(buf.len()));
                return Ok(client);
            }
            Scan::Invalid(error) => return Err(error),
            Scan::NeedMore => {}
        }
        // Read into a scratch buffer, never into `buf` itself: if the deadline cancels this
        // future mid-read, `buf` must hold exactly the bytes received.
        let mut chunk = vec![0_u8; HEADER_CAP.saturating_sub(buf.len()).max(1)];
        let read = stream.read(&mut chunk).await?;
        let start = buf.len();
        buf.extend_from_slice(chunk.get(..read).unwrap_or_default());
        if read == 0 {
            return Err(ProxyError::Closed { received: start });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v2 header: signature, version 2 with `command`, `family_protocol`, then `payload`.
    fn v2_header(command: u8, family_protocol: u8, payload: &[u8]) -> Vec<u8> {
        let mut header = V2_SIGNATURE.to_vec();
        header.push(0x20 | command);
        header.push(family_protocol);
        let len = u16::try_from(payload.len()).expect("small payload");
        header.extend(len.to_be_bytes());
        header.extend(payload);
        header
    }

    /// The address block of a TCP over IPv4 v2 header (spec section 2.2).
    #[rustfmt::skip]
    const V2_TCP4_ADDRESSES: &[u8] = &[
        198, 51, 100, 7,  // source address
        127, 0, 0, 1,     // destination address
        0xd4, 0x31,       // source port 54321
        0x20, 0xfb,       // destination port 8443
    ];

    async fn read_all(wire: &[u8]) -> (Result<SocketAddr, ProxyError>, Vec<u8>) {
        let mut stream = wire;
        let mut buf = Vec::new();
        let result = read_header(&mut stream, &mut buf).await;
        (result, buf)
    }

    #[tokio::test]
    async fn v1_and_v2_headers_give_the_client_and_keep_the_bytes_after_them() {
        let mut wire = b"PROXY TCP4 198.51.100.7 127.0.0.1 54321 8443\r\n".to_vec();
        wire.extend([0x16, 0x03, 0x01]);
        let (client, rest) = read_all(&wire).await;
        assert_eq!(
            client.expect("v1"),
            "198.51.100.7:54321".parse().expect("addr")
        );
        assert_eq!(rest, [0x16, 0x03, 0x01]);

        let (client, rest) = read_all(b"PROXY TCP6 2001:db8::7 ::1 443 8443\r\n\x16\x03\x03").await;
        assert_eq!(
            client.expect("v1 tcp6"),
            "[2001:db8::7]:443".parse().expect("addr")
        );
        assert_eq!(rest, [0x16, 0x03, 0x03]);

        let mut wire = v2_header(0x1, 0x11, V2_TCP4_ADDRESSES);
        wire.extend([0x16, 0x03]);
        let (client, rest) = read_all(&wire).await;
        assert_eq!(
            client.expect("v2"),
            "198.51.100.7:54321".parse().expect("addr")
        );
        assert_eq!(rest, [0x16, 0x03]);
    }

    #[tokio::test]
    async fn a_header_trickled_byte_by_byte_is_read_whole() {
        let wire = v2_header(0x1, 0x11, V2_TCP4_ADDRESSES);
        let (mut client, mut server) = tokio::io::duplex(64);
        let sent = wire.clone();
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for byte in sent {
                client.write_all(&[byte]).await.expect("write");
                tokio::task::yield_now().await;
            }
            client
        });
        let mut buf = Vec::new();
        let client = read_header(&mut server, &mut buf).await.expect("header");
        assert_eq!(client.port(), 54321);
        assert!(buf.is_empty());
        drop(writer.await.expect("writer"));
    }

    /// One row per hostile header: the bytes, and the typed reason they must give.
    #[tokio::test]
    async fn hostile_headers_get_typed_reasons() {
        let mut v2_with_tlvs = v2_header(0x1, 0x11, &[0; 2000]);
        v2_with_tlvs.truncate(40);
        let cases: Vec<(&str, Vec<u8>, Failure)> = vec![
            (
                "TLS without a header",
                vec![0x16, 0x03, 0x01, 0x02, 0x00],
                Failure::ProxyMalformed,
            ),
            (
                "HTTP without a header",
                b"GET / HTTP/1.1\r\n".to_vec(),
                Failure::ProxyMalformed,
            ),
            (
                "v1 bad address",
                b"PROXY TCP4 999.1.1.1 127.0.0.1 1 2\r\n".to_vec(),
                Failure::ProxyMalformed,
            ),
            (
                "v1 leading zero port",
                b"PROXY TCP4 1.1.1.1 127.0.0.1 01 2\r\n".to_vec(),
                Failure::ProxyMalformed,
            ),
            (
                "v1 bad protocol",
                b"PROXY UDP4 1.1.1.1 127.0.0.1 1 2\r\n".to_vec(),
                Failure::ProxyMalformed,
            ),
            (
                "v1 not UTF-8",
                b"PROXY TCP4 \xff\xfe 1 2\r\n".to_vec(),
                Failure::ProxyMalformed,
            ),
            (
                "v1 LF without CR",
                b"PROXY TCP4 1.1.1.1 127.0.0.1 1 2\nmore".to_vec(),
                Failure::ProxyMalformed,
            ),
            (
                "v2 version 1",
                {
                    let mut h = v2_header(0x1, 0x11, V2_TCP4_ADDRESSES);
                    h[12] = 0x11;
                    h
                },
                Failure::ProxyMalformed,
            ),
            (
                "v2 command 0xf",
                v2_header(0xf, 0x11, V2_TCP4_ADDRESSES),
                Failure::ProxyMalformed,
            ),
            (
                "v2 family 0x4",
                v2_header(0x1, 0x41, V2_TCP4_ADDRESSES),
                Failure::ProxyMalformed,
            ),
            (
                "v2 length under the addresses",
                v2_header(0x1, 0x11, &[1, 2, 3]),
                Failure::ProxyMalformed,
            ),
            (
                "v2 datagram",
                v2_header(0x1, 0x12, V2_TCP4_ADDRESSES),
                Failure::ProxyMalformed,
            ),
            (
                "v1 over 107 bytes",
                [b"PROXY TCP4 ".as_slice(), &[b'1'; 200]].concat(),
                Failure::ProxyTooLarge,
            ),
            (
                "v2 announcing 2000 bytes",
                v2_with_tlvs,
                Failure::ProxyTooLarge,
            ),
            ("v2 LOCAL", v2_header(0x0, 0x00, &[]), Failure::ProxyLocal),
            ("v2 UNSPEC", v2_header(0x1, 0x00, &[]), Failure::ProxyLocal),
            (
                "v2 UNIX",
                v2_header(0x1, 0x31, &[0; 216]),
                Failure::ProxyLocal,
            ),
            (
                "v1 UNKNOWN",
                b"PROXY UNKNOWN\r\n".to_vec(),
                Failure::ProxyLocal,
            ),
            (
                "v1 cut short",
                b"PROXY TCP4 198.51.100.7 127.0".to_vec(),
                Failure::ProxyTruncated,
            ),
            (
                "v2 cut short",
                v2_header(0x1, 0x11, V2_TCP4_ADDRESSES)[..20].to_vec(),
                Failure::ProxyTruncated,
            ),
            ("nothing at all", Vec::new(), Failure::ProxyTruncated),
        ];
        for (name, wire, want) in cases {
            let (result, _) = read_all(&wire).await;
            let error = result.expect_err(name);
            assert_eq!(error.failure(), want, "{name}: {error}");
        }
    }

    #[test]
    fn signature_evidence_needs_five_bytes_of_either_signature() {
        assert!(looks_like_header(b"PROXY TCP4 1.2.3.4"));
        assert!(looks_like_header(b"PROXY"));
        assert!(looks_like_header(b"\r\n\r\n\0"));
        assert!(looks_like_header(&v2_header(0x1, 0x11, V2_TCP4_ADDRESSES)));
        assert!(!looks_like_header(b"PROX"));
        assert!(!looks_like_header(b"PROXIMA"));
        assert!(!looks_like_header(&[0x16, 0x03, 0x01, 0x02, 0x00]));
    }

    #[tokio::test]
    async fn a_signature_seen_one_byte_at_a_time_is_read_on_to_five_bytes() {
        let mut rest: &[u8] = b"ROXY TCP4 1.2.3.4";
        let mut buf = b"P".to_vec();
        assert!(opens_header(&mut rest, &mut buf).await);
        assert_eq!(buf, b"PROXY");
        let mut rest: &[u8] = b"OST / HTTP/1.1";
        let mut buf = b"P".to_vec();
        assert!(!opens_header(&mut rest, &mut buf).await);
        assert_eq!(buf, b"POST ", "reads no more than five bytes in all");
        let mut rest: &[u8] = b"";
        let mut buf = vec![0x16];
        assert!(!opens_header(&mut rest, &mut buf).await);
    }

    proptest::proptest! {
        /// Untrusted bytes never panic the reader: any input ends in a header or a typed error.
        #[test]
        fn any_bytes_end_in_a_header_or_a_typed_error(bytes in proptest::collection::vec(
            proptest::prelude::any::<u8>(), 0..300)
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
            let (result, _) = runtime.block_on(read_all(&bytes));
            if let Err(error) = result {
                let _ = error.failure();
            }
        }

        /// Random bytes after a valid signature and version reach the address parsing.
        #[test]
        fn any_v2_payload_never_panics(family in 0_u8..=0xff, payload in proptest::collection::vec(
            proptest::prelude::any::<u8>(), 0..300)
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
            let (result, _) = runtime.block_on(read_all(&v2_header(0x1, family, &payload)));
            if let Err(error) = result {
                let _ = error.failure();
            }
        }
    }
}
