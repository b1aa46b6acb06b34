//! Why bytes are not a SYN we can read.

/// Why [`super::parse_syn`] refused its input. Problems inside the TCP options are no error:
/// they are facts of the SYN ([`super::OptionError`], p0f's `bad` quirk).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SynError {
    /// Fewer bytes than the named header needs.
    #[error("truncated {header} header: {needed} bytes needed, {available} available")]
    Truncated {
        /// `IPv4`, `IPv6` or `TCP`.
        header: &'static str,
        /// Bytes the header needs.
        needed: usize,
        /// Bytes there were.
        available: usize,
    },
    /// The IP version nibble is neither 4 nor 6.
    #[error("IP version {0} (neither 4 nor 6)")]
    IpVersion(u8),
    /// The IPv4 header length is below its 20-byte minimum (RFC 791 section 3.1: IHL ≥ 5).
    #[error("IPv4 header length of {0} 32-bit words (at least 5)")]
    IpHeaderLength(u8),
    /// The IP packet does not carry TCP (the protocol or next-header number).
    #[error("IP protocol {0}, not TCP (6)")]
    NotTcp(u8),
    /// An IPv4 fragment other than a whole packet (MF set or a fragment offset).
    #[error("an IPv4 fragment")]
    Fragment,
    /// The TCP data offset is below its 20-byte minimum (RFC 9293 section 3.1).
    #[error("TCP data offset of {0} 32-bit words (at least 5)")]
    DataOffset(u8),
    /// The segment is not an initial SYN (SYN set; ACK, FIN and RST clear).
    #[error("TCP flags 0x{0:02x}: not an initial SYN")]
    NotSyn(u8),
}
