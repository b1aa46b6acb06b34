//! Following one HTTP/1.x connection's requests as they arrive: each call reads the next request
//! head where the last one (and its `Content-Length` body, RFC 9112 section 6.3) ended, so a
//! request on a keep-alive connection costs its own head, not the connection's history.

use super::head::{parse_head, H1Head};

/// The follower's state on one connection.
#[derive(Debug, Default)]
pub struct HeadFollower {
    /// Capture bytes consumed by the heads and bodies handed out so far.
    offset: usize,
    /// Requests handed out or skipped so far.
    read: u32,
    /// A chunked (or otherwise unsized) body or a malformed head: where the next head starts is
    /// unknown, so nothing more is read.
    lost: bool,
}

impl HeadFollower {
    /// The head of request `index` (1 for the first) from `capture` (the connection's decrypted
    /// client bytes from the start); `None` when it is not in the capture (cut by its cap, or
    /// after a body whose end is unknown).
    pub fn head(&mut self, capture: &[u8], index: u32) -> Option<H1Head> {
        while !self.lost && self.read < index {
            let rest = capture.get(self.offset..)?;
            let head_len = rest.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
            let head = match parse_head(rest.get(..head_len)?) {
                Ok(head) => head,
                Err(_) => {
                    self.lost = true;
                    return None;
                }
            };
            let mut body_len = 0_usize;
            for (name, value) in &head.headers {
                if name.eq_ignore_ascii_case("transfer-encoding") {
                    self.lost = true;
                }
                if name.eq_ignore_ascii_case("content-length") {
                    match value.trim().parse() {
                        Ok(len) => body_len = len,
                        Err(_) => self.lost = true,
                    }
                }
            }
            self.offset = self
                .offset
                .saturating_add(head_len)
                .saturating_add(body_len);
            self.read += 1;
            if self.read == index {
                return Some(head);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_heads_past_sized_bodies_and_stops_at_chunked_ones() {
        let wire = b"POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\n\r\n";
        let mut follower = HeadFollower::default();
        assert_eq!(
            follower.head(wire, 1).map(|h| h.target),
            Some("/a".to_owned())
        );
        assert_eq!(
            follower.head(wire, 2).map(|h| h.target),
            Some("/b".to_owned())
        );
        assert_eq!(follower.head(wire, 3), None, "not arrived yet");
        let more = [&wire[..], b"GET /c HTTP/1.1\r\n\r\n"].concat();
        assert_eq!(
            follower.head(&more, 3).map(|h| h.target),
            Some("/c".to_owned())
        );

        let mut skipping = HeadFollower::default();
        assert_eq!(
            skipping.head(&more, 3).map(|h| h.target),
            Some("/c".to_owned())
        );

        let chunked = b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
        let mut follower = HeadFollower::default();
        assert!(follower.head(chunked, 1).is_some());
        assert_eq!(follower.head(chunked, 2), None);
    }
}
