//! Two traits of a client's Initials that stay with its QUIC stack while the layout itself is
//! drawn afresh per connection (docs/quic.md, "The voices"): the order its CRYPTO frames arrive
//! in, and where its padding sits. Chrome splits the ClientHello into many CRYPTO frames and
//! sends them out of order ("chaos protection"), so the frame list varies and these do not.

use serde::Serialize;

use super::frame::PADDING;
use super::InitialPacket;

/// The order of the CRYPTO frames' offsets over all Initials, in the order read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CryptoOrder {
    /// Each frame starts after the one before (one frame included).
    InOrder,
    /// Each frame starts before the one before.
    Reversed,
    /// Anything else, retransmitted offsets included.
    Shuffled,
}

impl CryptoOrder {
    /// The name in JSON and in the voice.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InOrder => "in_order",
            Self::Reversed => "reversed",
            Self::Shuffled => "shuffled",
        }
    }
}

/// Where the Initials' padding is (RFC 9000 section 14.1: a client's Initial datagrams are
/// padded to 1,200 bytes, with PADDING frames or bytes after the packets).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PaddingWhere {
    /// PADDING frames inside the packets only.
    InPacket,
    /// Bytes after the packets only.
    AfterPacket,
    /// Both.
    Both,
    /// Neither (the packets alone fill the datagrams).
    None,
}

impl PaddingWhere {
    /// The name in JSON and in the voice.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InPacket => "in_packet",
            Self::AfterPacket => "after_packet",
            Self::Both => "both",
            Self::None => "none",
        }
    }
}

/// The CRYPTO order of `packets`.
pub fn crypto_order(packets: &[InitialPacket]) -> CryptoOrder {
    let offsets: Vec<u64> = packets
        .iter()
        .flat_map(|p| p.crypto_offsets.iter().copied())
        .collect();
    if offsets.windows(2).all(|w| w[0] < w[1]) {
        CryptoOrder::InOrder
    } else if offsets.windows(2).all(|w| w[0] > w[1]) {
        CryptoOrder::Reversed
    } else {
        CryptoOrder::Shuffled
    }
}

/// Where `packets` were padded.
pub fn padding_where(packets: &[InitialPacket]) -> PaddingWhere {
    let inside = packets.iter().any(|p| p.frames.contains(&PADDING));
    let after = packets.iter().any(|p| p.padding_after);
    match (inside, after) {
        (true, false) => PaddingWhere::InPacket,
        (false, true) => PaddingWhere::AfterPacket,
        (true, true) => PaddingWhere::Both,
        (false, false) => PaddingWhere::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(offsets: &[u64], frames: &[u64], padding_after: bool) -> InitialPacket {
        InitialPacket {
            packet_number: 0,
            pn_len: 1,
            dcid_len: 8,
            scid_len: 0,
            token_len: 0,
            reserved_bits: 0,
            frames: frames.to_vec(),
            crypto_frames: offsets.len(),
            crypto_offsets: offsets.to_vec(),
            padding_after,
        }
    }

    #[test]
    fn orders_over_all_packets_in_the_order_read() {
        let one = [packet(&[0], &[6], false)];
        assert_eq!(crypto_order(&one), CryptoOrder::InOrder);
        let split = [packet(&[0, 500], &[6], false), packet(&[900], &[6], false)];
        assert_eq!(crypto_order(&split), CryptoOrder::InOrder);
        let back = [packet(&[900], &[6], false), packet(&[500, 0], &[6], false)];
        assert_eq!(crypto_order(&back), CryptoOrder::Reversed);
        let chaos = [packet(&[300, 0, 900], &[6], false)];
        assert_eq!(crypto_order(&chaos), CryptoOrder::Shuffled);
        let again = [packet(&[0], &[6], false), packet(&[0], &[6], false)];
        assert_eq!(crypto_order(&again), CryptoOrder::Shuffled);
    }

    #[test]
    fn padding_inside_after_both_or_none() {
        let cases = [
            (
                vec![packet(&[0], &[6, PADDING], false)],
                PaddingWhere::InPacket,
            ),
            (vec![packet(&[0], &[6], true)], PaddingWhere::AfterPacket),
            (
                vec![packet(&[0], &[6, PADDING], false), packet(&[9], &[6], true)],
                PaddingWhere::Both,
            ),
            (vec![packet(&[0], &[6], false)], PaddingWhere::None),
        ];
        for (packets, expected) in cases {
            assert_eq!(padding_where(&packets), expected);
        }
    }
}
