//! TCP options of a SYN (RFC 9293 section 3.2), walked as p0f walks them so that our signature
//! and `p0f -r`'s agree on odd SYNs too: fixed-size options advance by their fixed size whatever
//! their length byte says (a wrong length byte is p0f's `bad` quirk), and an option that runs
//! past the header ends the walk (`bad` too).

use std::fmt;

use super::quirks::Quirks;
use crate::codec::Reader;

/// A TCP option kind (IANA "TCP Option Kind Numbers"); every byte is a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OptionKind(pub u8);

impl OptionKind {
    /// End of option list (RFC 9293 section 3.2).
    pub const EOL: Self = Self(0);
    /// No-operation (RFC 9293 section 3.2).
    pub const NOP: Self = Self(1);
    /// Maximum segment size (RFC 9293 section 3.7.1).
    pub const MSS: Self = Self(2);
    /// Window scale (RFC 7323 section 2.2).
    pub const WINDOW_SCALE: Self = Self(3);
    /// SACK permitted (RFC 2018 section 2).
    pub const SACK_PERMITTED: Self = Self(4);
    /// SACK (RFC 2018 section 3).
    pub const SACK: Self = Self(5);
    /// Timestamps (RFC 7323 section 3.2).
    pub const TIMESTAMPS: Self = Self(8);
}

/// Why the options did not read cleanly; the SYN still parses (p0f's `bad` quirk).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionError {
    /// An option runs past the end of the TCP header (or has no room for its length byte).
    #[error("option {kind} at byte {offset} runs past the TCP header")]
    PastHeader {
        /// The option's kind.
        kind: u8,
        /// Its offset in the options.
        offset: usize,
    },
    /// An option's length byte is impossible for its kind (zero, one, or out of its range).
    #[error("option {kind} at byte {offset} has length {len}")]
    Length {
        /// The option's kind.
        kind: u8,
        /// Its offset in the options.
        offset: usize,
        /// The length byte.
        len: u8,
    },
}

/// What a SYN's options said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Every option kind read, wire order.
    pub layout: Vec<OptionKind>,
    /// Bytes after an EOL (p0f's `eol+n`).
    pub eol_pad: u8,
    /// MSS option value.
    pub mss: Option<u16>,
    /// Window scale shift count.
    pub window_scale: Option<u8>,
    /// The timestamp option's two values (TSval, TSecr).
    pub timestamp: Option<(u32, u32)>,
    /// The first problem met, if any.
    pub error: Option<OptionError>,
}

impl Options {
    /// The SACK-permitted option was sent.
    pub fn sack_permitted(&self) -> bool {
        self.layout.contains(&OptionKind::SACK_PERMITTED)
    }

    fn fault(&mut self, error: OptionError, quirks: &mut Quirks) {
        quirks.set(Quirks::BAD_OPTIONS);
        self.error.get_or_insert(error);
    }
}

impl fmt::Display for OptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Reads the options area `bytes` (everything between the fixed TCP header and the data
/// offset), setting the option quirks in `quirks`.
pub(crate) fn parse(bytes: &[u8], quirks: &mut Quirks) -> Options {
    let mut options = Options::default();
    let mut r = Reader::new(bytes);
    while let Some(kind) = r.u8() {
        let offset = r.offset() - 1;
        options.layout.push(OptionKind(kind));
        let past = OptionError::PastHeader { kind, offset };
        // (expected length byte, bytes after the kind) of the fixed-size options.
        let fixed = match OptionKind(kind) {
            OptionKind::EOL => {
                // Everything after EOL is padding, which should be zero (RFC 9293 section
                // 3.2); p0f counts it (`eol+n`) and names non-zero padding `opt+`.
                let pad = r.rest();
                options.eol_pad = u8::try_from(pad.len()).unwrap_or(u8::MAX);
                if pad.iter().any(|b| *b != 0) {
                    quirks.set(Quirks::TRAILING_OPTIONS);
                }
                break;
            }
            OptionKind::NOP => continue,
            OptionKind::MSS => (4, 3),
            OptionKind::WINDOW_SCALE => (3, 2),
            OptionKind::SACK_PERMITTED => (2, 1),
            OptionKind::TIMESTAMPS => (10, 9),
            _ => {
                // SACK blocks are 10 to 34 bytes (RFC 2018 section 3); other kinds at least
                // 2 (kind and length) and at most the 40 bytes of the options area.
                let range = if OptionKind(kind) == OptionKind::SACK {
                    10..=34
                } else {
                    2..=40
                };
                let Some(len) = r.u8() else {
                    options.fault(past, quirks);
                    break;
                };
                if !range.contains(&len) {
                    options.fault(OptionError::Length { kind, offset, len }, quirks);
                    break;
                }
                if r.take(usize::from(len) - 2).is_none() {
                    options.fault(past, quirks);
                    break;
                }
                continue;
            }
        };
        let (expected, size) = fixed;
        let Some(body) = r.take(size) else {
            options.fault(past, quirks);
            break;
        };
        let mut body = Reader::new(body);
        let len = body.u8().unwrap_or_default();
        if len != expected {
            options.fault(OptionError::Length { kind, offset, len }, quirks);
        }
        match OptionKind(kind) {
            OptionKind::MSS => options.mss = body.u16(),
            OptionKind::WINDOW_SCALE => {
                let shift = body.u8().unwrap_or_default();
                // RFC 7323 section 2.3: a shift count above 14 is used as 14.
                if shift > 14 {
                    quirks.set(Quirks::EXCESSIVE_WS);
                }
                options.window_scale = Some(shift);
            }
            OptionKind::TIMESTAMPS => {
                let tsval = body.u32().unwrap_or_default();
                let tsecr = body.u32().unwrap_or_default();
                if tsval == 0 {
                    quirks.set(Quirks::ZERO_TS1);
                }
                // RFC 7323 section 3.2: TSecr is only valid with ACK set, so a SYN's should be
                // zero.
                if tsecr != 0 {
                    quirks.set(Quirks::NONZERO_TS2);
                }
                options.timestamp = Some((tsval, tsecr));
            }
            _ => {}
        }
    }
    options
}
