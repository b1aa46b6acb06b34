//! The one assembly of an echo answer, borrowed from a connection's analysis and a request's
//! record: the live routes answer through it (`api/echo.rs`), and so does `exitvoice inspect`,
//! so live and offline answers cannot drift apart.

use exitvoice_protocol::analysis::{Analysis, EchoJson};
use exitvoice_schema::coherence;
use exitvoice_schema::{
    rfc3339_ms, Alpn, Bucket, Coherence, EchoGeo, Families, Http1Echo, Peer, RawJson,
    RequestPosition, RequestRecord, RoundTrips, TcpAbsent, TcpEcho, VoiceId, ECHO_SCHEMA_VERSION,
};
use serde::Serialize;
use serde_json::value::RawValue;

/// A field of [`EchoView`] that a route may leave out: `None` is absent from the answer, while a
/// field the route answers but has no value for is `Some(None)`, `null` on the wire.
type Part<T> = Option<T>;

/// An echo answer. [`EchoView::new`] is the full echo, serialized as
/// [`exitvoice_schema::Echo`] is (`compose_echo` builds the same value owned, for the store);
/// [`EchoView::tls_only`], [`EchoView::http2_only`] and [`EchoView::http1_only`] keep one layer of
/// it, each field where the full echo has it.
#[derive(Debug, Serialize)]
pub struct EchoView<'a> {
    schema_version: u32,
    time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    peer: Part<PeerView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Part<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Part<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Part<&'a str>,
    alpn: &'a Alpn,
    #[serde(skip_serializing_if = "Option::is_none")]
    tcp: Part<Option<&'a TcpEcho>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tcp_absent: Option<&'a TcpAbsent>,
    /// In `/api/all` answers ([`EchoView::timed`]), and offline where a capture has the times.
    #[serde(skip_serializing_if = "Option::is_none")]
    latency: Option<RoundTrips>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tls: Part<Option<&'a RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http2: Part<Option<Http2View<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http1: Part<Option<&'a Http1Echo>>,
    request: RequestPosition,
    #[serde(skip_serializing_if = "Option::is_none")]
    bucket: Part<Option<Bucket>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    profile: Part<Option<&'a str>>,
    /// Only in `/api/all` answers ([`EchoView::judged`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    coherence: Option<Coherence>,
    /// Only in `/api/all` answers, with `--geoip` ([`EchoView::located`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    geo: Option<EchoGeo>,
}

/// [`exitvoice_schema::Http2Echo`], borrowed.
#[derive(Debug, Serialize)]
struct Http2View<'a> {
    akamai_fingerprint: &'a str,
    akamai_fingerprint_hash: &'a str,
    voice_id: &'a VoiceId,
    pseudo_header_order: &'a [String],
    header_order: &'a [String],
    detail: &'a RawValue,
}

/// The `peer` of an echo: the client's address, and, when a trusted load balancer relayed the
/// connection with a PROXY header, the balancer's address as `proxy`.
#[derive(Clone, Debug, Serialize)]
pub struct PeerView {
    #[serde(flatten)]
    pub client: Peer,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<Peer>,
}

impl<'a> EchoView<'a> {
    /// The full echo of `record` on the connection `analysis` (with its `json`) describes. An
    /// offline answer has no `peer` (`None`: left out).
    pub fn new(
        analysis: &'a Analysis,
        json: &'a EchoJson,
        peer: Option<PeerView>,
        record: &'a RequestRecord,
    ) -> Self {
        let facts = &analysis.facts;
        Self {
            schema_version: ECHO_SCHEMA_VERSION,
            time: rfc3339_ms(record.time_unix_ms),
            peer,
            token: Some(record.token.as_deref()),
            method: Some(&record.method),
            path: Some(&record.path),
            alpn: &facts.alpn,
            tcp: Some(facts.tcp.as_ref()),
            tcp_absent: facts.tcp_absent.as_ref().filter(|_| facts.tcp.is_none()),
            latency: None,
            tls: Some(json.tls.as_ref().map(RawJson::as_raw)),
            http2: Some(facts.http2.as_ref().map(|h2| Http2View {
                akamai_fingerprint: &h2.akamai_fingerprint,
                akamai_fingerprint_hash: &h2.akamai_fingerprint_hash,
                voice_id: &h2.voice_id,
                pseudo_header_order: &record.pseudo_header_order,
                header_order: &record.header_order,
                detail: json.http2_detail.as_raw(),
            })),
            http1: Some(record.http1.as_ref()),
            request: RequestPosition {
                stream_id: record.stream_id,
                index: record.index,
            },
            bucket: Some(record.bucket),
            profile: Some(facts.http2.as_ref().and_then(|h2| h2.profile.as_deref())),
            coherence: None,
            geo: None,
        }
    }

    /// The echo with its coherence judged from the `families` its connection and request look
    /// like, the operating system its User-Agent claims (`ua_os`) and the one its SYN shows:
    /// `/api/all`'s answer.
    pub fn judged(self, families: Families, ua_os: Option<&str>) -> Self {
        let tcp_os = self.tcp.flatten().and_then(|tcp| tcp.os.as_deref());
        Self {
            coherence: Some(coherence::judge(self.alpn, families).with_os(ua_os, tcp_os)),
            ..self
        }
    }

    /// The echo with its connection's round trips and their gap.
    pub fn timed(self, latency: Option<RoundTrips>) -> Self {
        Self { latency, ..self }
    }

    /// The echo with the visitor's country and network, when the server has geo databases.
    pub fn located(self, geo: Option<EchoGeo>) -> Self {
        Self { geo, ..self }
    }

    /// `/api/tls`: the TLS layer.
    pub fn tls_only(self) -> Self {
        Self {
            tcp: None,
            tcp_absent: None,
            token: None,
            method: None,
            path: None,
            http2: None,
            http1: None,
            bucket: None,
            profile: None,
            ..self
        }
    }

    /// `/api/http2`: the HTTP/2 layer, the request's position and the bucket.
    pub fn http2_only(self) -> Self {
        Self {
            peer: None,
            http1: None,
            ..self.layer_only()
        }
    }

    /// `/api/http1`: the HTTP/1 layer, the request's position and the bucket.
    pub fn http1_only(self) -> Self {
        Self {
            peer: None,
            http2: None,
            profile: None,
            ..self.layer_only()
        }
    }

    /// Without the request's own words and the TCP and TLS layers, which no HTTP layer answer
    /// carries.
    fn layer_only(self) -> Self {
        Self {
            tcp: None,
            tcp_absent: None,
            latency: None,
            token: None,
            method: None,
            path: None,
            tls: None,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitvoice_protocol::analysis::{self, ConnectionInput, Follower};
    use exitvoice_schema::{ConnectionFacts, Echo, Spoken};

    const HELLO: &[u8] = include_bytes!("../../captures/curl-h2/conn1.hello.bin");
    const PREFIX: &[u8] = include_bytes!("../../captures/curl-h2/conn1.prefix.bin");

    /// A real curl connection over h2 and its first request.
    fn curl_h2() -> (Analysis, RequestRecord) {
        let analysis = analysis::analyse(&ConnectionInput {
            hello: HELLO,
            prefix: PREFIX,
            alpn_negotiated: Some("h2"),
            ..ConnectionInput::default()
        });
        let (head, error) = Follower::new(Spoken::H2).head(PREFIX, 0, 1);
        assert_eq!(error, None);
        let record = RequestRecord {
            conn_id: "c".to_owned(),
            index: 1,
            time_unix_ms: 1_767_225_600_123,
            token: Some("tok".to_owned()),
            method: "GET".to_owned(),
            path: "/probe/tok".to_owned(),
            stream_id: head.stream_id,
            bucket: analysis::bucket(&analysis.facts, 1, false),
            pseudo_header_order: head.pseudo_header_order,
            header_order: head.header_order,
            http1: head.http1,
        };
        (analysis, record)
    }

    fn peer() -> Peer {
        Peer {
            ip: "127.0.0.1".to_owned(),
            port: 4242,
        }
    }

    fn direct() -> Option<PeerView> {
        Some(PeerView {
            client: peer(),
            proxy: None,
        })
    }

    /// The borrowed view the server answers with is the schema's `Echo`, field for field: the
    /// same value `compose_echo` builds for `/api/observations`.
    #[test]
    fn the_live_view_is_the_stored_echo() {
        let (analysis, record) = curl_h2();
        let json = analysis.json(HELLO, PREFIX);
        let view = serde_json::to_value(EchoView::new(&analysis, json, direct(), &record))
            .expect("serialize");
        let echo: Echo = serde_json::from_value(view).expect("an Echo");
        // The store keeps the bytes and derives the layers again on read.
        let mut stored = ConnectionFacts::clone(&analysis.facts);
        stored.set_layers(analysis::layers(
            HELLO,
            &PREFIX[..analysis.prefix_len],
            stored.alpn.spoken,
            None,
        ));
        assert_eq!(
            echo,
            exitvoice_schema::compose_echo(&stored, peer(), &record)
        );
        let tls = echo.tls.as_ref().expect("tls");
        let http2 = echo.http2.as_ref().expect("http2");
        assert!(tls.detail.to_value()["cipher_suites"].is_array());
        assert!(http2.detail.to_value()["frames"].is_array());
        assert_eq!(echo.request.stream_id, Some(1));
    }

    /// The top-level keys of a JSON object, in the order they are written.
    struct Keys(Vec<String>);

    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = Keys;

                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }

                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some((key, serde::de::IgnoredAny)) = map.next_entry()? {
                        keys.push(key);
                    }
                    Ok(Keys(keys))
                }
            }
            deserializer.deserialize_map(Visitor)
        }
    }

    fn keys(view: &EchoView<'_>) -> Vec<String> {
        let text = serde_json::to_string(view).expect("serialize");
        serde_json::from_str::<Keys>(&text).expect("an object").0
    }

    /// Each layer route answers its fields in the full echo's order, a field without a value as
    /// `null`, and nothing of another layer.
    #[test]
    fn each_route_answers_its_own_fields() {
        let (analysis, record) = curl_h2();
        let json = analysis.json(HELLO, PREFIX);
        let view = || EchoView::new(&analysis, json, direct(), &record);
        let full = [
            "schema_version",
            "time",
            "peer",
            "token",
            "method",
            "path",
            "alpn",
            "tcp",
            "tcp_absent",
            "tls",
            "http2",
            "http1",
            "request",
            "bucket",
            "profile",
        ];
        assert_eq!(keys(&view()), full);
        let families = Families::default();
        let mut judged = full.to_vec();
        judged.push("coherence");
        assert_eq!(keys(&view().judged(families, None)), judged);
        let tls = ["schema_version", "time", "peer", "alpn", "tls", "request"];
        assert_eq!(keys(&view().tls_only()), tls);
        let http2 = [
            "schema_version",
            "time",
            "alpn",
            "http2",
            "request",
            "bucket",
            "profile",
        ];
        assert_eq!(keys(&view().http2_only()), http2);
        let http1 = [
            "schema_version",
            "time",
            "alpn",
            "http1",
            "request",
            "bucket",
        ];
        let only_http1 = serde_json::to_value(view().http1_only()).expect("serialize");
        assert_eq!(keys(&view().http1_only()), http1);
        assert!(only_http1["http1"].is_null(), "curl spoke h2: {only_http1}");
    }
}
