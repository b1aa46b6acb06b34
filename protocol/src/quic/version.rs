//! QUIC versions with Initial keys: version 1 (RFC 9000) and version 2 (RFC 9369).

use std::fmt;

/// A QUIC version number as it is on the wire.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Version(pub u32);

impl Version {
    /// QUIC version 1 (RFC 9000 section 15).
    pub const V1: Self = Self(0x0000_0001);
    /// QUIC version 2 (RFC 9369 section 3.1).
    pub const V2: Self = Self(0x6b33_43cf);

    /// The long-header packet type bits of an Initial in this version, `None` for versions
    /// this reader has no keys for. Version 2 renumbers the types: Initial is 0b01
    /// (RFC 9369 section 3.2), not 0b00 as in version 1 (RFC 9000 section 17.2.2).
    pub(crate) fn initial_type(self) -> Option<u8> {
        match self {
            Self::V1 => Some(0b00),
            Self::V2 => Some(0b01),
            _ => None,
        }
    }

    /// The rustls version whose Initial salt and key labels match.
    pub(crate) fn rustls(self) -> Option<rustls::quic::Version> {
        match self {
            Self::V1 => Some(rustls::quic::Version::V1),
            Self::V2 => Some(rustls::quic::Version::V2),
            _ => None,
        }
    }

    /// A reserved version of the form `0x?a?a?a?a` that exercises version negotiation
    /// (RFC 9000 section 15).
    pub fn is_grease(self) -> bool {
        self.0 & 0x0f0f_0f0f == 0x0a0a_0a0a
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}

impl serde::Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format!("{:#010x}", self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_type_bits_differ_between_v1_and_v2() {
        assert_eq!(Version::V1.initial_type(), Some(0));
        assert_eq!(Version::V2.initial_type(), Some(1));
        assert_eq!(Version(0xff00_001d).initial_type(), None);
        assert!(Version(0x1a2a_3a4a).is_grease());
        assert!(!Version::V2.is_grease());
    }
}
