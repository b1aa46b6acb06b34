//! The HTTP/1.1 fallback, for a server (or interceptor) that picks `http/1.1` or no ALPN.
//!
//! One `GET` with `Connection: close`; the response head is parsed with `httparse`, the body
//! read by `Content-Length`, chunked coding (RFC 9112 section 7.1) or to EOF, bounded.

use exitvoice_exits::error::{Phase, ProbeError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::h2::{Response, MAX_BODY};

/// Largest response head (bytes).
const MAX_HEAD: usize = 64 * 1024;

/// Sends `GET path` and reads the whole response.
///
/// # Errors
/// Malformed responses ([`ProbeError::BadEcho`]) and I/O errors of the response phase.
pub async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    authority: &str,
    path: &str,
    user_agent: &str,
) -> Result<Response, ProbeError> {
    let io = |e: std::io::Error| ProbeError::io(Phase::Response, "echo", &e);
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: {user_agent}\r\n\
         Accept: application/json\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.map_err(io)?;
    stream.flush().await.map_err(io)?;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(n) => n,
            // A peer that closes TLS without close_notify still delivered what it sent.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => 0,
            Err(e) => return Err(io(e)),
        };
        if n == 0 {
            break;
        }
        raw.extend_from_slice(chunk.get(..n).unwrap_or_default());
        if raw.len() > MAX_HEAD + MAX_BODY {
            return Err(ProbeError::BadEcho("HTTP/1 response too large".to_owned()));
        }
        if let Some(response) = parse(&raw)? {
            return Ok(response);
        }
    }
    parse_at_eof(&raw)
}

fn bad(what: &str) -> ProbeError {
    ProbeError::BadEcho(format!("HTTP/1 {what}"))
}

enum Framing {
    Length(usize),
    Chunked,
    Eof,
}

fn head(raw: &[u8]) -> Result<Option<(u16, Framing, usize)>, ProbeError> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut fields);
    let len = match response.parse(raw) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if raw.len() < MAX_HEAD => return Ok(None),
        _ => return Err(bad("malformed response head")),
    };
    let status = response
        .code
        .ok_or_else(|| bad("response without status"))?;
    let mut framing = Framing::Eof;
    for field in response.headers.iter() {
        if field.name.eq_ignore_ascii_case("transfer-encoding")
            && field.value.eq_ignore_ascii_case(b"chunked")
        {
            framing = Framing::Chunked;
        } else if field.name.eq_ignore_ascii_case("content-length") {
            let length = std::str::from_utf8(field.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|v| *v <= MAX_BODY)
                .ok_or_else(|| bad("invalid content-length"))?;
            if !matches!(framing, Framing::Chunked) {
                framing = Framing::Length(length);
            }
        }
    }
    Ok(Some((status, framing, len)))
}

fn parse(raw: &[u8]) -> Result<Option<Response>, ProbeError> {
    let Some((status, framing, len)) = head(raw)? else {
        return Ok(None);
    };
    let rest = raw.get(len..).unwrap_or_default();
    match framing {
        Framing::Length(n) => Ok(rest.get(..n).map(|body| Response {
            status,
            body: body.to_vec(),
        })),
        Framing::Chunked => Ok(dechunk(rest)?.map(|body| Response { status, body })),
        Framing::Eof => Ok(None),
    }
}

fn parse_at_eof(raw: &[u8]) -> Result<Response, ProbeError> {
    let (status, framing, len) = head(raw)?.ok_or_else(|| bad("connection closed mid-head"))?;
    let rest = raw.get(len..).unwrap_or_default();
    match framing {
        Framing::Eof => Ok(Response {
            status,
            body: rest.to_vec(),
        }),
        _ => Err(bad("connection closed mid-body")),
    }
}

/// Decodes a complete chunked body; `None` while incomplete.
fn dechunk(mut rest: &[u8]) -> Result<Option<Vec<u8>>, ProbeError> {
    let mut body = Vec::new();
    loop {
        let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let line = std::str::from_utf8(rest.get(..line_end).unwrap_or_default())
            .map_err(|_| bad("bad chunk size"))?;
        let size_hex = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| bad("bad chunk size"))?;
        if size > MAX_BODY || body.len() + size > MAX_BODY {
            return Err(bad("chunked body too large"));
        }
        rest = rest.get(line_end + 2..).unwrap_or_default();
        if size == 0 {
            return Ok(Some(body));
        }
        let Some(data) = rest.get(..size) else {
            return Ok(None);
        };
        body.extend_from_slice(data);
        rest = rest.get(size + 2..).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framings() {
        let r = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            .unwrap()
            .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{}"[..]));
        let r = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n1;x\r\n}\r\n0\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.body, b"{}");
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}")
            .unwrap()
            .is_none());
        let r = parse_at_eof(b"HTTP/1.0 200 OK\r\n\r\nabc").unwrap();
        assert_eq!(r.body, b"abc");
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
        assert!(parse_at_eof(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab").is_err());
    }
}
