//! The QUIC Initial reader against independent references: the client Initials of RFC 9001
//! Appendix A.2 (version 1) and RFC 9369 Appendix A.2 (version 2) decrypt to the CRYPTO frame
//! the RFCs list, and the ClientHello inside gets JA4's `q` and its transport parameters in wire
//! order (`data/quic/SOURCE.md`). Then hostile inputs: typed errors, never a panic.

use exitvoice_protocol::quic::{ClientInitials, ParameterValue, QuicError, Version};
use exitvoice_protocol::tls::parse_client_hello;

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

/// JA4 and transport parameters of the RFC 9001 Appendix A hello, read from its bytes
/// (docs/quic.md, "Reference values"): `q13d0211an_62ed6f6ca7ad_4d634acda6c0`, and parameters 4, 5,
/// 7, 8, 1, 9, 15, 6 in that order with the values the RFC's hello encodes.
#[test]
fn rfc_client_hello_gets_quic_ja4_and_ordered_transport_parameters() {
    let initials = ClientInitials::start(&rfc_v1()).expect("opens");
    let hello = parse_client_hello(initials.client_hello().expect("complete")).expect("parses");
    assert_eq!(hello.server_name(), Some("example.com"));
    assert_eq!(
        hello.fingerprints().ja4(),
        "q13d0211an_62ed6f6ca7ad_4d634acda6c0"
    );
    let params = exitvoice_protocol::quic::transport_parameters(&hello)
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
            let _ = exitvoice_protocol::quic::decode_transport_parameters(&bytes);
        }
    }
}

/// Client Initials built for the tests, protected by rustls (the client side of the same
/// Initial keys), carrying the RFC's ClientHello split into CRYPTO frames at chosen offsets.
mod built {
    use rustls::quic::{Keys, Version as RustlsVersion};
    use rustls::Side;

    const DCID: [u8; 8] = [0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08];

    fn client_keys() -> Keys {
        rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256
            .tls13()
            .and_then(|suite| suite.quic_suite())
            .expect("AES-128-GCM has a QUIC suite")
            .keys(&DCID, Side::Client, RustlsVersion::V1)
    }

    /// One protected v1 Initial with packet number `pn` (4-byte field) whose payload is
    /// `frames` then PADDING up to `payload_len`.
    pub(super) fn initial(pn: u32, frames: &[u8], payload_len: usize) -> Vec<u8> {
        let keys = client_keys();
        let mut payload = frames.to_vec();
        payload.resize(payload_len, 0x00);
        let length = u16::try_from(4 + payload.len() + 16).expect("short") | 0x4000;
        let mut header = vec![0xc3, 0, 0, 0, 1, 8];
        header.extend_from_slice(&DCID);
        header.extend_from_slice(&[0, 0]); // no SCID, no token
        header.extend_from_slice(&length.to_be_bytes());
        header.extend_from_slice(&pn.to_be_bytes());
        let tag = keys
            .local
            .packet
            .encrypt_in_place(u64::from(pn), &header, &mut payload)
            .expect("encrypts");
        payload.extend_from_slice(tag.as_ref());
        let sample = payload[..16].to_vec();
        let (first, rest) = header.split_first_mut().expect("a header");
        let pn_start = rest.len() - 4;
        keys.local
            .header
            .encrypt_in_place(&sample, first, &mut rest[pn_start..])
            .expect("masks");
        header.extend_from_slice(&payload);
        header
    }

    /// A CRYPTO frame (RFC 9000 section 19.6) with 2-byte varints for offset and length.
    pub(super) fn crypto(offset: usize, data: &[u8]) -> Vec<u8> {
        let mut frame = vec![0x06];
        frame.extend_from_slice(&(u16::try_from(offset).expect("small") | 0x4000).to_be_bytes());
        frame
            .extend_from_slice(&(u16::try_from(data.len()).expect("small") | 0x4000).to_be_bytes());
        frame.extend_from_slice(data);
        frame
    }
}

/// Firefox's layout: the hello cut in two Initials, in two datagrams, the
/// second half sent first.
#[test]
fn a_hello_split_over_two_datagrams_in_reverse_order_is_reassembled() {
    let hello = rfc_client_hello();
    let (head, tail) = hello.split_at(100);
    let first = built::initial(0, &built::crypto(100, tail), 1162);
    let second = built::initial(1, &built::crypto(0, head), 1162);
    let mut initials = ClientInitials::start(&first).expect("opens");
    assert_eq!(initials.client_hello(), None, "half a hello");
    initials.push(&second).expect("opens");
    assert_eq!(initials.client_hello(), Some(&hello[..]));
    assert_eq!(initials.datagram_sizes(), &[1200, 1200]);
    let numbers: Vec<u64> = initials.packets().iter().map(|p| p.packet_number).collect();
    assert_eq!(numbers, vec![0, 1]);
}

/// Two Initials coalesced in one datagram, Chrome-style shuffled and overlapping frames with
/// PING and PADDING between them.
#[test]
fn coalesced_initials_with_shuffled_overlapping_frames_are_reassembled() {
    let hello = rfc_client_hello();
    let mut frames_a = built::crypto(150, &hello[150..]);
    frames_a.extend_from_slice(&[0x01, 0x00, 0x00]);
    frames_a.extend(built::crypto(40, &hello[40..160]));
    let mut frames_b = built::crypto(0, &hello[..50]);
    frames_b.push(0x01);
    let mut datagram = built::initial(5, &frames_a, 400);
    datagram.extend(built::initial(6, &frames_b, 700));
    datagram.resize(1200, 0x00);
    let initials = ClientInitials::start(&datagram).expect("opens");
    assert_eq!(initials.client_hello(), Some(&hello[..]));
    let packets = initials.packets();
    assert_eq!(packets.len(), 2);
    assert_eq!(packets[0].frames, vec![0x06, 0x01, 0x00, 0x06, 0x00]);
    assert_eq!(packets[1].crypto_frames, 1);
}

/// A retransmission that disagrees with what was received is a conflict, and a CRYPTO frame
/// past the 16 KiB cap is refused.
#[test]
fn conflicting_and_oversized_crypto_data_are_typed_errors() {
    let hello = rfc_client_hello();
    let mut other = hello[..50].to_vec();
    other[10] ^= 0xff;
    let mut frames = built::crypto(0, &hello[..50]);
    frames.extend(built::crypto(0, &other));
    assert_eq!(
        ClientInitials::start(&built::initial(0, &frames, 1162)).map(|_| ()),
        Err(QuicError::CryptoConflict(10))
    );
    let far = built::crypto(16_380, &[0x01; 10]);
    assert_eq!(
        ClientInitials::start(&built::initial(0, &far, 1162)).map(|_| ()),
        Err(QuicError::CryptoBeyondCap {
            end: 16_390,
            cap: exitvoice_protocol::quic::MAX_CRYPTO_BYTES
        })
    );
}

/// A STREAM frame inside an Initial is a protocol violation (RFC 9000 section 12.4).
#[test]
fn a_stream_frame_in_an_initial_is_refused() {
    let frames = [0x08, 0x00, 0x01, 0xaa];
    assert_eq!(
        ClientInitials::start(&built::initial(0, &frames, 1162)).map(|_| ()),
        Err(QuicError::UnexpectedFrame(0x08))
    );
}

/// Past 8 datagrams without a complete hello, the attempt stops.
#[test]
fn an_attempt_that_never_completes_is_capped() {
    let ping = built::initial(0, &[0x01], 1162);
    let mut initials = ClientInitials::start(&ping).expect("opens");
    for _ in 1..exitvoice_protocol::quic::MAX_INITIAL_PACKETS {
        initials.push(&ping).expect("under the cap");
    }
    assert_eq!(
        initials.push(&ping),
        Err(QuicError::TooManyPackets(
            exitvoice_protocol::quic::MAX_INITIAL_PACKETS
        ))
    );
}
