//! Hand-made SYNs: each field set by hand, each odd one answered with a typed error or a typed
//! option fault, never a panic. The signatures of real SYNs are checked against `p0f -r` in
//! `tests/inspect_syn.rs`.

use super::*;

/// An IPv4 header (no options, DF, ID 0x1234, TTL 37) for a TCP header of `tcp_len` bytes.
fn ipv4(tcp_len: usize) -> Vec<u8> {
    let total = u16::try_from(20 + tcp_len).unwrap().to_be_bytes();
    #[rustfmt::skip]
    let header = vec![
        0x45, 0x00, total[0], total[1], 0x12, 0x34, 0x40, 0x00,
        37, 6, 0x00, 0x00, 127, 0, 0, 1, 127, 0, 0, 1,
    ];
    header
}

/// A TCP SYN header with `options` (padded by the caller to a multiple of 4).
fn tcp(options: &[u8]) -> Vec<u8> {
    let words = u8::try_from((20 + options.len()) / 4).unwrap();
    #[rustfmt::skip]
    let mut header = vec![
        0xc3, 0x50, 0x20, 0xfb, 0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00, 0x00,
        words << 4, 0x02, 0xfa, 0xf0, 0x00, 0x00, 0x00, 0x00,
    ];
    header.extend_from_slice(options);
    header
}

fn syn(options: &[u8]) -> Vec<u8> {
    let mut bytes = ipv4(20 + options.len());
    bytes.extend(tcp(options));
    bytes
}

/// Linux's SYN options: MSS 1200, SACK permitted, timestamps, NOP, window scale 7.
#[rustfmt::skip]
const LINUX_OPTIONS: [u8; 20] = [
    0x02, 0x04, 0x04, 0xb0, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
];

#[test]
fn reads_every_field_of_a_linux_shaped_syn() {
    let parsed = parse_syn(&syn(&LINUX_OPTIONS)).unwrap();
    let echo = echo(&parsed);
    assert_eq!(echo.ip_version, 4);
    assert_eq!((echo.ttl, echo.initial_ttl, echo.hops), (37, 64, 27));
    assert!(echo.df);
    assert_eq!(echo.ip_id, Some(0x1234));
    assert_eq!(echo.window, 0xfaf0);
    assert_eq!(echo.mss, Some(1200));
    assert_eq!(echo.window_scale, Some(7));
    assert!(echo.sack_permitted && echo.timestamps);
    assert_eq!(echo.options, [2, 4, 8, 1, 3]);
    assert_eq!(echo.quirks, ["df", "id+"]);
    assert_eq!(echo.options_error, None);
    // 64240 is 44 × 1460, the MSS of a 1500-byte IPv4 link (p0f README: "mss*4").
    assert_eq!(
        echo.p0f,
        "4:37+27:0:1200:mss*44,7:mss,sok,ts,nop,ws:df,id+:0"
    );
    assert!(echo.voice_id.0.starts_with(VOICE_PREFIX));
}

#[test]
fn the_voice_ignores_the_path_and_the_ip_version() {
    let near = parse_syn(&syn(&LINUX_OPTIONS)).unwrap();
    let mut far_bytes = syn(&LINUX_OPTIONS);
    far_bytes[8] = 50; // TTL
    far_bytes[4..6].copy_from_slice(&[0, 0]); // IP ID
    let far = parse_syn(&far_bytes).unwrap();
    assert_eq!(voice_id(&near), voice_id(&far));
    let mut other = LINUX_OPTIONS;
    other[19] = 8; // window scale
    assert_ne!(voice_id(&near), voice_id(&parse_syn(&syn(&other)).unwrap()));
}

#[test]
fn ipv6_hop_limit_and_flow_label() {
    #[rustfmt::skip]
    let mut bytes = vec![
        0x60, 0x01, 0x23, 0x45, 0x00, 40, 6, 64,
    ];
    bytes.extend([0; 31]);
    bytes.push(1);
    bytes.extend(tcp(&LINUX_OPTIONS));
    let parsed = parse_syn(&bytes).unwrap();
    let echo = echo(&parsed);
    assert_eq!((echo.ip_version, echo.ttl, echo.hops), (6, 64, 0));
    assert_eq!(echo.ip_id, None);
    assert_eq!(echo.quirks, ["flow"]);
    assert!(echo.p0f.starts_with("6:64+0:0:1200:"));
}

#[test]
fn truncated_headers_are_typed_errors() {
    let whole = syn(&LINUX_OPTIONS);
    for len in 0..whole.len() {
        let result = parse_syn(&whole[..len]);
        assert!(
            matches!(result, Err(SynError::Truncated { .. })),
            "{len}: {result:?}"
        );
    }
}

#[test]
fn impossible_headers_are_typed_errors() {
    let mut bytes = syn(&[]);
    bytes[0] = 0x55;
    assert_eq!(parse_syn(&bytes), Err(SynError::IpVersion(5)));
    bytes[0] = 0x44;
    assert_eq!(parse_syn(&bytes), Err(SynError::IpHeaderLength(4)));
    let mut bytes = syn(&[]);
    bytes[9] = 17;
    assert_eq!(parse_syn(&bytes), Err(SynError::NotTcp(17)));
    let mut bytes = syn(&[]);
    bytes[6] = 0x20; // more fragments
    assert_eq!(parse_syn(&bytes), Err(SynError::Fragment));
    let mut bytes = syn(&[]);
    bytes[32] = 0x40;
    assert_eq!(parse_syn(&bytes), Err(SynError::DataOffset(4)));
    let mut bytes = syn(&[]);
    bytes[33] = 0x12; // SYN+ACK
    assert_eq!(parse_syn(&bytes), Err(SynError::NotSyn(0x12)));
}

#[test]
fn an_option_past_the_header_is_a_typed_fault() {
    // MSS kind and length, then the header ends (padded with one NOP to 4 bytes).
    let parsed = parse_syn(&syn(&[0x01, 0x01, 0x02, 0x04])).unwrap();
    assert_eq!(
        parsed.options.error,
        Some(OptionError::PastHeader { kind: 2, offset: 2 })
    );
    assert!(parsed.quirks.contains(Quirks::BAD_OPTIONS));
    assert!(parsed.p0f_signature().contains(":nop,nop,mss:df,id+,bad:"));
}

#[test]
fn a_zero_length_option_is_a_typed_fault() {
    let parsed = parse_syn(&syn(&[0x1e, 0x00, 0x00, 0x00])).unwrap();
    assert_eq!(
        parsed.options.error,
        Some(OptionError::Length {
            kind: 0x1e,
            offset: 0,
            len: 0
        })
    );
    assert!(parsed.quirks.contains(Quirks::BAD_OPTIONS));
}

#[test]
fn unknown_kinds_keep_their_number() {
    // Kind 30 (MPTCP, RFC 8684) with 2 bytes of data, then EOL with one byte of padding.
    let parsed = parse_syn(&syn(&[
        0x1e, 0x04, 0xaa, 0xbb, 0x02, 0x04, 0x05, 0xb4, 0x00, 0x00, 0x00, 0x00,
    ]))
    .unwrap();
    assert_eq!(parsed.options.error, None);
    assert_eq!(parsed.options.mss, Some(1460));
    assert!(parsed.p0f_signature().contains(":?30,mss,eol+3:"));
}

#[test]
fn odd_option_values_are_p0f_quirks() {
    // Window scale 15 (above RFC 7323's 14), timestamps with TSval 0 and a TSecr, a wrong MSS
    // length byte, EOL followed by non-zero padding.
    #[rustfmt::skip]
    let options = [
        0x03, 0x03, 0x0f, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05,
        0x02, 0x05, 0x05, 0xb4, 0x00, 0x01, 0x00,
    ];
    let parsed = parse_syn(&syn(&options)).unwrap();
    let names: Vec<_> = parsed.quirks.names().collect();
    assert_eq!(names, ["df", "id+", "ts1-", "ts2+", "opt+", "exws", "bad"]);
    assert_eq!(
        parsed.options.error,
        Some(OptionError::Length {
            kind: 2,
            offset: 13,
            len: 5
        })
    );
}

#[test]
fn tcp_flags_and_fields_are_p0f_quirks() {
    let mut bytes = syn(&[]);
    bytes[24..28].copy_from_slice(&[0, 0, 0, 0]); // sequence number
    bytes[28..32].copy_from_slice(&[0, 0, 0, 9]); // ACK number, ACK not set
    bytes[33] = 0x02 | 0x08 | 0xc0; // SYN, PSH, ECE, CWR
    bytes[38..40].copy_from_slice(&[0, 1]); // urgent pointer, URG not set
    bytes[6] = 0x80; // reserved IPv4 flag, no DF
    bytes[4..6].copy_from_slice(&[0, 0]);
    let names: Vec<_> = parse_syn(&bytes).unwrap().quirks.names().collect();
    assert_eq!(
        names,
        ["id-", "ecn", "0+", "seq-", "ack+", "uptr+", "pushf+"]
    );
}

proptest::proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..120)) {
        if let Ok(parsed) = parse_syn(&bytes) {
            let echo = echo(&parsed);
            proptest::prop_assert!(echo.initial_ttl >= echo.ttl);
        }
    }

    #[test]
    fn arbitrary_options_never_panic(options in proptest::collection::vec(proptest::num::u8::ANY, 0..=10)) {
        let mut padded = options.clone();
        padded.resize(options.len().div_ceil(4) * 4, 0);
        let parsed = parse_syn(&syn(&padded)).unwrap();
        let _ = parsed.p0f_signature();
    }
}
