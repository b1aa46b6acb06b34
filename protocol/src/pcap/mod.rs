//! Offline input: pcap and pcapng files, TCP reassembly of client streams, TLS decryption with
//! keys carried in the capture.
//!
//! [`read`] walks a capture held in memory: `reader` splits it into frames and key logs, `link`,
//! `ip` and `tcp` follow every TCP connection and reassemble each direction, `handshake` finds the
//! ClientHello records and the ServerHello, and `decrypt` opens what the client sent when a key
//! log (a pcapng Decryption Secrets Block, or an `SSLKEYLOGFILE` the caller passes) has its
//! secrets. Nothing here parses the ClientHello's fields or HTTP: the result is
//! the client's raw bytes, for the TLS, HTTP/2 and HTTP/1 parsers.
//!
//! QUIC client Initials in UDP are followed too (`quic`): each client's ClientHello is
//! reassembled from its Initial packets, for the same TLS analysis. Not read: other UDP
//! traffic, QUIC after the Initials, tunnels (GRE, VXLAN), fragmented IP, TLS 1.3 early
//! data, and CBC cipher suites.
//!
//! Hostile files end in a typed error ([`PcapError`]) when the file header is unreadable, and in a
//! partial result ([`Capture::stopped`]) when damage comes later; nothing panics.

mod decrypt;
mod handshake;
mod ip;
mod keylog;
mod link;
mod quic;
mod reader;
mod tcp;

use std::net::SocketAddr;

pub use decrypt::DecryptError;
pub use keylog::KeyLog;
pub use quic::QuicConnection;

/// Most client bytes kept per connection: cleartext, or decrypted application data.
pub const MAX_CLIENT_BYTES: usize = 1 << 20;
/// Most server bytes reassembled per connection: enough for the ServerHello.
const MAX_SERVER_BYTES: usize = 64 * 1024;
/// The HTTP/2 connection preface (RFC 9113 section 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Longest HTTP/1 request line we look at to tell a request from other bytes.
const MAX_REQUEST_LINE: usize = 8 * 1024;
/// Longest method token accepted in a request line.
const MAX_METHOD_LEN: usize = 24;

/// Why a capture file could not be read.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PcapError {
    /// The bytes start with neither a pcap nor a pcapng magic number.
    #[error("not a pcap or pcapng file")]
    NotACapture,
    /// The file header (pcap) or first Section Header Block (pcapng) is malformed or short.
    #[error("malformed capture file header")]
    BadHeader,
    /// The file ends inside a packet record or block.
    #[error("capture truncated inside the record at byte {offset}")]
    Truncated {
        /// Offset of the incomplete record.
        offset: usize,
    },
    /// A packet record or block has inconsistent lengths or fields.
    #[error("malformed capture record at byte {offset}")]
    BadBlock {
        /// Offset of the bad record.
        offset: usize,
    },
}

/// What the ServerHello chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerChoice {
    /// Negotiated version (`supported_versions` when present), e.g. `0x0304`.
    pub version: u16,
    /// Negotiated cipher suite.
    pub cipher_suite: u16,
    /// ALPN protocol the server selected: from the ServerHello (TLS 1.2), or from the
    /// EncryptedExtensions (TLS 1.3) when the key log has the `SERVER_HANDSHAKE_TRAFFIC_SECRET`.
    pub alpn: Option<Vec<u8>>,
}

/// The client's application bytes, when they could be read.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientData {
    /// Nothing readable: encrypted without keys, or not HTTP.
    None,
    /// Plain HTTP: the stream starts with the HTTP/2 preface or an HTTP/1 request line (for a
    /// tunnel, only the bytes before the ClientHello, e.g. the `CONNECT` request).
    Cleartext(Vec<u8>),
    /// TLS application data decrypted with the key log.
    Decrypted(Vec<u8>),
}

impl ClientData {
    /// The bytes, if any.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Self::None => None,
            Self::Cleartext(bytes) | Self::Decrypted(bytes) => Some(bytes),
        }
    }
}

/// How well the client's stream was captured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamQuality {
    /// Bytes reassembled from the start of the stream.
    pub bytes: usize,
    /// A hole in the sequence space cut the stream short.
    pub gap: bool,
    /// Bytes beyond the reassembly caps were left out.
    pub capped: bool,
    /// The SYN was not captured: the stream starts at the lowest sequence number seen.
    pub start_guessed: bool,
}

/// One TCP connection whose client spoke TLS or plain HTTP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcapConnection {
    /// The client end.
    pub client: SocketAddr,
    /// The server end.
    pub server: SocketAddr,
    /// 1-based number of the frame that opened the connection in the capture.
    pub first_frame: usize,
    /// Each ClientHello as raw records (every record up to the complete message, headers
    /// included): one, or two after a HelloRetryRequest.
    pub client_hellos: Vec<Vec<u8>>,
    /// The server's choice, when its ServerHello was captured.
    pub server_hello: Option<ServerChoice>,
    /// The client's HTTP bytes, cleartext or decrypted.
    pub client_data: ClientData,
    /// Why a TLS connection's application data could not be decrypted.
    pub decrypt_error: Option<DecryptError>,
    /// How the client's stream was captured.
    pub client_stream: StreamQuality,
    /// The client's SYN from its IP header on, when it was captured.
    pub syn: Option<Vec<u8>>,
    /// From the server's SYN-ACK to the client's next segment (its handshake ACK), as captured:
    /// the TCP round trip, seen from the server's side of the path; `None` without both or
    /// without capture times.
    pub handshake_rtt_us: Option<u32>,
    /// From the server's last payload segment after the client's first payload (its handshake
    /// flight) to the client's next payload (the answer to it), as captured: one round trip
    /// through the client's whole path, seen from the server's side; `None` without them.
    pub flight_rtt_us: Option<u32>,
}

/// Everything read from a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    /// TCP connections with a ClientHello or plain HTTP from the client, in order of their first
    /// frame.
    pub connections: Vec<PcapConnection>,
    /// Clients whose QUIC Initials were found in UDP, in order of their first Initial.
    pub quic: Vec<QuicConnection>,
    /// Frames read.
    pub frames: usize,
    /// Connections with secrets in the key logs (embedded and given).
    pub key_log_connections: usize,
    /// The capture held more than 65,536 TCP connections, or more than 65,536 QUIC attempts;
    /// the later ones were not followed.
    pub connections_capped: bool,
    /// Why reading stopped before the end of the file, if it did: the connections are those of
    /// the frames before that point.
    pub stopped: Option<PcapError>,
}

/// Whether `file` starts like a pcap or pcapng file.
pub fn is_capture(file: &[u8]) -> bool {
    reader::sniff(file).is_some()
}

/// The TCP connections of a capture, with ClientHello records and client HTTP bytes.
///
/// `extra_keylog` is the text of an `SSLKEYLOGFILE`, used with any key log embedded in the file.
///
/// # Errors
/// [`PcapError::NotACapture`] or [`PcapError::BadHeader`] when the file cannot be read at all;
/// damage later in the file is not an error (see [`read`] to learn about it).
pub fn connections(
    file_bytes: &[u8],
    extra_keylog: Option<&str>,
) -> Result<Vec<PcapConnection>, PcapError> {
    read(file_bytes, extra_keylog).map(|capture| capture.connections)
}

/// Reads a capture: its connections, and whether the file was damaged.
///
/// # Errors
/// [`PcapError::NotACapture`] or [`PcapError::BadHeader`] when the file cannot be read at all.
pub fn read(file_bytes: &[u8], extra_keylog: Option<&str>) -> Result<Capture, PcapError> {
    let contents = reader::read(file_bytes)?;
    let mut keys = KeyLog::default();
    for log in &contents.key_logs {
        keys.extend(&String::from_utf8_lossy(log));
    }
    if let Some(text) = extra_keylog {
        keys.extend(text);
    }
    let mut tracker = tcp::Tracker::default();
    let mut quic_tracker = quic::Tracker::default();
    for (index, &(link, frame)) in contents.frames.iter().enumerate() {
        let Some(ip_packet) = link::ip_packet(link, frame) else {
            continue;
        };
        if let Some(datagram) = ip::udp_packet(ip_packet) {
            quic_tracker.add(datagram.src, datagram.dst, datagram.segment, index + 1);
            continue;
        }
        let Some(packet) = ip::tcp_packet(ip_packet) else {
            continue;
        };
        let Some(mut segment) = tcp::Segment::parse(packet.segment) else {
            continue;
        };
        segment.time_ns = contents.times_ns.get(index).copied().flatten();
        let opens = segment.opens();
        let flow = tracker.add(packet.src, packet.dst, segment, index + 1);
        if let (true, Some(flow)) = (opens, flow) {
            tracker.keep_syn(flow, ip_packet);
        }
    }
    let connections_capped = tracker.capped || quic_tracker.capped;
    let connections = tracker
        .into_flows()
        .iter()
        .filter_map(|flow| connection(flow, &keys))
        .collect();
    Ok(Capture {
        connections,
        quic: quic_tracker.into_connections(),
        frames: contents.frames.len(),
        key_log_connections: keys.len(),
        connections_capped,
        stopped: contents.stopped,
    })
}

/// Whether `bytes` start with the HTTP/2 preface or an HTTP/1 request line.
pub fn is_http_start(bytes: &[u8]) -> bool {
    if bytes.starts_with(H2_PREFACE) {
        return true;
    }
    let line = bytes
        .get(..bytes.len().min(MAX_REQUEST_LINE))
        .unwrap_or(bytes);
    let Some(end) = line.windows(2).position(|w| w == b"\r\n") else {
        return false;
    };
    let line = line.get(..end).unwrap_or_default();
    let Some(space) = line.iter().position(|&b| b == b' ') else {
        return false;
    };
    let method = line.get(..space).unwrap_or_default();
    (1..=MAX_METHOD_LEN).contains(&method.len())
        && method.iter().all(u8::is_ascii_uppercase)
        && (line.ends_with(b" HTTP/1.1") || line.ends_with(b" HTTP/1.0"))
}

fn connection(flow: &tcp::Flow<'_>, keys: &KeyLog) -> Option<PcapConnection> {
    let client = flow.client_by_handshake().unwrap_or_else(|| {
        // No SYN captured: the client is the side that speaks TLS or HTTP first.
        let talks = |side: usize| {
            let bytes = flow.stream(side, MAX_SERVER_BYTES).bytes;
            handshake::client_flight(&bytes).is_some() || is_http_start(&bytes)
        };
        usize::from(!talks(0) && talks(1))
    });
    let server = 1 - client;
    let client_stream = flow.stream(client, MAX_CLIENT_BYTES);
    let server_stream = flow.stream(server, MAX_SERVER_BYTES);
    let server_bytes = &server_stream.bytes;
    let flight = handshake::client_flight(&client_stream.bytes);
    let cleartext_end = flight
        .as_ref()
        .map_or(client_stream.bytes.len(), |f| f.start);
    let cleartext = client_stream.bytes.get(..cleartext_end).unwrap_or_default();
    let mut client_data = if is_http_start(cleartext) {
        ClientData::Cleartext(cleartext.to_vec())
    } else {
        ClientData::None
    };
    if flight.is_none() && client_data == ClientData::None {
        return None;
    }
    let server_flight = handshake::server_flight(server_bytes);
    let server_hello = server_flight.as_ref().map(|f| &f.hello);
    let secrets = flight
        .as_ref()
        .and_then(|f| f.random.as_ref())
        .and_then(|random| keys.client(random));
    let server_alpn = match (&server_flight, secrets) {
        (Some(server), _) if server.hello.alpn.is_some() => server.hello.alpn.clone(),
        (Some(server), Some(secrets)) => {
            decrypt::server_alpn(&server.after, &server.hello, secrets)
        }
        _ => None,
    };
    let mut decrypt_error = None;
    if let Some(flight) = &flight {
        let decrypted = match (server_hello, &flight.random) {
            (None, _) | (_, None) => Err(DecryptError::NoServerHello),
            (Some(hello), Some(random)) => keys
                .client(random)
                .ok_or(DecryptError::NoKeys)
                .and_then(|secrets| {
                    decrypt::client_application_data(
                        &flight.after,
                        hello,
                        random,
                        secrets,
                        MAX_CLIENT_BYTES,
                    )
                }),
        };
        match decrypted {
            Ok(bytes) => client_data = ClientData::Decrypted(bytes),
            Err(error) => decrypt_error = Some(error),
        }
    }
    let timing = &flow.timing;
    let micros = |from: u64, to: u64| u32::try_from(to.checked_sub(from)? / 1000).ok();
    let handshake_rtt_us = timing
        .syn_ack_ns
        .zip(timing.after_syn_ack_ns.get(client).copied().flatten())
        .and_then(|(syn_ack, ack)| micros(syn_ack, ack));
    let flight_rtt_us = match timing.runs.as_slice() {
        [hello, flight, answer, ..]
            if hello.side == client && flight.side == server && answer.side == client =>
        {
            micros(flight.last_ns, answer.first_ns)
        }
        _ => None,
    };
    Some(PcapConnection {
        handshake_rtt_us,
        flight_rtt_us,
        client: *flow.ends.get(client)?,
        server: *flow.ends.get(server)?,
        first_frame: flow.first_frame,
        client_hellos: flight
            .as_ref()
            .map(|f| f.hellos.iter().map(|h| h.to_vec()).collect())
            .unwrap_or_default(),
        server_hello: server_hello.map(|h| ServerChoice {
            version: h.version,
            cipher_suite: h.cipher_suite,
            alpn: server_alpn,
        }),
        client_data,
        decrypt_error,
        client_stream: StreamQuality {
            bytes: client_stream.bytes.len(),
            gap: client_stream.gap,
            capped: client_stream.capped,
            start_guessed: client_stream.start_guessed,
        },
        syn: flow.syn.map(<[u8]>::to_vec),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_starts() {
        assert!(is_http_start(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0"));
        assert!(is_http_start(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
        assert!(is_http_start(b"CONNECT a:443 HTTP/1.0\r\n\r\n"));
        assert!(!is_http_start(b"get / HTTP/1.1\r\n"));
        assert!(!is_http_start(b"GET / HTTP/1.1"));
        assert!(!is_http_start(b"\x16\x03\x01\x02\x00\x01"));
    }

    #[test]
    fn non_captures_are_typed_errors() {
        assert_eq!(connections(b"", None), Err(PcapError::NotACapture));
        assert_eq!(
            connections(b"GET / HTTP/1.1\r\n", None),
            Err(PcapError::NotACapture)
        );
        assert_eq!(
            connections(&[0x0a, 0x0d, 0x0d, 0x0a, 0, 0], None),
            Err(PcapError::BadHeader)
        );
    }
}
