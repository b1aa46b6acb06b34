//! hyper's HTTP/1 and HTTP/2 servers configured with explicit limits, so what a peer can make a
//! connection hold does not depend on hyper's (changing) defaults.
//!
//! The HTTP/2 values answer the known flood attacks: rapid reset (CVE-2023-44487: HEADERS then
//! RST_STREAM in a loop) is bounded by [`MAX_PENDING_ACCEPT_RESET_STREAMS`] and
//! [`MAX_LOCAL_ERROR_RESET_STREAMS`], HPACK bombs by [`MAX_HEADER_LIST_SIZE`] and
//! [`HEADER_TABLE_SIZE`] (RFC 9113 section 6.5.2, RFC 7541 section 4.2), buffered request bodies
//! by the flow-control windows (RFC 9113 section 6.9.2).

use hyper::server::conn::{http1, http2};
use hyper_util::rt::TokioExecutor;

/// Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
pub const MAX_CONCURRENT_STREAMS: u32 = 100;
/// Largest decoded header list accepted per request (SETTINGS_MAX_HEADER_LIST_SIZE): 16 KiB.
pub const MAX_HEADER_LIST_SIZE: u32 = 16 * 1024;
/// HPACK dynamic table the server's decoder keeps (SETTINGS_HEADER_TABLE_SIZE): the RFC's 4 KiB.
pub const HEADER_TABLE_SIZE: u32 = 4096;
/// Largest frame payload accepted (SETTINGS_MAX_FRAME_SIZE): the RFC's minimum, 16 KiB.
pub const MAX_FRAME_SIZE: u32 = 16 * 1024;
/// Per-stream receive window: 64 KiB, enough for the default body cap.
pub const STREAM_WINDOW: u32 = 64 * 1024;
/// Per-connection receive window: 256 KiB, the most request body buffered per connection.
pub const CONNECTION_WINDOW: u32 = 256 * 1024;
/// Bytes of response data queued per stream before hyper stops polling the body.
pub const MAX_SEND_BUF_SIZE: usize = 64 * 1024;
/// Streams reset by the client before they were accepted, held at once; more is a GOAWAY
/// (rapid reset).
pub const MAX_PENDING_ACCEPT_RESET_STREAMS: usize = 20;
/// Streams the server reset because of client errors, per connection; more is a GOAWAY.
pub const MAX_LOCAL_ERROR_RESET_STREAMS: usize = 256;
/// HTTP/1 read buffer: bounds a request head (hyper refuses a head that does not fit).
pub const H1_MAX_BUF_SIZE: usize = 64 * 1024;

/// The HTTP/2 server for one connection.
pub(crate) fn http2() -> http2::Builder<TokioExecutor> {
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .max_header_list_size(MAX_HEADER_LIST_SIZE)
        .header_table_size(HEADER_TABLE_SIZE)
        .max_frame_size(MAX_FRAME_SIZE)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_send_buf_size(MAX_SEND_BUF_SIZE)
        .max_pending_accept_reset_streams(MAX_PENDING_ACCEPT_RESET_STREAMS)
        .max_local_error_reset_streams(MAX_LOCAL_ERROR_RESET_STREAMS);
    builder
}

/// The HTTP/1 server for one connection. hyper's own head timer is off: it starts when an
/// answer ends, so it would cut keep-alive connections that merely wait for their next request,
/// and it costs a timer per request; the connection task times each request from its first
/// byte instead (`capture::http`).
pub(crate) fn http1() -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .header_read_timeout(None)
        .max_buf_size(H1_MAX_BUF_SIZE);
    builder
}
