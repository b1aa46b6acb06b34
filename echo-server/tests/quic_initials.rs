//! The QUIC Initial reader against independent references: the client Initials of RFC 9001
//! Appendix A.2 (version 1) and RFC 9369 Appendix A.2 (version 2) decrypt to the CRYPTO frame
//! the RFCs list, and the ClientHello inside gets JA4's `q` and its transport parameters in wire
//! order (`data/quic/SOURCE.md`). Then hostile inputs: typed errors, never a panic.

use exitvoice_echo::quic::{ClientInitials, ParameterValue, QuicError, Version};
use exitvoice_echo::tls::parse_client_hello;

fn hex_file(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/data/quic/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).expect("vectors are in the repo");
    let digits: String = text.split_whitespace().collect();
    hex::decode(digits).expect("hex")
}

fn rfc_v1() -> Vec<u8> {
    hex_file("rfc9001-a2-client-initial.hex")
}

fn rfc_v2() -> Vec<u8> {
    hex_file("rfc9369-a2-client-initial.hex")
}

/// The ClientHello of the RFC's CRYPTO frame: the frame is `06 00 40f1` then 241 bytes.
fn rfc_client_hello() -> Vec<u8> {
    let frame = hex_file("rfc9001-a2-crypto-frame.hex");
    assert_eq!(&frame[..4], &[0x06, 0x00, 0x40, 0xf1]);
    frame[4..].to_vec()
}

#[test]
fn rfc_9001_client_initial_decrypts_to_the_listed_client_hello() {
    let datagram = rfc_v1();
    assert_eq!(datagram.len(), 1200);
    let initials = ClientInitials::start(&datagram).expect("the RFC's Initial opens");
    assert_eq!(initials.version(), Version::V1);
    assert_eq!(
        initials.first_dcid(),
        hex::decode("8394c8f03e515708").unwrap()
    );
    assert_eq!(initials.client_hello(), Some(&rfc_client_hello()[..]));
    let packet = &initials.packets()[0];
    // RFC 9001 A.2: packet number 2 in a 4-byte field, one CRYPTO frame then PADDING.
    assert_eq!(packet.packet_number, 2);
    assert_eq!(packet.pn_len, 4);
    assert_eq!(packet.frames, vec![0x06, 0x00]);
    assert_eq!(packet.crypto_frames, 1);
}

#[test]
fn rfc_9369_v2_client_initial_decrypts_to_the_same_client_hello() {
    let initials = ClientInitials::start(&rfc_v2()).expect("the RFC's v2 Initial opens");
    assert_eq!(initials.version(), Version::V2);
    assert_eq!(initials.client_hello(), Some(&rfc_client_hello()[..]));
    assert_eq!(initials.packets()[0].packet_number, 2);
}

/// JA4 and transport parameters of the RFC hello, as `specs/quic.md` section 6.1 reproduces them
/// from the bytes: `q13d0211an_62ed6f6ca7ad_4d634acda6c0`, and parameters 4, 5, 7, 8, 1, 9, 15,
/// 6 in that order with the values the RFC's hello encodes.
#[test]
fn rfc_client_hello_gets_quic_ja4_and_ordered_transport_parameters() {
    let initials = ClientInitials::start(&rfc_v1()).expect("opens");
    let hello = parse_client_hello(initials.client_hello().expect("complete")).expect("parses");
    assert_eq!(hello.server_name(), Some("example.com"));
    assert_eq!(
        hello.fingerprints().ja4(),
        "q13d0211an_62ed6f6ca7ad_4d634acda6c0"
    );
    let params = exitvoice_echo::quic::transport_parameters(&hello)
        .expect("extension 0x39")
        .expect("well formed");
    let got: Vec<(u64, ParameterValue)> = params.into_iter().map(|p| (p.id, p.value)).collect();
    let int = ParameterValue::Integer;
    assert_eq!(
        got,
        vec![
            (4, int((1 << 62) - 1)),
            (5, int(65_535)),
            (7, int(65_535)),
            (8, int(16)),
            (1, int(30_000)),
            (9, int(16)),
            (15, ParameterValue::Bytes("8394c8f03e515708".into())),
            (6, int(65_535)),
        ]
    );
}

#[test]
fn a_flipped_payload_bit_fails_the_tag() {
    let mut datagram = rfc_v1();
    datagram[600] ^= 0x01;
    assert_eq!(
        ClientInitials::start(&datagram).map(|_| ()),
        Err(QuicError::Decrypt)
    );
}

#[test]
fn version_2_bytes_under_a_version_1_label_do_not_open() {
    let mut datagram = rfc_v2();
    // Version 1 with the v2 type bits 01 is a 0-RTT packet, not an Initial.
    datagram[1..5].copy_from_slice(&[0, 0, 0, 1]);
    assert!(ClientInitials::start(&datagram).is_err());
}

#[test]
fn hostile_datagrams_are_typed_errors() {
    let v1 = rfc_v1();
    let cases: Vec<(&str, Vec<u8>, QuicError)> = vec![
        (
            "empty",
            vec![],
            QuicError::Truncated {
                field: "first byte",
            },
        ),
        (
            "short header",
            vec![0x40; 1200],
            QuicError::NotLongHeader(0x40),
        ),
        (
            "cut in the version",
            v1[..3].to_vec(),
            QuicError::Truncated { field: "version" },
        ),
        (
            "GREASE version",
            [&[0xc0, 0x1a, 0x2a, 0x3a, 0x4a][..], &v1[5..]].concat(),
            QuicError::UnsupportedVersion(0x1a2a_3a4a),
        ),
        (
            "cut in the dcid",
            v1[..10].to_vec(),
            QuicError::Truncated {
                field: "destination connection id",
            },
        ),
        (
            "a 21-byte dcid",
            [&v1[..5], &[21][..], &v1[6..]].concat(),
            QuicError::ConnectionIdLength(21),
        ),
        (
            "a 4-byte first dcid",
            [&v1[..5], &[4][..], &v1[6..10], &v1[14..]].concat(),
            QuicError::ConnectionIdLength(4),
        ),
        (
            "length past the datagram",
            v1[..600].to_vec(),
            QuicError::LengthBeyondDatagram {
                length: 1182,
                available: 582,
            },
        ),
        (
            "under 1200 bytes",
            trimmed(&v1, 1100),
            QuicError::DatagramTooShort(1100),
        ),
        (
            "too short to sample",
            tiny_length(&v1, 10),
            QuicError::TooShortToSample,
        ),
    ];
    for (name, datagram, want) in cases {
        assert_eq!(
            ClientInitials::start(&datagram).map(|_| ()),
            Err(want),
            "{name}"
        );
    }
}

/// `datagram` with its first packet's Length field (2 bytes at 16..18) rewritten so the packet
/// has `len` bytes after the header, and the datagram cut there plus padding to `total`.
fn trimmed(datagram: &[u8], total: usize) -> Vec<u8> {
    let mut out = datagram[..total].to_vec();
    let len = u16::try_from(total - 18).expect("short") | 0x4000;
    out[16..18].copy_from_slice(&len.to_be_bytes());
    out
}

fn tiny_length(datagram: &[u8], len: u16) -> Vec<u8> {
    let mut out = datagram.to_vec();
    out[16..18].copy_from_slice(&(len | 0x4000).to_be_bytes());
    out
}

/// Garbage coalesced after a good Initial is datagram padding: the hello still comes out.
#[test]
fn garbage_after_the_initial_is_padding() {
    let mut datagram = rfc_v1();
    datagram.extend_from_slice(&[0xc0, 0xff, 0x00]);
    datagram.extend_from_slice(&[0x55; 40]);
    let initials = ClientInitials::start(&datagram).expect("the first packet opens");
    assert_eq!(initials.client_hello(), Some(&rfc_client_hello()[..]));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any bytes: an Initial reader result, never a panic.
        #[test]
        fn arbitrary_datagrams_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1400)) {
            let _ = ClientInitials::start(&bytes);
        }

        /// The RFC Initial with one byte changed and cut anywhere: an error or a hello, never a
        /// panic.
        #[test]
        fn mutated_rfc_initials_never_panic(at in 0usize..1200, byte in any::<u8>(), cut in 0usize..1300) {
            let mut datagram = rfc_v1();
            datagram[at] = byte;
            datagram.truncate(cut);
            if let Ok(mut initials) = ClientInitials::start(&datagram) {
                let _ = initials.push(&datagram);
            }
        }

        /// Any transport parameter bytes decode or fail with a typed error.
        #[test]
        fn arbitrary_transport_parameters_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = exitvoice_echo::quic::decode_transport_parameters(&bytes);
        }
    }
}
