//! HTTP `CONNECT` exits (RFC 9110 section 9.3.6): the `Proxy-Authorization: Basic` user name
//! picks the exit (RFC 7617), `200` opens the tunnel.
//!
//! Answers `407` to missing or wrong credentials, `400` to anything but a well-formed
//! `CONNECT host:port`, `403` to a target off loopback, `502` when the target does not answer.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::tunnel::{self, TunnelError};
use crate::Sim;

/// Largest request head read (bytes); a `CONNECT` head is a few hundred.
const MAX_HEAD: usize = 8 * 1024;
/// Longest wait for the whole request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves one client connection.
pub async fn serve(mut client: TcpStream, sim: Arc<Sim>) {
    let Ok(Some((head, early))) = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client))
        .await
        .map(Result::ok)
        .map(Option::flatten)
    else {
        sim.tally.refuse();
        return;
    };
    let Some(request) = parse(&head) else {
        return refuse(client, &sim, "400 Bad Request").await;
    };
    let exit = request
        .credentials
        .and_then(|(user, password)| sim.users.exit_of(&user, &password));
    let Some(exit) = exit else {
        return refuse(client, &sim, "407 Proxy Authentication Required").await;
    };
    let upstream = match tunnel::connect(&request.host, request.port).await {
        Ok(upstream) => upstream,
        Err(TunnelError::NotLoopback) => return refuse(client, &sim, "403 Forbidden").await,
        Err(_) => return refuse(client, &sim, "502 Bad Gateway").await,
    };
    let Some(open) = sim.tally.open(&exit, sim.counts(request.port)) else {
        return refuse(client, &sim, "407 Proxy Authentication Required").await;
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await
        .is_err()
    {
        return;
    }
    tunnel::relay(client, upstream, &early, open).await;
}

async fn refuse(mut client: TcpStream, sim: &Sim, status: &str) {
    sim.tally.refuse();
    let auth = if status.starts_with("407") {
        "Proxy-Authenticate: Basic realm=\"exitsim\"\r\n"
    } else {
        ""
    };
    let response =
        format!("HTTP/1.1 {status}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n");
    let _ = client.write_all(response.as_bytes()).await;
}

/// Reads until the blank line that ends the head: the head, and any bytes read past it.
/// `None` if the client closed first or the head outgrew [`MAX_HEAD`].
async fn read_head(client: &mut TcpStream) -> std::io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let early = buf.split_off(end + 4);
            return Ok(Some((buf, early)));
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
    }
}

/// A parsed `CONNECT` request.
#[derive(Debug, PartialEq, Eq)]
struct Connect {
    host: String,
    port: u16,
    /// User name and password from `Proxy-Authorization: Basic`, if present and decodable.
    credentials: Option<(Vec<u8>, Vec<u8>)>,
}

fn parse(head: &[u8]) -> Option<Connect> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let (method, authority, version) = (
        request_line.next()?,
        request_line.next()?,
        request_line.next()?,
    );
    if method != "CONNECT" || !version.starts_with("HTTP/1.") || request_line.next().is_some() {
        return None;
    }
    let (host, port) = authority.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port = port.parse().ok()?;
    let credentials = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("proxy-authorization"))
        .and_then(|(_, value)| basic(value.trim()));
    Some(Connect {
        host: host.to_owned(),
        port,
        credentials,
    })
}

/// `Basic <base64(user:password)>` (RFC 7617 section 2) as user name and password.
fn basic(value: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    let (user, rest) = decoded.split_at(colon);
    Some((user.to_vec(), rest.get(1..).unwrap_or_default().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_connect_with_basic_credentials() {
        // base64("exit-3:p:w") — the password may hold a colon (RFC 7617 section 2).
        let head = b"CONNECT 127.0.0.1:8443 HTTP/1.1\r\nHost: 127.0.0.1:8443\r\n\
                     proxy-authorization: Basic ZXhpdC0zOnA6dw==\r\n\r\n";
        let request = parse(head).unwrap();
        assert_eq!((request.host.as_str(), request.port), ("127.0.0.1", 8443));
        assert_eq!(
            request.credentials,
            Some((b"exit-3".to_vec(), b"p:w".to_vec()))
        );
        let v6 = parse(b"CONNECT [::1]:1 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(
            (v6.host.as_str(), v6.port, v6.credentials),
            ("::1", 1, None)
        );
    }

    #[test]
    fn rejects_anything_else() {
        for head in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            b"CONNECT host HTTP/1.1\r\n\r\n",
            b"CONNECT host:99999 HTTP/1.1\r\n\r\n",
            b"CONNECT host:1 SPDY\r\n\r\n",
            b"\xff\xfe",
        ] {
            assert_eq!(parse(head), None, "{head:?}");
        }
        assert_eq!(basic("Bearer x"), None);
        assert_eq!(basic("Basic !!!"), None);
    }
}
