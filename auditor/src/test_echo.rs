//! A plain echo for unit tests: an h2 request on its connection's first stream, with the TLS
//! detail given and every fingerprint empty; each test sets what it looks at.

use exitvoice_schema::{
    Alpn, Echo, Http2Echo, Peer, RawJson, RequestPosition, Spoken, TlsEcho, VoiceId,
};

/// An echo whose ClientHello `detail` is `detail`, with an HTTP/2 layer of empty fingerprints.
pub(crate) fn echo(detail: &serde_json::Value) -> Echo {
    Echo {
        schema_version: 1,
        time: "t".into(),
        peer: Peer {
            ip: "127.0.0.1".into(),
            port: 1,
        },
        token: None,
        method: "GET".into(),
        path: "/".into(),
        alpn: Alpn {
            offered: vec!["h2".into()],
            negotiated: Some("h2".into()),
            spoken: Spoken::H2,
        },
        tcp: None,
        tcp_absent: None,
        latency: None,
        tls: Some(TlsEcho {
            ja3: String::new(),
            ja3_hash: String::new(),
            ja3n: String::new(),
            ja3n_hash: String::new(),
            ja4: String::new(),
            ja4_r: String::new(),
            ja4_o: String::new(),
            ja4_ro: String::new(),
            voice_id: VoiceId("tlsv2_x".into()),
            order_id: String::new(),
            resumed: false,
            detail: RawJson::of(detail),
        }),
        http2: Some(Http2Echo {
            akamai_fingerprint: String::new(),
            akamai_fingerprint_hash: String::new(),
            voice_id: VoiceId("h2v1_x".into()),
            pseudo_header_order: vec![],
            header_order: vec![],
            detail: RawJson::of(&serde_json::json!({})),
        }),
        http1: None,
        request: RequestPosition {
            stream_id: Some(1),
            index: 1,
        },
        bucket: None,
        profile: None,
        coherence: None,
        geo: None,
    }
}
