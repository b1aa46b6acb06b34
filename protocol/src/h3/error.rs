//! What can go wrong while reading a client's HTTP/3 bytes.

/// Why HTTP/3 stream bytes could not be read. Every variant comes from untrusted bytes.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum H3Error {
    /// The bytes ended inside the named field.
    #[error("HTTP/3 {field} truncated")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// A frame longer than the reader accepts.
    #[error("HTTP/3 frame of {length} bytes is past the cap of {cap}")]
    FrameTooLong {
        /// The frame's Length field.
        length: u64,
        /// The cap.
        cap: usize,
    },
    /// The field section refers to the dynamic table, which our SETTINGS forbid
    /// (QPACK_MAX_TABLE_CAPACITY 0, RFC 9204 section 3.2.3).
    #[error("QPACK field section refers to the dynamic table")]
    DynamicTable,
    /// A static table index past the table's 99 entries (RFC 9204 Appendix A).
    #[error("QPACK static index {0} is out of range")]
    StaticIndex(u64),
    /// A prefixed integer that does not fit (RFC 9204 section 4.1.1).
    #[error("QPACK integer overflow")]
    IntegerOverflow,
    /// A Huffman string that does not decode (RFC 7541 section 5.2, used by RFC 9204 4.1.2).
    #[error("QPACK Huffman string: {0}")]
    Huffman(#[from] crate::h2::hpack::HuffmanError),
    /// The decoded field section is larger than the cap.
    #[error("QPACK field section over {0} bytes")]
    FieldSectionTooLarge(usize),
}
