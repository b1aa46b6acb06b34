//! The request head (RFC 9112 sections 3 and 5).

use serde::Serialize;

/// Bytes of head examined; beyond it the head counts as cut (`truncated`).
pub const MAX_HEAD_LEN: usize = 64 * 1024;
/// Header fields recorded; more set `headers_capped`.
pub const MAX_HEADERS: usize = 128;

/// Why the bytes are not an HTTP/1.x request head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
#[non_exhaustive]
pub enum H1Error {
    /// No complete request line (`method SP target SP HTTP/x.y`, RFC 9112 section 3).
    #[error("no HTTP/1.x request line")]
    BadRequestLine,
    /// A method that is not a token (RFC 9110 section 9.1).
    #[error("method is not a token")]
    BadMethod,
    /// A version that is not `HTTP/<digit>.<digit>` (RFC 9112 section 2.3).
    #[error("bad HTTP version")]
    BadVersion,
    /// A header line without a colon, or with an empty or non-token name (RFC 9112 section 5).
    #[error("malformed header line {line}")]
    BadHeader {
        /// 1-based line number after the request line.
        line: usize,
    },
    /// A line folded onto the previous one (obs-fold, RFC 9112 section 5.2).
    #[error("obsolete line folding at header line {line}")]
    ObsFold {
        /// 1-based line number after the request line.
        line: usize,
    },
}

/// A parsed request head.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct H1Head {
    /// Method, as sent.
    pub method: String,
    /// Request target, as sent (lossy UTF-8).
    pub target: String,
    /// Version, e.g. `HTTP/1.1`.
    pub version: String,
    /// Header fields: names in original case, wire order, values trimmed (lossy UTF-8).
    /// Serialized with the values of credential and cookie fields left out.
    #[serde(serialize_with = "serialize_headers")]
    pub headers: Vec<(String, String)>,
    /// The head ended before its blank line (end of capture or [`MAX_HEAD_LEN`]).
    pub truncated: bool,
    /// More than [`MAX_HEADERS`] fields: the rest were not recorded.
    pub headers_capped: bool,
}

impl H1Head {
    /// The request line as received, without CRLF.
    pub fn request_line(&self) -> String {
        format!("{} {} {}", self.method, self.target, self.version)
    }
}

/// Header names (ignoring case) whose values are never serialized: credentials and session
/// state must not reach the echo JSON or the database in clear.
const REDACTED: [&str; 4] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
];

fn serialize_headers<S: serde::Serializer>(
    headers: &[(String, String)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(headers.iter().map(|(n, v)| {
        let secret = REDACTED.iter().any(|r| r.eq_ignore_ascii_case(n));
        (n, (!secret).then_some(v))
    }))
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Split off one line ending in LF (a preceding CR is removed); `None` when no LF remains.
fn line(buf: &mut &[u8]) -> Option<Vec<u8>> {
    let at = buf.iter().position(|&b| b == b'\n')?;
    let (l, rest) = buf.split_at(at);
    *buf = rest.get(1..).unwrap_or_default();
    Some(l.strip_suffix(b"\r").unwrap_or(l).to_vec())
}

/// Parse an HTTP/1.x request head.
///
/// # Errors
///
/// [`H1Error`] when the request line or a header line is malformed. A head cut before its end
/// is not an error (`truncated`).
pub fn parse_head(bytes: &[u8]) -> Result<H1Head, H1Error> {
    let mut buf = bytes.get(..MAX_HEAD_LEN).unwrap_or(bytes);
    let request_line = line(&mut buf).ok_or(H1Error::BadRequestLine)?;
    let mut parts = request_line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(H1Error::BadRequestLine);
    };
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return Err(H1Error::BadMethod);
    }
    if target.is_empty() {
        return Err(H1Error::BadRequestLine);
    }
    match version {
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() => {}
        _ => return Err(H1Error::BadVersion),
    }
    let mut head = H1Head {
        method: String::from_utf8_lossy(method).into_owned(),
        target: String::from_utf8_lossy(target).into_owned(),
        version: String::from_utf8_lossy(version).into_owned(),
        headers: Vec::new(),
        truncated: false,
        headers_capped: false,
    };
    let mut n = 0;
    loop {
        let Some(l) = line(&mut buf) else {
            head.truncated = true;
            break;
        };
        if l.is_empty() {
            break;
        }
        n += 1;
        if l.first().is_some_and(|&b| b == b' ' || b == b'\t') {
            return Err(H1Error::ObsFold { line: n });
        }
        let colon = l
            .iter()
            .position(|&b| b == b':')
            .ok_or(H1Error::BadHeader { line: n })?;
        let (name, value) = l.split_at(colon);
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
            return Err(H1Error::BadHeader { line: n });
        }
        if head.headers.len() >= MAX_HEADERS {
            head.headers_capped = true;
            continue;
        }
        let value = value.get(1..).unwrap_or_default().trim_ascii();
        head.headers.push((
            String::from_utf8_lossy(name).into_owned(),
            String::from_utf8_lossy(value).into_owned(),
        ));
    }
    Ok(head)
}
