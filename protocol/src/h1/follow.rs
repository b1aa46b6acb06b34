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
    /// The stream offset the next call reads from (it may lie past the bytes arrived so far,
    /// while a sized body is still on its way).
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The head of request `index` (1 for the first) from `capture` (the connection's decrypted
    /// client bytes from stream offset `base` on); `None` when it is not there (not arrived, no
    /// longer kept, or after a body whose end is unknown).
    pub fn head(&mut self, capture: &[u8], base: usize, index: u32) -> Option<H1Head> {
        while !self.lost && self.read < index {
            let rest = capture.get(self.offset.checked_sub(base)?..)?;
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
            follower.head(wire, 0, 1).map(|h| h.target),
            Some("/a".to_owned())
        );
        assert_eq!(
            follower.head(wire, 0, 2).map(|h| h.target),
            Some("/b".to_owned())
        );
        assert_eq!(follower.head(wire, 0, 3), None, "not arrived yet");
        let more = [&wire[..], b"GET /c HTTP/1.1\r\n\r\n"].concat();
        assert_eq!(
            follower.head(&more, 0, 3).map(|h| h.target),
            Some("/c".to_owned())
        );

        let mut skipping = HeadFollower::default();
        assert_eq!(
            skipping.head(&more, 0, 3).map(|h| h.target),
            Some("/c".to_owned())
        );

        let chunked = b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
        let mut follower = HeadFollower::default();
        assert!(follower.head(chunked, 0, 1).is_some());
        assert_eq!(follower.head(chunked, 0, 2), None);
    }

    #[test]
    fn reads_from_a_window_that_starts_past_the_first_bytes() {
        let wire = b"GET /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nxyGET /b HTTP/1.1\r\n\r\n";
        let mut follower = HeadFollower::default();
        assert!(
            follower.head(&wire[..10], 0, 1).is_none(),
            "head not complete"
        );
        assert!(follower.head(wire, 0, 1).is_some());
        let at = follower.offset();
        assert_eq!(&wire[at..at + 3], b"GET");
        // Only the bytes from the follower's offset on are still kept.
        assert_eq!(
            follower.head(&wire[at..], at, 2).map(|h| h.target),
            Some("/b".to_owned())
        );
        // Bytes before the offset are not there any more: nothing to read.
        let mut late = HeadFollower::default();
        assert_eq!(late.head(&wire[5..], 5, 1), None);
    }
}
