//! HTTP `CONNECT` tunnels (RFC 9110 section 9.3.6) with pre-emptive Basic auth (RFC 7617).
//!
//! The credentials go in the first request (`Proxy-Authorization`), so a proxy that requires
//! them answers 200 at once, and one that rejects them answers 407, which is reported as
//! [`ProbeError::ProxyAuth`] (RFC 9110 section 15.5.8). The response head is read one byte at a
//! time up to [`MAX_HEAD`], so no byte of the tunnel (the server's TLS records) is consumed.

use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::dial::Tunnel;
use crate::error::{Phase, ProbeError};

/// Largest CONNECT response head accepted (bytes).
pub const MAX_HEAD: usize = 16 * 1024;
/// Most response header fields parsed.
const MAX_FIELDS: usize = 64;

/// Sends `CONNECT host:port` on `stream` and reads the response head.
///
/// # Errors
/// [`ProbeError::ProxyAuth`] on 407 (or 401), [`ProbeError::ConnectStatus`] on another non-2xx,
/// [`ProbeError::ProxyProtocol`] on a malformed or oversized head, I/O errors of the tunnel phase.
pub async fn connect<S: Tunnel>(
    mut stream: S,
    host: &str,
    port: u16,
    auth: Option<(&str, &str)>,
) -> Result<S, ProbeError> {
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some((user, pass)) = auth {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        request.push_str("Proxy-Authorization: Basic ");
        request.push_str(&token);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    let io = |e: std::io::Error| ProbeError::io(Phase::Tunnel, &authority, &e);
    stream.write_all(request.as_bytes()).await.map_err(io)?;
    stream.flush().await.map_err(io)?;

    let head = read_head(&mut stream).await?;
    match status(&head)? {
        200..=299 => Ok(stream),
        // tinyproxy 1.11 rejects bad BasicAuth on CONNECT with 401, not 407 (seen on loopback).
        status @ (401 | 407) => Err(ProbeError::ProxyAuth {
            detail: format!("http {status}"),
        }),
        status => Err(ProbeError::ConnectStatus { status }),
    }
}

/// Reads up to and including the blank line that ends the response head.
async fn read_head<S: Tunnel>(stream: &mut S) -> Result<Vec<u8>, ProbeError> {
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_HEAD {
            return Err(ProbeError::ProxyProtocol("CONNECT response head too large"));
        }
        let n = stream
            .read(&mut byte)
            .await
            .map_err(|e| ProbeError::io(Phase::Tunnel, "proxy", &e))?;
        if n == 0 {
            return Err(ProbeError::ProxyProtocol(
                "proxy closed the connection before a CONNECT response",
            ));
        }
        head.extend_from_slice(&byte);
    }
    Ok(head)
}

/// The status code of a response head.
fn status(head: &[u8]) -> Result<u16, ProbeError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut response = httparse::Response::new(&mut fields);
    match response.parse(head) {
        Ok(httparse::Status::Complete(_)) => response
            .code
            .ok_or(ProbeError::ProxyProtocol("CONNECT response without status")),
        Ok(httparse::Status::Partial) | Err(_) => {
            Err(ProbeError::ProxyProtocol("malformed CONNECT response head"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_of_heads() {
        assert_eq!(
            status(b"HTTP/1.1 200 Connection established\r\n\r\n").ok(),
            Some(200)
        );
        assert_eq!(status(b"HTTP/1.0 200 OK\r\nVia: x\r\n\r\n").ok(), Some(200));
        assert_eq!(
            status(
                b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n"
            )
            .ok(),
            Some(407)
        );
        for bad in [
            &b"SSH-2.0-OpenSSH\r\n\r\n"[..],
            b"HTTP/1.1 2000 x\r\n\r\n",
            b"\r\n\r\n",
        ] {
            assert!(
                matches!(status(bad), Err(ProbeError::ProxyProtocol(_))),
                "{bad:?}"
            );
        }
    }

    #[tokio::test]
    async fn head_reader_stops_at_the_blank_line_and_is_bounded() {
        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        server
            .write_all(b"HTTP/1.1 200 OK\r\n\r\n\x16\x03\x01")
            .await
            .unwrap();
        let head = read_head(&mut client).await.unwrap();
        assert_eq!(head, b"HTTP/1.1 200 OK\r\n\r\n");
        let mut rest = [0u8; 3];
        client.read_exact(&mut rest).await.unwrap();
        assert_eq!(rest, [0x16, 0x03, 0x01], "tunnel bytes left unread");

        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        let endless = vec![b'a'; MAX_HEAD + 10];
        tokio::spawn(async move { server.write_all(&endless).await });
        assert!(matches!(
            read_head(&mut client).await,
            Err(ProbeError::ProxyProtocol(_))
        ));
    }
}
