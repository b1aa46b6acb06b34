//! The QUIC voice: what a client's first Initials and its transport parameters say about its
//! QUIC stack, with what changes between its connections normalised away (docs/quic.md).
//!
//! `voice_id = "quicv2_" + hex(sha256(description))[..24]`, the description being:
//!
//! ```text
//! quicv2
//! v=<version, hex>
//! cid=<first DCID length>,<SCID length>
//! token=<0|1>
//! pn=<1 when the first packet number is 1 (Chrome always), else x>,<its length in bytes>
//! crypto=<in_order|reversed|shuffled>
//! pad=<in_packet|after_packet|both|none>
//! tp=<transport parameters, normalised, ';'-joined>
//! ```
//!
//! (`quicv1_` voices were hashed without the `crypto` and `pad` lines, which
//! docs/quic.md, "The voices", explains, and do not compare with these.)
//!
//! Transport parameters (docs/quic.md, "The voices"): sorted by id; GREASE ids (RFC 9000
//! section 18.1) become one `GREASE` each, at the end; integers as `id:value`;
//! google_connection_options (0x3128) as `id:TAGS`; version_information (0x11 and the draft
//! 0xff73db, RFC 9368 section 3) as `id:chosen@list` with GREASE versions written `GREASE`;
//! other byte values as `id` alone (connection ids are random); google_initial_rtt (0x3127) left
//! out (a cached RTT, present only on return visits). Chrome shuffles the parameter order per
//! connection, so wire order is shown, not hashed. Connection ids, packet numbers other than
//! the "always 1" trait, datagram sizes (they follow the path MTU and IP version) and the
//! frame layout (Chrome draws it afresh per connection) are recorded, not hashed; of the layout
//! only the CRYPTO order and where the padding sits are (`super::layout`).

use sha2::{Digest as _, Sha256};

use exitvoice_schema::VoiceId;

use super::{
    crypto_order, padding_where, InitialPacket, ParameterValue, TransportParameter, Version,
};
use crate::text::hex_id;

const GOOGLE_INITIAL_RTT: u64 = 0x3127;
const GOOGLE_CONNECTION_OPTIONS: u64 = 0x3128;
const VERSION_INFORMATION: u64 = 0x11;
const VERSION_INFORMATION_DRAFT: u64 = 0xff_73db;

/// One parameter as the voice writes it.
fn normalised(parameter: &TransportParameter) -> Option<String> {
    let id = parameter.id;
    match (&parameter.value, id) {
        (_, GOOGLE_INITIAL_RTT) => None,
        (ParameterValue::Integer(value), _) => Some(format!("{id}:{value}")),
        (ParameterValue::Bytes(hex_value), GOOGLE_CONNECTION_OPTIONS) => {
            let bytes = hex::decode(hex_value).unwrap_or_default();
            Some(format!("{id}:{}", String::from_utf8_lossy(&bytes)))
        }
        (ParameterValue::Bytes(hex_value), VERSION_INFORMATION | VERSION_INFORMATION_DRAFT) => {
            let bytes = hex::decode(hex_value).unwrap_or_default();
            let versions: Vec<String> = bytes
                .chunks(4)
                .map(|chunk| {
                    let mut word = [0_u8; 4];
                    word[..chunk.len()].copy_from_slice(chunk);
                    let version = Version(u32::from_be_bytes(word));
                    if version.is_grease() {
                        "GREASE".to_owned()
                    } else {
                        format!("{:x}", version.0)
                    }
                })
                .collect();
            let (chosen, list) = versions
                .split_first()
                .map_or((String::new(), &[][..]), |(c, l)| (c.clone(), l));
            Some(format!("{id}:{chosen}@{}", list.join(",")))
        }
        (ParameterValue::Bytes(_), _) => Some(id.to_string()),
    }
}

/// The normalised transport parameters, as the voice's `tp=` line holds them.
pub fn normalised_parameters(parameters: &[TransportParameter]) -> String {
    let mut plain: Vec<&TransportParameter> = parameters.iter().filter(|p| !p.grease).collect();
    plain.sort_by_key(|p| p.id);
    let mut out: Vec<String> = plain.into_iter().filter_map(normalised).collect();
    out.extend(
        parameters
            .iter()
            .filter(|p| p.grease)
            .map(|_| "GREASE".to_owned()),
    );
    out.join(";")
}

/// The text [`voice_id`] hashes.
pub fn voice_description(
    version: Version,
    first_dcid_len: usize,
    packets: &[InitialPacket],
    parameters: &[TransportParameter],
) -> String {
    let first = packets.first();
    let scid_len = first.map_or(0, |p| p.scid_len);
    let token = first.is_some_and(|p| p.token_len > 0);
    let pn_one = if first.is_some_and(|p| p.packet_number == 1) {
        "1"
    } else {
        "x"
    };
    let pn_len = first.map_or(0, |p| p.pn_len);
    format!(
        "quicv2\nv={:x}\ncid={first_dcid_len},{scid_len}\ntoken={}\npn={pn_one},{pn_len}\n\
         crypto={}\npad={}\ntp={}\n",
        version.0,
        u8::from(token),
        crypto_order(packets).as_str(),
        padding_where(packets).as_str(),
        normalised_parameters(parameters)
    )
}

/// The QUIC voice, `quicv2_` + 24 lowercase hex.
pub fn voice_id(
    version: Version,
    first_dcid_len: usize,
    packets: &[InitialPacket],
    parameters: &[TransportParameter],
) -> VoiceId {
    let text = voice_description(version, first_dcid_len, packets, parameters);
    let digest = Sha256::digest(text.as_bytes());
    VoiceId(hex_id("quicv2_", digest.get(..12).unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quic::decode_transport_parameters;

    fn packet(pn: u64) -> InitialPacket {
        InitialPacket {
            packet_number: pn,
            pn_len: 1,
            dcid_len: 8,
            scid_len: 0,
            token_len: 0,
            reserved_bits: 0,
            frames: vec![6],
            crypto_frames: 1,
            crypto_offsets: vec![0],
            padding_after: false,
        }
    }

    /// Two Chrome-like parameter sets that differ only in order, GREASE id and value, initial
    /// RTT and connection ids: one voice.
    #[test]
    fn order_grease_and_volatile_values_are_normalised() {
        // 1=30000, 0x3128="RVCM", GREASE 27 = 7 bytes, 0x0f = empty, 0x3127 = 4132,
        // 0xff73db = chosen 1, list [GREASE 0x1a2a3a4a, 1].
        let a = hex::decode(concat!(
            "01",
            "0480007530",
            "7128",
            "04",
            "5256434d",
            "1b",
            "07",
            "01020304050607",
            "0f",
            "00",
            "7127",
            "02",
            "5024",
            "c000000000ff73db",
            "0c",
            "00000001",
            "1a2a3a4a",
            "00000001",
        ))
        .expect("hex");
        let b = hex::decode(concat!(
            "c000000000ff73db",
            "0c",
            "00000001",
            "fafafafa",
            "00000001",
            "0f",
            "04",
            "01020304",
            "7128",
            "04",
            "5256434d",
            "40f4",
            "01",
            "09",
            "01",
            "0480007530",
        ))
        .expect("hex");
        let (a, b) = (
            decode_transport_parameters(&a).expect("a"),
            decode_transport_parameters(&b).expect("b"),
        );
        assert_eq!(
            normalised_parameters(&a),
            "1:30000;15;12584:RVCM;16741339:1@GREASE,1;GREASE"
        );
        assert_eq!(normalised_parameters(&a), normalised_parameters(&b));
        let packets = [packet(1)];
        assert_eq!(
            voice_id(Version::V1, 8, &packets, &a),
            voice_id(Version::V1, 8, &packets, &b)
        );
        assert_ne!(
            voice_id(Version::V1, 8, &packets, &a),
            voice_id(Version::V1, 8, &[packet(7)], &a)
        );
        assert_ne!(
            voice_id(Version::V1, 8, &packets, &a),
            voice_id(Version::V2, 8, &packets, &a)
        );
        // The CRYPTO order and the padding's place are the stack's: they count.
        let mut out_of_order = [packet(1), packet(2)];
        out_of_order[0].crypto_offsets = vec![700];
        let mut padded_after = packet(1);
        padded_after.padding_after = true;
        for other in [&out_of_order[..], &[padded_after][..]] {
            assert_ne!(
                voice_id(Version::V1, 8, &packets, &a),
                voice_id(Version::V1, 8, other, &a)
            );
        }
    }
}
