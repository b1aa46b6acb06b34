//! HTTP/3 as a fingerprinter reads it: the client's control stream (its SETTINGS in wire
//! order), the first request's QPACK field section (pseudo-header and header order), and the
//! HTTP/3 voice and `h3_text` built from them.
//!
//! Pure functions over the bytes of QUIC streams; the streams themselves are the live server's
//! (`capture/quic/`). The `h3` crate is not used: it folds SETTINGS into fields and hides the
//! order of header fields, which is what a fingerprint needs (`docs/quic.md`).

mod error;
mod frame;
mod qpack;
mod settings;
mod voice;

pub use error::H3Error;
pub use frame::{
    encode_frame, get_varint, put_varint, read_frame, FrameHeader, FrameType, StreamType,
};
pub use qpack::{decode_field_section, encode_field_section, HeaderField, STATIC_TABLE};
pub use settings::{decode_settings, is_grease_setting, Setting};
pub use voice::{h3_text, h3_text_hash, voice_description, voice_id, H3Voice};
