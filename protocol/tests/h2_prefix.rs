//! Whole client prefixes: python-hyper fixtures (tests/tools/h2_vectors.py; expected values are
//! what hyperframe/hpack decoded and the published Akamai strings, docs/voice-http.md), hostile
//! input, caps, truncation.

use exitvoice_protocol::classify::browser_profile;
use exitvoice_protocol::h2::{
    self, akamai_fingerprint, akamai_fingerprint_hash, akamai_variant, parse_prefix, AkamaiVariant,
    H2ErrorKind, Payload, PREFACE,
};
use serde_json::Value;

fn fixture(name: &str) -> (Vec<u8>, Value) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/h2/");
    let bin = std::fs::read(format!("{dir}{name}.bin")).expect("fixture bin");
    let json = std::fs::read_to_string(format!("{dir}{name}.json")).expect("fixture json");
    (
        bin,
        serde_json::from_str(&json).expect("fixture json parses"),
    )
}

/// Frames and decoded fields equal what hyperframe/hpack decoded.
fn check_against_python(name: &str) {
    let (bin, want) = fixture(name);
    let p = parse_prefix(&bin).expect("fixture parses");
    assert!(!p.truncated, "{name}");
    let frames = want["frames"].as_array().expect("frames");
    assert_eq!(p.frames.len(), frames.len(), "{name}: frame count");
    for (got, want) in p.frames.iter().zip(frames) {
        assert_eq!(u64::from(got.header.kind.0), want["type"], "{name}");
        assert_eq!(u64::from(got.header.flags), want["flags"], "{name}");
        assert_eq!(u64::from(got.header.stream_id), want["stream_id"], "{name}");
        assert_eq!(u64::from(got.header.length), want["length"], "{name}");
        match &got.payload {
            Payload::Settings(s) => {
                let pairs: Vec<Value> = s
                    .entries
                    .iter()
                    .map(|e| serde_json::json!([e.id, e.value]))
                    .collect();
                assert_eq!(Value::from(pairs), want["settings"], "{name}");
            }
            Payload::WindowUpdate(w) => assert_eq!(u64::from(w.increment), want["increment"]),
            Payload::Priority(pr) => {
                let f = pr.fields;
                assert_eq!(
                    serde_json::json!([f.exclusive, f.dependency, f.weight_byte]),
                    want["priority"]
                );
            }
            Payload::Headers(h) => {
                if let Some(f) = h.priority {
                    assert_eq!(
                        serde_json::json!([f.exclusive, f.dependency, f.weight_byte]),
                        want["priority"]
                    );
                }
            }
            _ => {}
        }
    }
    let requests = want["requests"].as_array().expect("requests");
    assert_eq!(p.requests.len(), requests.len(), "{name}: request count");
    for (got, want) in p.requests.iter().zip(requests) {
        assert_eq!(u64::from(got.stream_id), want["stream_id"]);
        let fields: Vec<Value> = got
            .block
            .fields()
            .map(|f| {
                serde_json::json!([
                    String::from_utf8_lossy(f.name),
                    String::from_utf8_lossy(f.value)
                ])
            })
            .collect();
        assert_eq!(Value::from(fields), want["fields"], "{name}");
    }
    assert_eq!(akamai_fingerprint(&p), want["akamai"], "{name}");
}

#[test]
fn python_fixtures_decode_as_hyperframe_and_hpack_do() {
    for name in [
        "chrome_shaped",
        "chrome_grease",
        "firefox_shaped",
        "firefox_legacy_tree",
        "continuation_two_requests",
        "python_h2_client",
    ] {
        check_against_python(name);
    }
}

#[test]
fn chrome_shaped_prefix_gives_the_spec_akamai_string() {
    let (bin, _) = fixture("chrome_shaped");
    let p = parse_prefix(&bin).expect("parses");
    let fp = akamai_fingerprint(&p);
    // Chrome 119-150 (docs/voice-http.md, "Browser profiles").
    assert_eq!(fp, "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p");
    // The same string and md5 as tls.browserleaks.com reports for Chrome 143 (akamai_hash).
    assert_eq!(
        akamai_fingerprint_hash(&fp),
        "52d84b11737d980aef856699f885ca86"
    );
    let prio = p
        .first_request()
        .and_then(|r| r.priority)
        .expect("priority");
    assert!(prio.exclusive);
    assert_eq!((prio.weight_byte, prio.weight), (255, 256));
    assert_eq!(browser_profile(&p).map(|b| b.name), Some("chrome-119+"));
}

#[test]
fn firefox_shaped_prefixes_give_the_spec_akamai_strings() {
    let (bin, _) = fixture("firefox_shaped");
    let p = parse_prefix(&bin).expect("parses");
    assert_eq!(
        akamai_fingerprint(&p),
        "1:65536;2:0;4:131072;5:16384|12517377|0|m,p,a,s"
    );
    assert_eq!(browser_profile(&p).map(|b| b.name), Some("firefox-133+"));
    // The Akamai paper's example, Firefox 53.
    let (bin, _) = fixture("firefox_legacy_tree");
    let p = parse_prefix(&bin).expect("parses");
    assert_eq!(
        akamai_fingerprint(&p),
        "1:65536;4:131072;5:16384|12517377|3:0:0:201,5:0:0:101,7:0:0:1,9:0:7:1,11:0:3:1|m,p,a,s"
    );
    assert_eq!(
        akamai_variant(&p, AkamaiVariant::PriorityWireWeight),
        "1:65536;4:131072;5:16384|12517377|3:0:0:200,5:0:0:100,7:0:0:0,9:0:7:0,11:0:3:0|m,p,a,s"
    );
    assert!(browser_profile(&p).is_none());
}

#[test]
fn grease_setting_is_kept_canonically_and_dropped_by_the_variant() {
    let (bin, _) = fixture("chrome_grease");
    let p = parse_prefix(&bin).expect("parses");
    assert_eq!(
        akamai_fingerprint(&p),
        "1:65536;2:0;4:6291456;6:262144;6682:2829099|15663105|0|m,a,s,p"
    );
    assert_eq!(
        akamai_variant(&p, AkamaiVariant::GreaseSettingsDropped),
        "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p"
    );
    // The GREASE frame type 0x2a is logged with its number.
    assert_eq!(p.frames.last().map(|f| f.header.kind.0), Some(0x2a));
    assert!(p.frames.last().is_some_and(|f| f.header.kind.is_grease()));
    // GREASE settings do not change the voice's identity of the stack, nor the profile.
    let (plain, _) = fixture("chrome_shaped");
    let plain = parse_prefix(&plain).expect("parses");
    assert_eq!(browser_profile(&p).map(|b| b.name), Some("chrome-119+"));
    assert_ne!(
        h2::voice_id(&p),
        h2::voice_id(&plain),
        "GREASE position is a trait"
    );
}

#[test]
fn library_clients_are_not_browsers() {
    for name in ["python_h2_client", "continuation_two_requests"] {
        let (bin, _) = fixture(name);
        let p = parse_prefix(&bin).expect("parses");
        assert!(browser_profile(&p).is_none(), "{name}");
    }
    let (bin, _) = fixture("python_h2_client");
    let p = parse_prefix(&bin).expect("parses");
    assert_eq!(
        akamai_variant(&p, AkamaiVariant::WindowUpdateSingleZero),
        "1:4096;2:1;4:65535;5:16384;8:0;3:100;6:65536|0|0|m,p,s,a"
    );
}

#[test]
fn continuation_and_dynamic_table_span_requests() {
    let (bin, _) = fixture("continuation_two_requests");
    let p = parse_prefix(&bin).expect("parses");
    assert_eq!(p.requests.len(), 2);
    assert_eq!(p.requests[1].stream_id, 3);
    let auth = p.requests[0]
        .block
        .fields()
        .find(|f| f.name == b"authorization")
        .expect("authorization");
    assert_eq!(auth.representation.kind, h2::FieldKind::NeverIndexed);
    // The second request's :authority comes from the dynamic table.
    let a = p.requests[1]
        .block
        .fields()
        .find(|f| f.name == b":authority")
        .expect(":authority");
    assert_eq!(a.representation.kind, h2::FieldKind::Indexed);
    assert!(a.representation.index.is_some_and(|i| i > 61));
    let e = h2::echo(&p, 1);
    assert_eq!(
        e.pseudo_header_order,
        [":method", ":scheme", ":path", ":authority"]
    );
    assert_eq!(e.header_order, ["x-token"]);
    assert_eq!(e.detail.to_value()["request"]["stream_id"], 3);
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend(payload);
    f
}

fn prefix(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut b = PREFACE.to_vec();
    for f in frames {
        b.extend(f);
    }
    b
}

fn settings() -> Vec<u8> {
    frame(4, 0, 0, &[0, 4, 0, 0, 0xff, 0xff])
}

#[test]
fn hostile_frames_are_typed_errors_with_partial_results() {
    // Frame length 16 MiB - 1 (the largest the field can say).
    let mut b = prefix(&[settings()]);
    b.extend([0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0]);
    let e = parse_prefix(&b).expect_err("too large");
    assert_eq!(e.kind, H2ErrorKind::FrameTooLarge { length: 0xff_ffff });
    assert_eq!(e.offset, 24 + 15);
    assert_eq!(e.partial.frames.len(), 1, "the SETTINGS before it is kept");

    // HPACK index past the table.
    let b = prefix(&[settings(), frame(1, 0x5, 1, &[0x82, 0xff, 0x10])]);
    let e = parse_prefix(&b).expect_err("index");
    assert!(matches!(e.kind, H2ErrorKind::Hpack(_)));
    assert_eq!(e.partial.requests.len(), 1);
    assert_eq!(
        e.partial.requests[0].block.len(),
        1,
        ":method decoded first"
    );

    // CONTINUATION without HEADERS.
    let b = prefix(&[settings(), frame(9, 0x4, 1, &[0x82])]);
    assert_eq!(
        parse_prefix(&b).expect_err("continuation").kind,
        H2ErrorKind::UnexpectedContinuation
    );
    // HEADERS without END_HEADERS followed by something else.
    let b = prefix(&[frame(1, 0, 1, &[0x82]), settings()]);
    assert_eq!(
        parse_prefix(&b).expect_err("interrupted").kind,
        H2ErrorKind::ContinuationExpected
    );
    // SETTINGS length not a multiple of 6.
    let b = prefix(&[frame(4, 0, 0, &[0, 4, 0, 0, 0xff])]);
    assert_eq!(
        parse_prefix(&b).expect_err("settings").kind,
        H2ErrorKind::BadLength { frame: "SETTINGS" }
    );
    // Garbage after the preface: a header claiming a 0x616263 byte frame.
    let b = prefix(&[b"abcdefghijklmnop".to_vec()]);
    assert!(matches!(
        parse_prefix(&b).expect_err("garbage").kind,
        H2ErrorKind::FrameTooLarge { .. }
    ));
    // Bad preface.
    assert_eq!(
        parse_prefix(b"GET / HTTP/1.1\r\n\r\n")
            .expect_err("preface")
            .kind,
        H2ErrorKind::BadPreface
    );
    // WINDOW_UPDATE of the wrong size; padding longer than the payload.
    let b = prefix(&[frame(8, 0, 0, &[0, 0, 1])]);
    assert!(parse_prefix(&b).is_err());
    let b = prefix(&[frame(1, 0x8 | 0x4, 1, &[9, 0x82])]);
    assert_eq!(
        parse_prefix(&b).expect_err("pad").kind,
        H2ErrorKind::BadPadding
    );
}

#[test]
fn zero_length_settings_is_legal_and_gives_an_empty_s_field() {
    let b = prefix(&[
        frame(4, 0, 0, &[]),
        frame(1, 0x5, 1, &[0x82, 0x84, 0x87, 0x41, 0x01, b'x']),
    ]);
    let p = parse_prefix(&b).expect("parses");
    assert_eq!(akamai_fingerprint(&p), "|00|0|m,p,s,a");
}

#[test]
fn priority_flood_is_capped_and_headers_still_seen() {
    let mut frames = vec![settings()];
    for i in 0..10_000u32 {
        frames.push(frame(2, 0, 2 * i + 3, &[0, 0, 0, 0, 15]));
    }
    frames.push(frame(1, 0x5, 1, &[0x82, 0x84, 0x87, 0x41, 0x01, b'x']));
    let p = parse_prefix(&prefix(&frames)).expect("parses");
    assert!(p.priority_capped);
    assert_eq!(p.priority_frames().count(), h2::MAX_PRIORITY_FRAMES);
    assert_eq!(p.requests.len(), 1);
    assert!(akamai_fingerprint(&p).ends_with("|m,p,s,a"));
}

#[test]
fn frame_and_header_block_caps() {
    let ping = frame(6, 0, 0, &[0; 8]);
    let p = parse_prefix(&prefix(&vec![ping; 300])).expect("parses");
    assert!(p.frames_capped);
    assert_eq!(p.frames.len(), h2::MAX_FRAMES);
    let frames: Vec<_> = (0..6u32)
        .map(|i| frame(1, 0x5, 2 * i + 1, &[0x82, 0x84, 0x87]))
        .collect();
    let p = parse_prefix(&prefix(&frames)).expect("parses");
    assert!(p.header_blocks_capped);
    assert_eq!(p.requests.len(), h2::MAX_HEADER_BLOCKS);
    assert_eq!(p.frames.len(), 6);
}

#[test]
fn cut_chrome_prefix_is_a_consistent_truncated_result() {
    let (bin, _) = fixture("chrome_shaped");
    let full = parse_prefix(&bin).expect("parses");
    for cut in 0..bin.len() {
        let p = parse_prefix(&bin[..cut]).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        assert!(p.frames.len() <= full.frames.len());
        for (a, b) in p.frames.iter().zip(&full.frames) {
            assert_eq!(a.header, b.header, "cut {cut}");
            if !a.truncated {
                assert_eq!(a.payload, b.payload, "cut {cut}");
            }
        }
        let at_boundary = p.frames.last().is_none_or(|f| !f.truncated)
            && (cut == 24 || cut == 24 + 33 || cut == 24 + 46 || cut >= bin.len());
        assert_eq!(p.truncated, !at_boundary, "cut {cut}");
        if let (Some(a), Some(b)) = (p.first_request(), full.first_request()) {
            // Every field decoded from a cut block is a field of the full block, in order.
            for (x, y) in a.block.fields().zip(b.block.fields()) {
                assert_eq!(x.name, y.name, "cut {cut}");
            }
        }
    }
}

/// Real Chrome connections from the FoxIO captures with embedded TLS keys: header names per
/// request as tshark decoded them, Akamai string as docs/voice-http.md lists it.
#[test]
fn foxio_chrome_captures() {
    for name in ["foxio_chrome107_cloudflare", "foxio_chrome116_youtube"] {
        let (bin, want) = fixture(name);
        let p = parse_prefix(&bin).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(akamai_fingerprint(&p), want["expected_akamai"], "{name}");
        assert_eq!(
            browser_profile(&p).map(|b| b.name),
            want["expected_profile"].as_str(),
            "{name}"
        );
        let tshark = want["tshark_header_names"].as_array().expect("names");
        assert_eq!(
            p.requests.len(),
            tshark.len().min(h2::MAX_HEADER_BLOCKS),
            "{name}"
        );
        assert_eq!(p.header_blocks_capped, tshark.len() > h2::MAX_HEADER_BLOCKS);
        for (req, t) in p.requests.iter().zip(tshark) {
            assert_eq!(u64::from(req.stream_id), t["stream_id"], "{name}");
            let names: Vec<Value> = req
                .block
                .fields()
                .map(|f| String::from_utf8_lossy(f.name).into_owned().into())
                .collect();
            assert_eq!(Value::from(names), t["names"], "{name}");
            assert!(req.complete);
        }
    }
}

/// Values (authority, path, user-agent) do not move the voice; stack traits do.
#[test]
fn voice_is_stable_across_values_and_moves_with_the_stack() {
    fn chrome_like(authority: &[u8], ua: &[u8], initial_window: u32) -> Vec<u8> {
        let mut enc = loona_hpack::Encoder::new();
        let block = enc.encode([
            (&b":method"[..], &b"GET"[..]),
            (b":authority", authority),
            (b":scheme", b"https"),
            (b":path", b"/x"),
            (b"user-agent", ua),
            (b"accept", b"*/*"),
        ]);
        let mut s = Vec::new();
        for (id, v) in [(1u16, 65_536u32), (2, 0), (4, initial_window), (6, 262_144)] {
            s.extend(id.to_be_bytes());
            s.extend(v.to_be_bytes());
        }
        let mut hp = vec![0x80, 0, 0, 0, 0xff];
        hp.extend(block);
        prefix(&[
            frame(4, 0, 0, &s),
            frame(8, 0, 0, &15_663_105u32.to_be_bytes()),
            frame(1, 0x25, 1, &hp),
        ])
    }
    let a = parse_prefix(&chrome_like(b"a.example", b"Chrome/131", 6_291_456)).expect("a");
    let b = parse_prefix(&chrome_like(b"b.example", b"Chrome/150", 6_291_456)).expect("b");
    let c = parse_prefix(&chrome_like(b"a.example", b"Chrome/131", 6_291_457)).expect("c");
    assert_eq!(h2::voice_id(&a), h2::voice_id(&b));
    assert_ne!(h2::voice_id(&a), h2::voice_id(&c));
    // The documented description, written out by hand from docs/voice-http.md.
    assert_eq!(
        h2::voice_description(&a),
        "h2v1\ns=1:65536;2:0;4:6291456;6:262144\nwu=15663105\np=-\nhp=1:0:256\nps=m,a,s,p\n\
         h=user-agent,accept\n"
    );
    // sha256 of that text by coreutils `sha256sum`, first 24 hex digits.
    assert_eq!(h2::voice_id(&a).0, format!("h2v1_{}", SHA_OF_DESCRIPTION));
}

const SHA_OF_DESCRIPTION: &str = "9ae3390c420ba1ea42ad55e4";

/// The voice hashes exactly its description, however long (the description is built on the
/// stack up to 512 bytes and moves to the heap past that).
#[test]
fn voice_id_is_the_hash_of_the_description_at_any_length() {
    use sha2::Digest;
    for n in 0..70 {
        let names: Vec<String> = (0..n).map(|i| format!("x-header-{i:03}")).collect();
        let mut list = vec![(&b":method"[..], &b"GET"[..]), (b":path", b"/")];
        list.extend(names.iter().map(|h| (h.as_bytes(), &b"v"[..])));
        let block = loona_hpack::Encoder::new().encode(list);
        let p = parse_prefix(&prefix(&[frame(4, 0, 0, &[]), frame(1, 0x5, 1, &block)]))
            .expect("parses");
        let description = h2::voice_description(&p);
        let digest = sha2::Sha256::digest(description.as_bytes());
        assert_eq!(
            h2::voice_id(&p).0,
            format!("h2v1_{}", &hex::encode(digest)[..24]),
            "{} bytes",
            description.len()
        );
    }
}

#[test]
fn echo_detail_has_representations_and_no_secrets() {
    let (bin, _) = fixture("continuation_two_requests");
    let p = parse_prefix(&bin).expect("parses");
    let e = h2::echo(&p, 0);
    let detail = e.detail.to_value();
    let fields = detail["request"]["fields"].as_array().expect("fields");
    let auth = fields
        .iter()
        .find(|f| f["name"] == "authorization")
        .expect("authorization listed");
    assert_eq!(auth["value"], Value::Null);
    assert_eq!(auth["value_length"], 6);
    assert_eq!(auth["representation"]["kind"], "never_indexed");
    assert!(!e.detail.get().contains("secret"));
    assert_eq!(fields[0]["representation"]["kind"], "indexed");
    assert_eq!(e.detail.to_value()["settings"][0]["id"], 3);
    assert_eq!(e.akamai_fingerprint_hash.len(), 32);
}

/// Long Huffman strings are decoded two at a time (the second ahead of its turn); errors still
/// come in wire order, and the fields before them are kept.
#[test]
fn strings_decoded_ahead_keep_wire_order_of_errors() {
    use exitvoice_protocol::h2::hpack::{Decoder, HeaderBlock, HpackError, HuffmanError};
    let (bin, json) = fixture("chrome_shaped");
    // The user-agent value of the fixture: 78 Huffman bytes at offset 214.
    let ua = &bin[214..214 + 78];
    let ua_text = json["requests"][0]["fields"][8][1].as_str().expect("ua");
    // Literal without indexing, name index 58 (user-agent), Huffman value of 78 bytes.
    let mut first = vec![0x0f, 58 - 15, 0x80 | 78];
    first.extend(ua);
    // Literal without indexing, name index 19 (accept), 20 bytes of ones: EOS inside.
    let mut eos = vec![0x0f, 19 - 15, 0x80 | 20];
    eos.extend([0xff; 20]);
    let cases: [(Vec<u8>, HpackError); 3] = [
        (
            [&first[..], &eos].concat(),
            HpackError::Huffman(HuffmanError::EosInString),
        ),
        // An index past the table between them comes first.
        (
            [&first[..], &[0xff, 200 - 127], &eos].concat(),
            HpackError::IndexPastTable {
                index: 200,
                table_len: 61,
            },
        ),
        // And a cut block: the second string's bytes are not all there.
        (
            [&first[..], &eos[..eos.len() - 1]].concat(),
            HpackError::UnexpectedEnd,
        ),
    ];
    for (block, error) in cases {
        let mut out = HeaderBlock::default();
        assert_eq!(Decoder::new().decode_into(&block, &mut out), Err(error));
        let fields: Vec<_> = out.fields().collect();
        assert_eq!(fields.len(), 1);
        assert_eq!(fields[0].name, b"user-agent");
        assert_eq!(fields[0].value, ua_text.as_bytes());
    }
    // Both long strings valid: both decoded, as the fixture says.
    let mut good = first.clone();
    good.extend([0x0f, 19 - 15, 0x80 | 78]);
    good.extend(ua);
    let b = Decoder::new().decode(&good).expect("decodes");
    let values: Vec<_> = b.fields().map(|f| f.value.to_vec()).collect();
    assert_eq!(values, [ua_text.as_bytes(), ua_text.as_bytes()]);
}
