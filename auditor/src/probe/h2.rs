//! An HTTP/2 client whose shape is data: an [`H2Profile`] fixes the SETTINGS (order and values),
//! the connection WINDOW_UPDATE, the HEADERS priority, the pseudo-header order and the header
//! order, so the auditor can send a browser-shaped connection and see whether the exit keeps it.
//!
//! Frames and HPACK are written here rather than with the `h2` crate, which fixes its own
//! SETTINGS and pseudo-header order. One request per connection (stream 1), then the response is
//! read: SETTINGS (acknowledged, RFC 9113 section 6.5.3), PING (answered, section 6.7), HEADERS
//! and CONTINUATION (section 6.10), DATA until END_STREAM. Every length is bounded.

use exitvoice_exits::error::{Phase, ProbeError};
use exitvoice_protocol::h2::hpack::Decoder;
use loona_hpack::Encoder;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The client connection preface (RFC 9113 section 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Largest frame payload accepted: the default SETTINGS_MAX_FRAME_SIZE (RFC 9113 section 6.5.2),
/// which no profile raises.
pub const MAX_FRAME: usize = 16_384;
/// Largest response body read.
pub const MAX_BODY: usize = 1 << 20;
/// Largest response header block read (all HEADERS + CONTINUATION payloads).
pub const MAX_HEADER_BLOCK: usize = 64 * 1024;

/// Frame types (RFC 9113 section 6).
mod kind {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags (RFC 9113 section 6).
mod flag {
    pub const ACK: u8 = 0x1;
    pub const END_STREAM: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// A request pseudo-header (RFC 9113 section 8.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pseudo {
    /// `:method`
    Method,
    /// `:authority`
    Authority,
    /// `:scheme`
    Scheme,
    /// `:path`
    Path,
}

/// The HEADERS frame priority fields (RFC 9113 section 6.2; deprecated but still sent by
/// browsers, and part of the Akamai fingerprint).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadersPriority {
    /// The E (exclusive) bit.
    pub exclusive: bool,
    /// Stream dependency.
    pub depends_on: u32,
    /// Weight 1–256 (sent on the wire as weight − 1).
    pub weight: u16,
}

/// The shape of an HTTP/2 connection, as data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct H2Profile {
    /// Profile name (`chrome`, `rustls-default`).
    pub name: String,
    /// SETTINGS in wire order: (identifier, value).
    pub settings: Vec<(u16, u32)>,
    /// Connection-level WINDOW_UPDATE increment sent after SETTINGS, if any.
    pub window_update: Option<u32>,
    /// HEADERS priority, if the HEADERS frame carries the PRIORITY flag.
    pub priority: Option<HeadersPriority>,
    /// Pseudo-header order.
    pub pseudo_order: Vec<Pseudo>,
    /// Regular request headers in wire order (lowercase names).
    pub headers: Vec<(String, String)>,
}

impl H2Profile {
    /// Chrome's h2 shape: SETTINGS `1:65536;2:0;4:6291456;6:262144`, WINDOW_UPDATE 15663105,
    /// HEADERS priority exclusive weight 256 on stream 0, pseudo-headers `m,a,s,p`
    /// (Akamai string `1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p`).
    pub fn chrome() -> Self {
        let header = |n: &str, v: &str| (n.to_owned(), v.to_owned());
        Self {
            name: "chrome".to_owned(),
            settings: vec![(0x1, 65_536), (0x2, 0), (0x4, 6_291_456), (0x6, 262_144)],
            window_update: Some(15_663_105),
            priority: Some(HeadersPriority {
                exclusive: true,
                depends_on: 0,
                weight: 256,
            }),
            pseudo_order: vec![
                Pseudo::Method,
                Pseudo::Authority,
                Pseudo::Scheme,
                Pseudo::Path,
            ],
            headers: vec![
                header(
                    "sec-ch-ua",
                    "\"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\"",
                ),
                header("sec-ch-ua-mobile", "?0"),
                header("sec-ch-ua-platform", "\"Linux\""),
                header("upgrade-insecure-requests", "1"),
                header(
                    "user-agent",
                    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
                     Chrome/131.0.0.0 Safari/537.36",
                ),
                header(
                    "accept",
                    "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
                ),
                header("sec-fetch-site", "none"),
                header("sec-fetch-mode", "navigate"),
                header("sec-fetch-user", "?1"),
                header("sec-fetch-dest", "document"),
                header("accept-language", "en-US,en;q=0.9"),
                header("priority", "u=0, i"),
            ],
        }
    }

    /// A plain library shape (what Rust's `h2`/hyper client sends by default): SETTINGS
    /// `2:0;4:2097152;5:16384;6:16777216`, WINDOW_UPDATE 5177345, no priority, `m,s,a,p`.
    pub fn rustls_default() -> Self {
        Self {
            name: "rustls-default".to_owned(),
            settings: vec![(0x2, 0), (0x4, 2_097_152), (0x5, 16_384), (0x6, 16_777_216)],
            window_update: Some(5_177_345),
            priority: None,
            pseudo_order: vec![
                Pseudo::Method,
                Pseudo::Scheme,
                Pseudo::Authority,
                Pseudo::Path,
            ],
            headers: vec![("user-agent".to_owned(), "exitvoice-auditor".to_owned())],
        }
    }

    /// A profile by name.
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "chrome" => Some(Self::chrome()),
            "rustls-default" => Some(Self::rustls_default()),
            _ => None,
        }
    }
}

fn write_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
}

/// The bytes a profile sends for `GET path` to `authority`: preface, SETTINGS, WINDOW_UPDATE,
/// HEADERS (END_STREAM, with CONTINUATION frames if the block exceeds [`MAX_FRAME`]).
pub fn request_bytes(profile: &H2Profile, authority: &str, path: &str) -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    let settings: Vec<u8> = profile
        .settings
        .iter()
        .flat_map(|(id, value)| id.to_be_bytes().into_iter().chain(value.to_be_bytes()))
        .collect();
    write_frame(&mut out, kind::SETTINGS, 0, 0, &settings);
    if let Some(increment) = profile.window_update {
        write_frame(
            &mut out,
            kind::WINDOW_UPDATE,
            0,
            0,
            &(increment & 0x7fff_ffff).to_be_bytes(),
        );
    }
    let mut fields: Vec<(&[u8], &[u8])> = profile
        .pseudo_order
        .iter()
        .map(|pseudo| match pseudo {
            Pseudo::Method => (&b":method"[..], &b"GET"[..]),
            Pseudo::Authority => (&b":authority"[..], authority.as_bytes()),
            Pseudo::Scheme => (&b":scheme"[..], &b"https"[..]),
            Pseudo::Path => (&b":path"[..], path.as_bytes()),
        })
        .collect();
    fields.extend(
        profile
            .headers
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes())),
    );
    let block = Encoder::new().encode(fields);
    let mut payload = Vec::with_capacity(block.len() + 5);
    let mut flags = flag::END_STREAM;
    if let Some(priority) = profile.priority {
        flags |= flag::PRIORITY;
        let exclusive = if priority.exclusive { 0x8000_0000 } else { 0 };
        payload.extend_from_slice(&(exclusive | (priority.depends_on & 0x7fff_ffff)).to_be_bytes());
        // Weight is sent as weight − 1 (RFC 9113 section 6.2).
        payload.push(u8::try_from(priority.weight.clamp(1, 256) - 1).unwrap_or(u8::MAX));
    }
    let first = MAX_FRAME - payload.len();
    let (head, mut rest) = block.split_at(block.len().min(first));
    payload.extend_from_slice(head);
    if rest.is_empty() {
        write_frame(
            &mut out,
            kind::HEADERS,
            flags | flag::END_HEADERS,
            1,
            &payload,
        );
    } else {
        write_frame(&mut out, kind::HEADERS, flags, 1, &payload);
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(rest.len().min(MAX_FRAME));
            let end = if tail.is_empty() {
                flag::END_HEADERS
            } else {
                0
            };
            write_frame(&mut out, kind::CONTINUATION, end, 1, chunk);
            rest = tail;
        }
    }
    out
}

/// A response: status and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// `:status`.
    pub status: u16,
    /// The body (DATA payloads of stream 1, padding removed).
    pub body: Vec<u8>,
}

struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

async fn read_frame<S: AsyncRead + Unpin>(stream: &mut S) -> Result<Frame, ProbeError> {
    let io = |e: std::io::Error| ProbeError::io(Phase::Response, "echo", &e);
    let mut head = [0u8; 9];
    stream.read_exact(&mut head).await.map_err(io)?;
    let [l0, l1, l2, kind, flags, s0, s1, s2, s3] = head;
    let len = usize::from(l0) << 16 | usize::from(l1) << 8 | usize::from(l2);
    if len > MAX_FRAME {
        return Err(ProbeError::H2("frame larger than SETTINGS_MAX_FRAME_SIZE"));
    }
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.map_err(io)?;
    Ok(Frame {
        kind,
        flags,
        stream: u32::from_be_bytes([s0, s1, s2, s3]) & 0x7fff_ffff,
        payload,
    })
}

/// Removes padding (RFC 9113 sections 6.1, 6.2) and, for HEADERS, the priority fields.
fn unpad(frame: &Frame) -> Result<&[u8], ProbeError> {
    let mut body = frame.payload.as_slice();
    let mut pad = 0usize;
    if frame.flags & flag::PADDED != 0 {
        let (&len, rest) = body
            .split_first()
            .ok_or(ProbeError::H2("padded frame without pad length"))?;
        pad = usize::from(len);
        body = rest;
    }
    if frame.kind == kind::HEADERS && frame.flags & flag::PRIORITY != 0 {
        body = body
            .get(5..)
            .ok_or(ProbeError::H2("HEADERS priority fields truncated"))?;
    }
    body.get(
        ..body
            .len()
            .checked_sub(pad)
            .ok_or(ProbeError::H2("padding too long"))?,
    )
    .ok_or(ProbeError::H2("padding too long"))
}

/// Sends the profile's request and reads the response of stream 1.
///
/// # Errors
/// Protocol violations ([`ProbeError::H2`]), resets, I/O errors of the response phase.
pub async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    profile: &H2Profile,
    authority: &str,
    path: &str,
) -> Result<Response, ProbeError> {
    let io = |e: std::io::Error| ProbeError::io(Phase::Response, "echo", &e);
    stream
        .write_all(&request_bytes(profile, authority, path))
        .await
        .map_err(io)?;
    stream.flush().await.map_err(io)?;

    let mut decoder = Decoder::new();
    let mut block: Vec<u8> = Vec::new();
    let mut in_headers = false;
    let mut headers_end_stream = false;
    let mut status: Option<u16> = None;
    let mut body = Vec::new();
    loop {
        let frame = read_frame(stream).await?;
        if in_headers && frame.kind != kind::CONTINUATION {
            return Err(ProbeError::H2("header block interrupted"));
        }
        match frame.kind {
            kind::SETTINGS if frame.flags & flag::ACK == 0 => {
                let mut ack = Vec::with_capacity(9);
                write_frame(&mut ack, kind::SETTINGS, flag::ACK, 0, &[]);
                stream.write_all(&ack).await.map_err(io)?;
                stream.flush().await.map_err(io)?;
            }
            kind::PING if frame.flags & flag::ACK == 0 => {
                let mut pong = Vec::with_capacity(17);
                write_frame(&mut pong, kind::PING, flag::ACK, 0, &frame.payload);
                stream.write_all(&pong).await.map_err(io)?;
                stream.flush().await.map_err(io)?;
            }
            kind::GOAWAY => return Err(ProbeError::H2("server sent GOAWAY before the response")),
            kind::RST_STREAM if frame.stream == 1 => {
                return Err(ProbeError::H2("server reset the request stream"))
            }
            kind::HEADERS | kind::CONTINUATION if frame.stream == 1 => {
                let fragment = if frame.kind == kind::HEADERS {
                    headers_end_stream = frame.flags & flag::END_STREAM != 0;
                    unpad(&frame)?
                } else {
                    frame.payload.as_slice()
                };
                if block.len() + fragment.len() > MAX_HEADER_BLOCK {
                    return Err(ProbeError::H2("response header block too large"));
                }
                block.extend_from_slice(fragment);
                in_headers = frame.flags & flag::END_HEADERS == 0;
                if !in_headers {
                    let fields = decoder
                        .decode(&block)
                        .map_err(|_| ProbeError::H2("HPACK decoding failed"))?;
                    block.clear();
                    if status.is_none() {
                        let value = fields
                            .fields()
                            .find(|field| field.name == b":status")
                            .map(|field| field.value)
                            .ok_or(ProbeError::H2("response without :status"))?;
                        let parsed = std::str::from_utf8(value)
                            .ok()
                            .and_then(|v| v.parse::<u16>().ok())
                            .ok_or(ProbeError::H2("malformed :status"))?;
                        // 1xx responses are interim (RFC 9110 section 15.2).
                        if !(100..200).contains(&parsed) {
                            status = Some(parsed);
                        }
                    }
                    if headers_end_stream {
                        break;
                    }
                }
            }
            kind::DATA if frame.stream == 1 => {
                let data = unpad(&frame)?;
                if body.len() + data.len() > MAX_BODY {
                    return Err(ProbeError::BadEcho("response body too large".to_owned()));
                }
                body.extend_from_slice(data);
                if frame.flags & flag::END_STREAM != 0 {
                    break;
                }
            }
            // SETTINGS acks, WINDOW_UPDATE, PRIORITY, frames of other streams, extension frames.
            _ => {}
        }
    }
    let status = status.ok_or(ProbeError::H2("stream ended without a final response"))?;
    // Polite close: GOAWAY(last stream 0, NO_ERROR) (RFC 9113 section 6.8). Best effort.
    let mut goaway = Vec::with_capacity(17);
    write_frame(&mut goaway, kind::GOAWAY, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 0]);
    let _ = stream.write_all(&goaway).await;
    let _ = stream.flush().await;
    Ok(Response { status, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chrome_request_layout() {
        let bytes = request_bytes(&H2Profile::chrome(), "localhost:1", "/probe/t");
        assert!(bytes.starts_with(PREFACE));
        let rest = &bytes[PREFACE.len()..];
        // SETTINGS: 4 entries → 24-byte payload, type 4, stream 0.
        assert_eq!(&rest[..9], &[0, 0, 24, 4, 0, 0, 0, 0, 0]);
        assert_eq!(&rest[9..15], &[0, 1, 0, 1, 0, 0]);
        // WINDOW_UPDATE 15663105 = 0x00ef0001.
        assert_eq!(
            &rest[33..46],
            &[0, 0, 4, 8, 0, 0, 0, 0, 0, 0x00, 0xef, 0x00, 0x01]
        );
        // HEADERS: END_STREAM | END_HEADERS | PRIORITY, stream 1, E=1 dep 0, weight 255.
        assert_eq!(rest[46 + 3], kind::HEADERS);
        assert_eq!(rest[46 + 4], 0x25);
        assert_eq!(&rest[46 + 5..46 + 9], &[0, 0, 0, 1]);
        assert_eq!(&rest[46 + 9..46 + 14], &[0x80, 0, 0, 0, 255]);
    }

    #[tokio::test]
    async fn reads_a_response_with_continuation_padding_and_ping() {
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        let task = tokio::spawn(async move {
            exchange(&mut client, &H2Profile::rustls_default(), "h:1", "/").await
        });
        let mut out = Vec::new();
        write_frame(&mut out, kind::SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]);
        write_frame(&mut out, kind::PING, 0, 0, &[1; 8]);
        let block = Encoder::new().encode([(&b":status"[..], &b"200"[..])]);
        let (a, b) = block.split_at(1);
        write_frame(&mut out, kind::HEADERS, 0, 1, a);
        write_frame(&mut out, kind::CONTINUATION, flag::END_HEADERS, 1, b);
        write_frame(
            &mut out,
            kind::DATA,
            flag::PADDED,
            1,
            &[2, b'{', b'}', 0, 0],
        );
        write_frame(&mut out, kind::DATA, flag::END_STREAM, 1, b"x");
        server.write_all(&out).await.unwrap();
        let response = task.await.unwrap().unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.body, b"{}x");
    }

    #[tokio::test]
    async fn hostile_frames_are_errors() {
        let cases: Vec<Vec<u8>> = vec![
            // Oversized frame.
            vec![0x01, 0x00, 0x00, 0, 0, 0, 0, 0, 1],
            // Padding longer than the payload.
            {
                let mut out = Vec::new();
                write_frame(&mut out, kind::DATA, flag::PADDED, 1, &[9, 1]);
                out
            },
            // Garbage HPACK.
            {
                let mut out = Vec::new();
                write_frame(
                    &mut out,
                    kind::HEADERS,
                    flag::END_HEADERS,
                    1,
                    &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                );
                out
            },
            // GOAWAY.
            {
                let mut out = Vec::new();
                write_frame(&mut out, kind::GOAWAY, 0, 0, &[0; 8]);
                out
            },
            // Truncated stream.
            vec![0, 0, 5, 0, 0],
        ];
        for bytes in cases {
            let (mut client, mut server) = tokio::io::duplex(1 << 20);
            let task = tokio::spawn(async move {
                exchange(&mut client, &H2Profile::rustls_default(), "h:1", "/").await
            });
            server.write_all(&bytes).await.unwrap();
            drop(server);
            assert!(task.await.unwrap().is_err(), "{bytes:?}");
        }
    }
}
