//! HTTP/1 heads: original case and order, caps, errors; sniffing; property tests.

use exitvoice_protocol::classify::sniff;
use exitvoice_protocol::h1::{self, parse_head, H1Error, MAX_HEADERS};
use exitvoice_schema::Spoken;
use proptest::prelude::*;

const CURL: &[u8] =
    b"GET /probe/x HTTP/1.1\r\nHost: echo.example\r\nUser-Agent: curl/8.1.2\r\nAccept: */*\r\n\r\n";

#[test]
fn keeps_case_order_and_values() {
    let h = parse_head(
        b"GET /a?b HTTP/1.1\r\nhost: x\r\nUSER-agent:  ua/1 \r\nAccept: */*\r\n\r\nbody",
    )
    .expect("parses");
    assert_eq!(
        (h.method.as_str(), h.target.as_str(), h.version.as_str()),
        ("GET", "/a?b", "HTTP/1.1")
    );
    let names: Vec<_> = h.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["host", "USER-agent", "Accept"]);
    assert_eq!(h.headers[1].1, "ua/1");
    assert!(!h.truncated);
    assert_eq!(h1::echo(&h).request_line, "GET /a?b HTTP/1.1");
}

#[test]
fn voice_ignores_method_and_values_but_not_case_or_order() {
    let get = parse_head(CURL).expect("parses");
    let post = parse_head(
        b"POST /other HTTP/1.1\r\nHost: b\r\nUser-Agent: curl/9\r\nAccept: */*\r\nContent-Length: 2\r\n\r\n",
    )
    .expect("parses");
    assert_eq!(h1::voice_id(&get), h1::voice_id(&post));
    assert!(h1::voice_id(&get).0.starts_with("h1v1_"));
    assert_eq!(h1::voice_id(&get).0.len(), 5 + 24);
    let lower = parse_head(b"GET / HTTP/1.1\r\nhost: a\r\nuser-agent: c\r\naccept: */*\r\n\r\n")
        .expect("parses");
    assert_ne!(h1::voice_id(&get), h1::voice_id(&lower));
    let reordered =
        parse_head(b"GET / HTTP/1.1\r\nUser-Agent: c\r\nHost: a\r\nAccept: */*\r\n\r\n")
            .expect("parses");
    assert_ne!(h1::voice_id(&get), h1::voice_id(&reordered));
    let h10 = parse_head(b"GET / HTTP/1.0\r\nHost: a\r\nUser-Agent: c\r\nAccept: */*\r\n\r\n")
        .expect("parses");
    assert_ne!(h1::voice_id(&get), h1::voice_id(&h10));
}

/// The voice of a fixed head: the description written out by hand from docs/voice-http.md
/// (version; header names in wire order and original case, without the per-request `Cookie`
/// and `Content-Length`), and its id from a hash computed outside this code.
#[test]
fn voice_of_a_fixed_head_is_the_documented_description_and_hash() {
    let head = parse_head(
        b"POST /form HTTP/1.1\r\nHost: a.example\r\nCookie: c=1\r\nUser-Agent: ua/2\r\n\
          content-length: 2\r\nAccept: */*\r\n\r\nab",
    )
    .expect("parses");
    assert_eq!(
        h1::voice_description(&head),
        "h1v1\nv=HTTP/1.1\nh=Host,User-Agent,Accept\n"
    );
    // `printf 'h1v1\nv=HTTP/1.1\nh=Host,User-Agent,Accept\n' | sha256sum`, first 24 hex digits.
    assert_eq!(h1::voice_id(&head).0, "h1v1_8d805b9d6da69d3fbe8b77bb");
}

#[test]
fn cut_heads_and_caps_are_flagged() {
    let h = parse_head(&CURL[..50]).expect("cut head parses");
    assert!(h.truncated);
    assert_eq!(h.headers.len(), 1, "the partial User-Agent line is dropped");
    let mut many = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..200 {
        many.extend(format!("X-{i}: v\r\n").as_bytes());
    }
    many.extend(b"\r\n");
    let h = parse_head(&many).expect("parses");
    assert!(h.headers_capped);
    assert_eq!(h.headers.len(), MAX_HEADERS);
    let mut huge = b"GET / HTTP/1.1\r\nX: ".to_vec();
    huge.extend(vec![b'a'; 100_000]);
    assert!(parse_head(&huge).expect("parses").truncated);
}

#[test]
fn malformed_heads_are_typed_errors() {
    assert_eq!(parse_head(b"GET /").err(), Some(H1Error::BadRequestLine));
    assert_eq!(
        parse_head(b"GET / HTTP/x\r\n").err(),
        Some(H1Error::BadVersion)
    );
    assert_eq!(
        parse_head(b"G(T / HTTP/1.1\r\n").err(),
        Some(H1Error::BadMethod)
    );
    assert_eq!(
        parse_head(b"GET / HTTP/1.1\r\nNoColon\r\n\r\n").err(),
        Some(H1Error::BadHeader { line: 1 })
    );
    assert_eq!(
        parse_head(b"GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n").err(),
        Some(H1Error::ObsFold { line: 2 })
    );
}

#[test]
fn sniff_tells_h2_from_http1_on_partial_reads() {
    assert_eq!(
        sniff(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0"),
        Some(Spoken::H2)
    );
    assert_eq!(sniff(b"PRI "), None, "could still be the preface");
    assert_eq!(sniff(b"PR"), None);
    assert_eq!(sniff(b"GET / HTTP/1.1\r\n"), Some(Spoken::Http1));
    assert_eq!(sniff(b"GET "), Some(Spoken::Http1));
    assert_eq!(sniff(b"GE"), None);
    assert_eq!(sniff(b"PRI /x HTTP/1.1\r\n"), Some(Spoken::Http1));
    assert_eq!(sniff(b""), None);
    assert_eq!(
        sniff(&[0x16, 0x03, 0x01, 0x02, 0x00]),
        Some(Spoken::Unknown)
    );
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..4096)) {
        if let Ok(h) = parse_head(&b) {
            let _ = h1::echo(&h);
        }
        let _ = sniff(&b);
    }

    #[test]
    fn names_keep_case_and_order(names in proptest::collection::vec("[A-Za-z][A-Za-z0-9-]{0,12}", 0..20)) {
        let mut b = b"GET / HTTP/1.1\r\n".to_vec();
        for n in &names {
            b.extend(format!("{n}: v\r\n").as_bytes());
        }
        b.extend(b"\r\n");
        let h = parse_head(&b).expect("valid head");
        let got: Vec<_> = h.headers.iter().map(|(n, _)| n.clone()).collect();
        prop_assert_eq!(got, names);
    }
}

#[test]
fn serialized_head_leaves_credentials_out() {
    let h = parse_head(b"GET / HTTP/1.1\r\nHost: a\r\nProxy-Authorization: Basic c2VjcmV0\r\n\r\n")
        .expect("parses");
    let json = serde_json::to_string(&h).expect("serializes");
    assert!(!json.contains("c2VjcmV0"), "{json}");
    assert!(json.contains("Proxy-Authorization"));
}
