//! Hostile and malformed input for the TLS parser and `scan`: every case ends in a typed error
//! (or, for malformed known extensions, a flagged extension), never a panic. Then proptest
//! properties over arbitrary bytes, prefixes, re-fragmentation and byte flips.

use std::sync::OnceLock;

use exitvoice_protocol::tls::{
    parse_client_hello, scan, scan_capped, ExtensionBody, ExtensionType, HelloScan, TlsError,
    DEFAULT_MAX_HELLO_LEN,
};
use proptest::prelude::*;

/// Real hellos from the public vectors (tests/data/ja4/clienthellos.jsonl), as handshake messages.
fn real_hellos() -> &'static [Vec<u8>] {
    static HELLOS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    HELLOS.get_or_init(|| {
        include_str!("data/ja4/clienthellos.jsonl")
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                hex::decode(v["client_hello_hex"].as_str().unwrap()).unwrap()
            })
            .collect()
    })
}

/// A Chrome hello (first vector of tls-handshake.pcapng with Chrome's JA4).
fn chrome() -> Vec<u8> {
    let line = include_str!("data/ja4/clienthellos.jsonl")
        .lines()
        .find(|l| {
            l.contains("\"pcap/tls-handshake.pcapng\"")
                && l.contains("\"ja4_spec\": \"t13d1516h2_8daaf6152771_e5627efa2ab1\"")
        })
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    hex::decode(v["client_hello_hex"].as_str().unwrap()).unwrap()
}

/// Wraps a handshake message into records of the given sizes (the last size repeats).
fn records(message: &[u8], sizes: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = message;
    let mut i = 0;
    while !rest.is_empty() {
        let size = sizes[i.min(sizes.len() - 1)].max(1);
        let (frag, tail) = rest.split_at(size.min(rest.len()));
        out.extend_from_slice(&[22, 3, 1]);
        out.extend_from_slice(&u16::try_from(frag.len()).unwrap().to_be_bytes());
        out.extend_from_slice(frag);
        rest = tail;
        i += 1;
    }
    out
}

fn u16s(values: &[u16]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_be_bytes()).collect()
}

fn with_len16(body: &[u8]) -> Vec<u8> {
    let mut out = u16::try_from(body.len()).unwrap().to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

/// A handshake message built from parts: TLS 1.2 legacy version, zero random, empty session
/// id, `ciphers`, null compression, then `extensions` as the raw extension block body.
fn hello_with_block(ciphers: &[u16], block: &[u8]) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend_from_slice(&[0; 32]);
    body.push(0);
    body.extend_from_slice(&with_len16(&u16s(ciphers)));
    body.extend_from_slice(&[1, 0]);
    body.extend_from_slice(&with_len16(block));
    let mut message = vec![1];
    message.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes()[1..]);
    message.extend_from_slice(&body);
    message
}

fn ext(kind: u16, data: &[u8]) -> Vec<u8> {
    let mut out = kind.to_be_bytes().to_vec();
    out.extend_from_slice(&with_len16(data));
    out
}

fn hello(ciphers: &[u16], extensions: &[Vec<u8>]) -> Vec<u8> {
    hello_with_block(ciphers, &extensions.concat())
}

#[test]
fn truncated_records_are_need_more_and_truncated() {
    let wire = records(&chrome(), &[200, 13, 1000]);
    for cut in 0..wire.len() {
        let prefix = &wire[..cut];
        assert!(
            matches!(scan(prefix), HelloScan::NeedMore { at_least } if at_least > cut),
            "cut {cut}"
        );
        assert!(
            matches!(
                parse_client_hello(prefix),
                Err(TlsError::Truncated { .. } | TlsError::Empty)
            ),
            "cut {cut}: {:?}",
            parse_client_hello(prefix).err()
        );
    }
}

#[test]
fn lengths_past_the_end() {
    let message = chrome();
    // Record length larger than what follows.
    let mut wire = records(&message, &[message.len()]);
    wire[4] = wire[4].wrapping_add(1);
    assert!(matches!(
        parse_client_hello(&wire),
        Err(TlsError::Truncated { .. })
    ));
    // Handshake length larger than the message.
    let mut bare = message.clone();
    bare[3] = bare[3].wrapping_add(1);
    assert!(matches!(
        parse_client_hello(&bare),
        Err(TlsError::Truncated { .. })
    ));
    // Cipher-suite length past the end of the body.
    let mut m = hello(&[0x1301], &[]);
    m[4 + 2 + 32 + 1 + 1] = 0xff;
    assert_eq!(
        parse_client_hello(&m).unwrap_err(),
        TlsError::Truncated {
            field: "cipher_suites"
        }
    );
    // An extension in the middle whose length runs past the block: an error, never a shorter
    // list.
    let mut block = ext(0x0017, &[]);
    block.extend_from_slice(&[0x00, 0x0a, 0x01, 0x00, 0x00, 0x02]);
    block.extend_from_slice(&ext(0xff01, &[0]));
    assert_eq!(
        parse_client_hello(&hello_with_block(&[0x1301], &block)).unwrap_err(),
        TlsError::Truncated {
            field: "extension data"
        }
    );
    // Extension block length past the end of the message.
    let mut m = hello(&[0x1301], &[ext(0x0017, &[])]);
    let block_len_at = 4 + 2 + 32 + 1 + 2 + 2 + 2;
    m[block_len_at + 1] += 5;
    assert_eq!(
        parse_client_hello(&m).unwrap_err(),
        TlsError::Truncated {
            field: "extensions"
        }
    );
}

#[test]
fn duplicate_and_zero_length_extensions() {
    let sni = |name: &[u8]| {
        let mut entry = vec![0];
        entry.extend_from_slice(&with_len16(name));
        ext(0x0000, &with_len16(&entry))
    };
    let m = hello(
        &[0x1301],
        &[
            sni(b"a.example"),
            ext(0x0017, &[]),
            sni(b"b.example"),
            ext(0x000a, &[]),
            ext(0x0015, &[]),
            ext(0x3333, &[]),
        ],
    );
    let h = parse_client_hello(&m).unwrap();
    let exts: Vec<_> = h.extensions().collect();
    let kinds: Vec<u16> = exts.iter().map(|e| e.kind.0).collect();
    assert_eq!(kinds, [0, 23, 0, 10, 21, 0x3333]);
    // The first server_name wins for `server_name()`; both stay in the model and in JA3/JA4.
    assert_eq!(h.server_name(), Some("a.example"));
    let fp = h.fingerprints();
    assert_eq!(fp.ja3(), "771,4865,0-23-0-10-21-13107,,");
    assert!(fp.ja4().starts_with("t12d0106"), "{}", fp.ja4());
    // A zero-length supported_groups is malformed (it needs its list length), flagged, kept.
    assert!(matches!(
        exts[3].body(),
        ExtensionBody::Malformed { ref error, .. } if matches!(**error, TlsError::Truncated { .. })
    ));
    // Zero-length padding and unknown extensions are fine.
    assert!(matches!(
        exts[4].body(),
        ExtensionBody::Padding { len: 0, .. }
    ));
    assert!(matches!(exts[5].body(), ExtensionBody::Unknown(_)));
}

#[test]
fn sslv2_and_non_handshake_and_wrong_type() {
    // SSLv2-format CLIENT-HELLO (RFC 6101 appendix E.2): 2-byte header with the high bit set.
    let v2 = [
        0x80, 0x2e, 0x01, 0x03, 0x01, 0x00, 0x15, 0x00, 0x00, 0x00, 0x10, 0x07, 0x00, 0xc0,
    ];
    assert_eq!(parse_client_hello(&v2).unwrap_err(), TlsError::Sslv2Hello);
    assert_eq!(scan(&v2), HelloScan::Invalid(TlsError::Sslv2Hello));
    let alert = [21, 3, 3, 0, 2, 2, 40];
    assert_eq!(
        parse_client_hello(&alert).unwrap_err(),
        TlsError::NotHandshakeRecord { content_type: 21 }
    );
    let app = [23, 3, 3, 0, 3, 1, 2, 3];
    assert_eq!(
        scan(&app),
        HelloScan::Invalid(TlsError::NotHandshakeRecord { content_type: 23 })
    );
    // A ServerHello (type 2) in a handshake record.
    let mut server_hello = chrome();
    server_hello[0] = 2;
    let wire = records(&server_hello, &[4096]);
    assert_eq!(
        parse_client_hello(&wire).unwrap_err(),
        TlsError::NotClientHello { handshake_type: 2 }
    );
    assert_eq!(
        scan(&wire),
        HelloScan::Invalid(TlsError::NotClientHello { handshake_type: 2 })
    );
    assert_eq!(parse_client_hello(&[]).unwrap_err(), TlsError::Empty);
    assert_eq!(
        parse_client_hello(b"GET / HTTP/1.1\r\n\r\n").unwrap_err(),
        TlsError::NotTls { first: b'G' }
    );
    // Record version 0x0203 is not TLS.
    let mut bad_version = records(&chrome(), &[4096]);
    bad_version[1] = 2;
    assert_eq!(
        parse_client_hello(&bad_version).unwrap_err(),
        TlsError::BadRecordVersion { version: 0x0201 }
    );
}

/// Deterministic pseudo-random bytes (xorshift64*).
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            (seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

#[test]
fn sixty_four_kib_of_random_bytes() {
    for seed in 1..=8u64 {
        let mut bytes = noise(64 * 1024, seed);
        assert!(parse_client_hello(&bytes).is_err());
        assert!(!matches!(scan(&bytes), HelloScan::Complete { .. }));
        // Same noise behind a plausible record header and behind a handshake header.
        bytes[..5].copy_from_slice(&[22, 3, 1, 0x40, 0x00]);
        bytes[5] = 1;
        assert!(parse_client_hello(&bytes).is_err());
        bytes[0] = 1;
        assert!(parse_client_hello(&bytes).is_err());
    }
}

#[test]
fn seventy_kib_hello() {
    // 32,000 cipher suites (64,000 bytes; the list length is a u16) plus 8 KiB of padding:
    // structurally valid, over 70 KiB.
    let ciphers: Vec<u16> = (0..32_000u32).map(|i| (i % 0xff00) as u16).collect();
    let message = hello(
        &ciphers,
        &[ext(0x0017, &[]), ext(0x0015, &[0; 8192]), ext(0xff01, &[0])],
    );
    assert!(message.len() > 70 * 1024);
    let wire = records(&message, &[16_384]);
    // The socket capture refuses it (64 KiB cap) as soon as the handshake header is in.
    assert_eq!(
        scan(&wire[..9]),
        HelloScan::Invalid(TlsError::HandshakeTooLong {
            len: message.len() - 4,
            cap: DEFAULT_MAX_HELLO_LEN
        })
    );
    assert_eq!(
        scan_capped(&wire, 128 * 1024),
        HelloScan::Complete { len: wire.len() }
    );
    // The parser, given all the bytes, reads it; JA4 caps the count at 99.
    let h = parse_client_hello(&wire).unwrap();
    assert_eq!(h.cipher_suites().len(), 32_000);
    assert!(h.fingerprints().ja4().starts_with("t12i9903"));
    // A record over 2^14 + 256 bytes is refused.
    let mut big = vec![22, 3, 1, 0x41, 0x01];
    big.extend_from_slice(&message[..0x4101]);
    assert_eq!(
        parse_client_hello(&big).unwrap_err(),
        TlsError::RecordTooLong { len: 0x4101 }
    );
}

#[test]
fn leftover_bytes_are_errors() {
    let m = hello(&[0x1301], &[ext(0x0017, &[])]);
    // After the extension block, inside the message.
    let mut after_block = m.clone();
    after_block.push(0);
    after_block[3] += 1;
    assert_eq!(
        parse_client_hello(&after_block).unwrap_err(),
        TlsError::TrailingData {
            field: "extensions",
            len: 1
        }
    );
    // After the bare message.
    let mut after_message = m.clone();
    after_message.push(0);
    assert!(matches!(
        parse_client_hello(&after_message).unwrap_err(),
        TlsError::TrailingData { .. }
    ));
    // After the hello inside its last record.
    let mut in_record = m.clone();
    in_record.extend_from_slice(&[14, 0, 0, 0]);
    assert_eq!(
        parse_client_hello(&records(&in_record, &[4096])).unwrap_err(),
        TlsError::TrailingData {
            field: "handshake message",
            len: 4
        }
    );
    // A record after the hello's records.
    let mut after_records = records(&m, &[4096]);
    after_records.extend_from_slice(&[20, 3, 3, 0, 1, 1]);
    assert!(matches!(
        parse_client_hello(&after_records).unwrap_err(),
        TlsError::TrailingData { .. }
    ));
    // Inside a known extension: supported_groups list shorter than its data → flagged.
    let groups = ext(0x000a, &[0, 2, 0, 29, 0, 23]);
    let h_bytes = hello(&[0x1301], &[groups]);
    let h = parse_client_hello(&h_bytes).unwrap();
    assert!(matches!(
        &h.extensions().next().unwrap().body(),
        ExtensionBody::Malformed { error, .. }
            if matches!(**error, TlsError::TrailingData { len: 2, .. })
    ));
    // Odd cipher-suite list length.
    let mut odd = hello(&[0x1301, 0x1302], &[]);
    let at = 4 + 2 + 32 + 1 + 1;
    odd[at] = 3;
    // Fix up: now one byte of the list is counted as compression length; the parser must fail
    // with a typed error whatever it meets first.
    assert!(parse_client_hello(&odd).is_err());
    let mut body = vec![3, 3];
    body.extend_from_slice(&[0; 32]);
    body.extend_from_slice(&[0, 0, 3, 0x13, 0x01, 0x13, 1, 0]);
    let mut msg = vec![1, 0, 0, u8::try_from(body.len()).unwrap()];
    msg.extend_from_slice(&body);
    assert_eq!(
        parse_client_hello(&msg).unwrap_err(),
        TlsError::BadListLength {
            field: "cipher_suites",
            len: 3,
            item: 2
        }
    );
}

#[test]
fn hello_without_extension_block() {
    let mut body = vec![3, 1];
    body.extend_from_slice(&[7; 32]);
    body.extend_from_slice(&[0, 0, 4, 0x00, 0x04, 0x00, 0x05, 1, 0]);
    let mut msg = vec![1, 0, 0, u8::try_from(body.len()).unwrap()];
    msg.extend_from_slice(&body);
    let h = parse_client_hello(&msg).unwrap();
    assert!(!h.has_extension_block());
    let fp = h.fingerprints();
    // salesforce/ja3 README: no extensions → the last three fields are empty.
    assert_eq!(fp.ja3(), "769,4-5,,,");
    assert!(fp.ja4().ends_with("_000000000000"));
    assert!(fp.ja4().starts_with("t10i020000_"));
}

#[test]
fn known_extension_body_decoding() {
    let h_bytes = hello(
        &[0x1301],
        &[
            ext(0x002b, &[4, 0x7a, 0x7a, 0x03, 0x04]),
            ext(0x0033, &[0, 5, 0x0a, 0x0a, 0, 1, 0]),
            ext(0x001c, &[0x40, 0x01]),
            ext(0x0029, &[0, 7, 0, 1, 0xaa, 0, 0, 0, 0, 0, 2, 1, 0xbb]),
            ext(0x0023, &[1, 2, 3]),
            ext(0xfe0d, &[0, 0, 1, 0, 1, 0x42, 0, 2, 9, 9, 0, 3, 1, 2, 3]),
            ext(0x44cd, &[0, 3, 2, b'h', b'2']),
        ],
    );
    let h = parse_client_hello(&h_bytes).unwrap();
    assert!(h.resumed());
    let body = |kind| h.extension(ExtensionType(kind)).unwrap();
    assert!(matches!(
        body(0x001c),
        ExtensionBody::RecordSizeLimit(0x4001)
    ));
    assert!(matches!(
        body(0x0029),
        ExtensionBody::PreSharedKey {
            identities: 1,
            binders: 1
        }
    ));
    assert!(matches!(
        body(0x0023),
        ExtensionBody::SessionTicket { len: 3 }
    ));
    match body(0x0033) {
        ExtensionBody::KeyShare(shares) => {
            let v: Vec<_> = shares.iter().map(|(g, l)| (g.0, l)).collect();
            assert_eq!(v, [(0x0a0a, 1)]);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        body(0xfe0d),
        ExtensionBody::EncryptedClientHello(exitvoice_protocol::tls::EchBody::Outer {
            kdf_id: 1,
            aead_id: 1,
            config_id: 0x42,
            enc_len: 2,
            payload_len: 3
        })
    ));
    assert!(
        matches!(body(0x44cd), ExtensionBody::ApplicationSettings(p) if p.iter().eq([&b"h2"[..]]))
    );
    // JA4 version comes from supported_versions (GREASE skipped): TLS 1.3.
    assert!(h.fingerprints().ja4().starts_with("t13i0107"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = scan(&bytes);
        if let Ok(h) = parse_client_hello(&bytes) {
            let _ = h.fingerprints();
        }
    }

    #[test]
    fn arbitrary_bodies_behind_valid_headers_never_panic(
        first in prop_oneof![Just(1u8), Just(22u8)],
        bytes in proptest::collection::vec(any::<u8>(), 0..1024),
    ) {
        let mut input = if first == 1 {
            let mut m = vec![1];
            m.extend_from_slice(&u32::try_from(bytes.len()).unwrap().to_be_bytes()[1..]);
            m
        } else {
            let mut m = vec![22, 3, 1];
            m.extend_from_slice(&u16::try_from(bytes.len() + 4).unwrap().to_be_bytes());
            m.push(1);
            m.extend_from_slice(&u32::try_from(bytes.len()).unwrap().to_be_bytes()[1..]);
            m
        };
        input.extend_from_slice(&bytes);
        if let Ok(h) = parse_client_hello(&input) {
            let _ = h.fingerprints();
            let _ = serde_json::to_value(&h);
        }
    }

    #[test]
    fn prefix_of_a_valid_hello_needs_more(
        index in 0usize..172,
        sizes in proptest::collection::vec(1usize..600, 1..6),
        cut in any::<proptest::sample::Index>(),
    ) {
        let wire = records(&real_hellos()[index], &sizes);
        let cut = cut.index(wire.len());
        let prefix = &wire[..cut];
        let scanned = scan(prefix);
        prop_assert!(
            matches!(scanned, HelloScan::NeedMore { at_least } if at_least > cut),
            "{:?}", scanned
        );
        prop_assert!(parse_client_hello(prefix).is_err());
    }

    #[test]
    fn refragmenting_keeps_fingerprints(
        index in 0usize..172,
        sizes in proptest::collection::vec(1usize..2000, 1..8),
    ) {
        let message = &real_hellos()[index];
        let whole = parse_client_hello(message).unwrap().fingerprints();
        let wire = records(message, &sizes);
        prop_assert_eq!(scan(&wire), HelloScan::Complete { len: wire.len() });
        let fragmented = parse_client_hello(&wire).unwrap();
        prop_assert_eq!(fragmented.fingerprints(), whole);
    }

    #[test]
    fn flipped_bytes_never_panic(
        index in 0usize..172,
        flips in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut message = real_hellos()[index].clone();
        let len = message.len();
        for (at, value) in flips {
            message[at.index(len)] = value;
        }
        let wire = records(&message, &[300]);
        let _ = scan(&wire);
        for input in [&message[..], &wire[..]] {
            if let Ok(h) = parse_client_hello(input) {
                let _ = h.fingerprints();
                let _ = serde_json::to_value(&h);
            }
        }
    }
}

/// A synthetic Chrome-like hello with the per-connection values as parameters.
struct Knobs {
    grease: u16,
    random: u8,
    session_id: Vec<u8>,
    key: u8,
    padding: usize,
    ech_aead: u16,
    ech_config: u8,
    ech_payload: usize,
    ticket: Vec<u8>,
    ticket_absent: bool,
    psk: bool,
    reverse: bool,
}

impl Default for Knobs {
    fn default() -> Self {
        Self {
            grease: 0x0a0a,
            random: 0,
            session_id: vec![7; 32],
            key: 1,
            padding: 100,
            ech_aead: 1,
            ech_config: 9,
            ech_payload: 144,
            ticket: Vec::new(),
            ticket_absent: false,
            psk: false,
            reverse: false,
        }
    }
}

/// Named extensions of the synthetic hello; `edit` may replace any of them.
fn synthetic(k: &Knobs, edit: impl Fn(u16, Vec<u8>) -> Vec<u8>) -> Vec<u8> {
    let g = k.grease;
    let list16 = |v: &[u16]| with_len16(&u16s(v));
    let names = |v: &[&[u8]]| {
        let mut body = Vec::new();
        for n in v {
            body.push(u8::try_from(n.len()).unwrap());
            body.extend_from_slice(n);
        }
        with_len16(&body)
    };
    let mut sni = vec![0];
    sni.extend_from_slice(&with_len16(b"echo.exitvoice.test"));
    let mut shares = u16s(&[g]);
    shares.extend_from_slice(&[0, 1, 0]);
    shares.extend_from_slice(&u16s(&[29, 32]));
    shares.extend_from_slice(&[k.key; 32]);
    let mut ech = vec![0];
    ech.extend_from_slice(&u16s(&[1, k.ech_aead]));
    ech.push(k.ech_config);
    ech.extend_from_slice(&with_len16(&[k.key; 32]));
    ech.extend_from_slice(&with_len16(&vec![k.key; k.ech_payload]));
    let mut named: Vec<(u16, Vec<u8>)> = vec![
        (0x0000, with_len16(&sni)),
        (0x0005, vec![1, 0, 0, 0, 0]),
        (0x000a, list16(&[g, 29, 23, 24])),
        (0x000b, vec![1, 0]),
        (0x000d, list16(&[0x0403, 0x0804, 0x0401])),
        (0x0010, names(&[b"h2", b"http/1.1"])),
        (0x0015, vec![0; k.padding]),
        (0x0017, vec![]),
        (0x001b, vec![2, 0, 2]),
        (0x001c, vec![0x40, 0x01]),
        (0x0022, list16(&[0x0403, 0x0503])),
        (0x0023, k.ticket.clone()),
        (0x002b, {
            let mut v = vec![6];
            v.extend_from_slice(&u16s(&[g, 0x0304, 0x0303]));
            v
        }),
        (0x002d, vec![1, 1]),
        (0x0033, with_len16(&shares)),
        (0x44cd, names(&[b"h2"])),
        (0xfe0d, ech),
        (0xff01, vec![0]),
    ];
    if k.ticket_absent {
        named.retain(|(kind, _)| *kind != 0x0023);
    }
    if k.psk {
        named.push((0x002a, vec![]));
        named.push((0x0029, vec![0, 7, 0, 1, 0xaa, 0, 0, 0, 1, 0, 2, 1, 0xbb]));
    }
    if k.reverse {
        named.reverse();
    }
    let mut exts = vec![ext(g ^ 0x1010, &[])];
    exts.extend(
        named
            .into_iter()
            .map(|(kind, data)| ext(kind, &edit(kind, data))),
    );
    exts.push(ext(g ^ 0x2020, &[0]));
    let mut body = vec![3, 3];
    body.extend_from_slice(&[k.random; 32]);
    body.push(u8::try_from(k.session_id.len()).unwrap());
    body.extend_from_slice(&k.session_id);
    body.extend_from_slice(&with_len16(&u16s(&[g, 0x1301, 0x1302, 0xc02b])));
    body.extend_from_slice(&[1, 0]);
    body.extend_from_slice(&with_len16(&exts.concat()));
    let mut message = vec![1];
    message.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes()[1..]);
    message.extend_from_slice(&body);
    message
}

fn voice(message: &[u8]) -> String {
    parse_client_hello(message)
        .unwrap()
        .fingerprints()
        .voice_id()
        .to_owned()
}

/// Every row of docs/voice-tls.md marked "no" changes nothing; every "yes" row changes the voice.
#[test]
fn voice_follows_the_documented_normalization() {
    let keep = |_: u16, data: Vec<u8>| data;
    let base = voice(&synthetic(&Knobs::default(), keep));
    let same = [
        Knobs {
            grease: 0xdada,
            ..Knobs::default()
        },
        Knobs {
            random: 0x55,
            ..Knobs::default()
        },
        Knobs {
            session_id: vec![],
            ..Knobs::default()
        },
        Knobs {
            key: 0x99,
            ..Knobs::default()
        },
        Knobs {
            padding: 3,
            ..Knobs::default()
        },
        Knobs {
            ech_aead: 3,
            ech_config: 200,
            ech_payload: 240,
            ..Knobs::default()
        },
        Knobs {
            ticket: vec![5; 180],
            ..Knobs::default()
        },
        Knobs {
            psk: true,
            ..Knobs::default()
        },
        // A TLS 1.3 resumption by rustls: pre_shared_key in, session_ticket out.
        Knobs {
            psk: true,
            ticket_absent: true,
            ..Knobs::default()
        },
        Knobs {
            reverse: true,
            ..Knobs::default()
        },
    ];
    for (i, k) in same.iter().enumerate() {
        assert_eq!(voice(&synthetic(k, keep)), base, "same-stack knob {i}");
    }
    let order_changes = parse_client_hello(&synthetic(
        &Knobs {
            reverse: true,
            ..Knobs::default()
        },
        keep,
    ))
    .unwrap()
    .fingerprints()
    .order_id()
    .to_owned();
    assert_ne!(
        order_changes,
        parse_client_hello(&synthetic(&Knobs::default(), keep))
            .unwrap()
            .fingerprints()
            .order_id()
    );
    // One edit per voiced field: each must move the voice.
    let edits: [(u16, Vec<u8>); 12] = [
        (0x000a, with_len16(&u16s(&[0x0a0a, 23, 29, 24]))),
        (0x000b, vec![2, 0, 1]),
        (0x000d, with_len16(&u16s(&[0x0804, 0x0403, 0x0401]))),
        (0x0010, {
            let mut v = vec![8];
            v.extend_from_slice(b"http/1.1");
            with_len16(&v)
        }),
        (0x001b, vec![4, 0, 1, 0, 2]),
        (0x001c, vec![0x40, 0x00]),
        (0x0022, with_len16(&u16s(&[0x0403]))),
        (0x002b, vec![2, 0x03, 0x04]),
        (0x002d, vec![1, 0]),
        (0x44cd, {
            let mut v = vec![2];
            v.extend_from_slice(b"h3");
            with_len16(&v)
        }),
        (0xff01, vec![1, 0]),
        (0x0005, vec![1, 0, 0, 0, 2, 0, 0]),
    ];
    for (kind, data) in edits {
        let edited = synthetic(
            &Knobs::default(),
            |k, d| if k == kind { data.clone() } else { d },
        );
        assert_ne!(voice(&edited), base, "edit of {kind:#06x}");
    }
    // Key-share groups (not bytes) count: drop the GREASE share.
    let mut share = Vec::new();
    share.extend_from_slice(&u16s(&[29, 32]));
    share.extend_from_slice(&[1; 32]);
    let edited = synthetic(&Knobs::default(), |k, d| {
        if k == 0x0033 {
            with_len16(&share)
        } else {
            d
        }
    });
    assert_ne!(voice(&edited), base, "key_share groups");
}
