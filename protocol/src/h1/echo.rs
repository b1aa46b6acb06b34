//! The HTTP/1 part of the echo JSON.

use exitvoice_schema::Http1Echo;

use super::{voice, H1Head};

/// The echo of one request head.
pub fn echo(head: &H1Head) -> Http1Echo {
    Http1Echo {
        request_line: head.request_line(),
        header_order: head.headers.iter().map(|(n, _)| n.clone()).collect(),
        voice_id: voice::voice_id(head),
    }
}
