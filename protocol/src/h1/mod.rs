//! HTTP/1.x request head parsing (request line, header names in original case and wire order)
//! and the HTTP/1 voice.
//!
//! Input is the first bytes of a connection, capped: a head cut before its blank line is not an
//! error, it is flagged `truncated` (the last, partial line is dropped).

mod echo;
mod follow;
mod head;
mod voice;

pub use echo::echo;
pub use follow::HeadFollower;
pub use head::{parse_head, H1Error, H1Head, MAX_HEADERS, MAX_HEAD_LEN};
pub use voice::{voice_description, voice_id};
