//! HEADERS (RFC 9113 section 6.2): padding, the priority fields, and the header block fragment.

use serde::Serialize;

use super::priority::PriorityFields;
use super::{FLAG_END_HEADERS, FLAG_END_STREAM, FLAG_PADDED, FLAG_PRIORITY};
use crate::codec::Reader;
use crate::h2::error::H2ErrorKind;

/// A HEADERS frame's fields (the decoded header block lives in [`crate::h2::Request`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Headers {
    /// Pad Length, when PADDED is set.
    pub pad_length: Option<u8>,
    /// Exclusive bit, stream dependency and weight, when the PRIORITY flag (0x20) is set.
    pub priority: Option<PriorityFields>,
    /// END_STREAM flag.
    pub end_stream: bool,
    /// END_HEADERS flag: no CONTINUATION follows.
    pub end_headers: bool,
    /// Length of the header block fragment in this frame (as captured).
    pub fragment_length: u32,
}

impl Headers {
    /// Read the payload; `truncated` means the capture cut it, so padding cannot be checked.
    pub(crate) fn read<'a>(
        r: &mut Reader<'a>,
        flags: u8,
        truncated: bool,
    ) -> Result<(Self, &'a [u8]), H2ErrorKind> {
        let cut = |short| if truncated { H2ErrorKind::Cut } else { short };
        let pad_length = if flags & FLAG_PADDED != 0 {
            Some(r.u8().ok_or(cut(H2ErrorKind::BadPadding))?)
        } else {
            None
        };
        let priority = if flags & FLAG_PRIORITY != 0 {
            Some(PriorityFields::read(r).ok_or(cut(H2ErrorKind::BadLength { frame: "HEADERS" }))?)
        } else {
            None
        };
        let rest = r.rest();
        let pad = usize::from(pad_length.unwrap_or(0));
        let fragment = if truncated {
            // The padding, if any, is somewhere past the cut; keep all that arrived.
            rest
        } else {
            // Padding that exceeds the remaining payload is a PROTOCOL_ERROR (section 6.2).
            let keep = rest.len().checked_sub(pad).ok_or(H2ErrorKind::BadPadding)?;
            rest.get(..keep).unwrap_or_default()
        };
        Ok((
            Self {
                pad_length,
                priority,
                end_stream: flags & FLAG_END_STREAM != 0,
                end_headers: flags & FLAG_END_HEADERS != 0,
                fragment_length: fragment.len() as u32,
            },
            fragment,
        ))
    }
}
