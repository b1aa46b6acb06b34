//! Untrusted HTTP/3 stream bytes: the frame reader, the SETTINGS decoder and the QPACK reader
//! answer a value or a typed error for any input, never a panic, and never read past a frame.

use exitvoice_protocol::h3;
use proptest::prelude::*;

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = h3::decode_settings(&bytes);
        let _ = h3::decode_field_section(&bytes);
        if let Ok(Some(frame)) = h3::read_frame(&bytes, 256) {
            prop_assert!(frame.end() <= bytes.len());
            prop_assert!(frame.payload_len <= 256);
        }
    }

    /// A valid field section with one byte changed and cut anywhere.
    #[test]
    fn mutated_field_sections_never_panic(at in 0usize..64, byte in any::<u8>(), cut in 0usize..80) {
        let mut section = h3::encode_field_section(&[
            (":method", "GET"),
            (":authority", "echo.exitvoice.test"),
            (":scheme", "https"),
            (":path", "/api/all"),
            ("user-agent", "proptest"),
        ]);
        let at = at % section.len();
        section[at] = byte;
        section.truncate(cut);
        let _ = h3::decode_field_section(&section);
    }
}
