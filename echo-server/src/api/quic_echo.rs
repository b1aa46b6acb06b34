//! The echo over HTTP/3: `/api/all` and `/probe/<token>` (the full echo), `/api/clean` (hashes
//! and ids), a JSON 404 with the clean summary elsewhere. Same shapes as over TCP, with
//! `alpn.spoken` `h3`, and two layers TCP has not: `quic` (the client's Initials and transport
//! parameters, the QUIC voice) and `http3` (its SETTINGS and first request's field order, the
//! HTTP/3 voice); no `http2`/`http1`, no bucket. Each request is queued for the store
//! (`quic_requests`, and `quic_connections` with the connection's first).

use exitvoice_protocol::analysis::{self, ConnectionInput};
use exitvoice_protocol::h3::H3Voice;
use exitvoice_protocol::quic;
use exitvoice_schema::{rfc3339_ms, PeerPolicy, ECHO_SCHEMA_VERSION};
use exitvoice_store::{QuicConnectionRow, QuicRequestRow};
use serde_json::{json, Value};

use super::echo::valid_token;
use super::{ApiError, ApiState, API_VERSION};
use crate::capture::quic::{H3Answer, H3Request, QuicConnection};
use crate::clock::now_ms;
use crate::ledger::H3Visit;
use crate::writer::Job;

/// The request's path and query, and its probe token (from `/probe/<token>` or `?token=`).
fn route(request: &H3Request) -> (&str, Option<&str>) {
    let target = request.field(":path").unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let token = path.strip_prefix("/probe/").or_else(|| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix("token="))
    });
    (path, token)
}

/// The `tls` object of the echo, from the reassembled ClientHello, as TCP's.
fn tls(conn: &QuicConnection) -> (Value, analysis::Analysis) {
    let hello = conn
        .initial
        .as_ref()
        .and_then(|i| i.client_hello.as_deref())
        .unwrap_or_default();
    let analysis = analysis::analyse(&ConnectionInput {
        hello,
        alpn_negotiated: Some("h3"),
        tls_version: exitvoice_protocol::tls::ProtocolVersion::TLS_1_3.name(),
        ..ConnectionInput::default()
    });
    let tls = analysis
        .json(hello, &[])
        .tls
        .as_ref()
        .and_then(|raw| serde_json::from_str(raw.as_raw().get()).ok())
        .unwrap_or(Value::Null);
    (tls, analysis)
}

/// The `quic` object: what the Initials showed (docs/quic.md, "HTTP/3" and "The voices").
fn quic_layer(conn: &QuicConnection) -> Value {
    let Some(initial) = &conn.initial else {
        return Value::Null;
    };
    let parameters = initial
        .client_hello
        .as_deref()
        .and_then(|h| exitvoice_protocol::tls::parse_client_hello(h).ok())
        .and_then(|h| quic::transport_parameters(&h));
    let (parameters, parameters_error) = match parameters {
        Some(Ok(list)) => (list, None),
        Some(Err(error)) => (Vec::new(), Some(error.to_string())),
        None => (Vec::new(), None),
    };
    let first = initial.packets.first();
    json!({
        "version": initial.version,
        "first_dcid_len": initial.first_dcid_len,
        "scid_len": first.map(|p| p.scid_len),
        "token_present": first.map(|p| p.token_len > 0),
        "first_packet_number": first.map(|p| p.packet_number),
        "datagram_sizes": initial.datagram_sizes,
        "initial_count": initial.packets.len(),
        "crypto_frame_count": initial.packets.iter().map(|p| p.crypto_frames).sum::<usize>(),
        "crypto_order": quic::crypto_order(&initial.packets),
        "padding_where": quic::padding_where(&initial.packets),
        "initial_packets": initial.packets,
        "client_hello_complete": initial.client_hello.is_some(),
        "error": initial.error,
        "transport_parameters": parameters,
        "transport_parameters_error": parameters_error,
        "transport_parameters_normalised": quic::normalised_parameters(&parameters),
        "voice_id": quic::voice_id(initial.version, initial.first_dcid_len, &initial.packets, &parameters),
        "voice_description": quic::voice_description(initial.version, initial.first_dcid_len, &initial.packets, &parameters),
    })
}

/// The `http3` object: SETTINGS in wire order and the first request's field order.
fn http3_layer(conn: &QuicConnection) -> (Value, Option<H3Voice>) {
    let fields = conn.first_fields().unwrap_or_default();
    let (settings, settings_error) = match conn.settings() {
        Some(Ok(settings)) => (Some(settings.as_slice()), None),
        Some(Err(error)) => (None, Some(error.as_str())),
        None => (None, Some("no SETTINGS from the client's control stream")),
    };
    let voice = settings.map(|s| H3Voice::new(s, fields));
    let pseudo: Vec<&str> = fields
        .iter()
        .filter(|f| f.is_pseudo())
        .map(|f| f.name.as_str())
        .collect();
    let regular: Vec<&str> = fields
        .iter()
        .filter(|f| !f.is_pseudo())
        .map(|f| f.name.as_str())
        .collect();
    let value = json!({
        "settings": settings,
        "settings_error": settings_error,
        "pseudo_header_order": pseudo,
        "header_order": regular,
        "h3_text": voice.as_ref().map(|v| &v.h3_text),
        "h3_text_hash": voice.as_ref().map(|v| &v.h3_text_hash),
        "voice_id": voice.as_ref().map(|v| &v.voice_id),
        "voice_description": voice.as_ref().map(|v| &v.voice_description),
    });
    (value, voice)
}

/// Answers one HTTP/3 request and queues its observation (with its connection's row when it is
/// the connection's first request).
pub(crate) fn answer(
    state: &ApiState,
    store_peer_ip: PeerPolicy,
    conn: &QuicConnection,
    request: &H3Request,
) -> H3Answer {
    state.metrics.quic("h3_requests");
    let (path, token) = route(request);
    let token = match token.map(|t| valid_token(t.to_owned())).transpose() {
        Ok(token) => token,
        Err(error) => return error_answer(&error),
    };
    let (tls, analysis) = tls(conn);
    let facts = &analysis.facts;
    let quic = quic_layer(conn);
    let (http3, voice) = http3_layer(conn);
    let tls_facts = facts.tls.as_ref();
    let clean = json!({
        "schema_version": ECHO_SCHEMA_VERSION,
        "ja3_hash": tls_facts.map(|t| &t.ja3_hash),
        "ja3n_hash": tls_facts.map(|t| &t.ja3n_hash),
        "ja4": tls_facts.map(|t| &t.ja4),
        "tls_voice_id": tls_facts.map(|t| &t.voice_id),
        "order_id": tls_facts.map(|t| &t.order_id),
        "quic_voice_id": quic.get("voice_id"),
        "http3_voice_id": voice.as_ref().map(|v| &v.voice_id),
        "h3_text_hash": voice.as_ref().map(|v| &v.h3_text_hash),
        "spoken": "h3",
        "stream_id": request.stream_id,
        "index": request.index,
    });
    let time_unix_ms = now_ms();
    let connection = (request.index == 1).then(|| {
        Box::new(QuicConnectionRow {
            conn_id: conn.id.clone(),
            time_unix_ms,
            peer: store_peer_ip.apply(conn.peer),
            sni: facts.sni.clone(),
            ja4: tls_facts.map(|t| t.ja4.clone()),
            tls_voice_id: tls_facts.map(|t| t.voice_id.0.clone()),
            quic_voice_id: quic["voice_id"].as_str().map(str::to_owned),
            http3_voice_id: voice.as_ref().map(|v| v.voice_id.0.clone()),
            h3_text: voice.as_ref().map(|v| v.h3_text.clone()),
            quic: (!quic.is_null()).then(|| quic.to_string()),
            http3: Some(http3.to_string()),
            hello: conn
                .initial
                .as_ref()
                .and_then(|i| i.client_hello.clone())
                .unwrap_or_default(),
        })
    });
    let names = |pseudo: bool| -> Vec<String> {
        request
            .fields
            .iter()
            .filter(|f| f.is_pseudo() == pseudo)
            .map(|f| f.name.clone())
            .collect()
    };
    state.ledger.h3(H3Visit {
        ip: conn.peer.ip(),
        token: token.as_deref(),
        quic_voice_id: quic["voice_id"].as_str(),
        time_ms: time_unix_ms,
    });
    state.writer.submit(Job::Quic {
        connection,
        request: Box::new(QuicRequestRow {
            conn_id: conn.id.clone(),
            index: request.index,
            time_unix_ms,
            token: token.clone(),
            method: request.field(":method").unwrap_or_default().to_owned(),
            path: request.field(":path").unwrap_or_default().to_owned(),
            stream_id: request.stream_id,
            pseudo_header_order: names(true),
            header_order: names(false),
        }),
    });
    let full = || {
        let mut full = json!({
            "schema_version": ECHO_SCHEMA_VERSION,
            "time": rfc3339_ms(time_unix_ms),
            "peer": PeerPolicy::Full.apply(conn.peer),
            "token": token,
            "method": request.field(":method"),
            "path": request.field(":path"),
            "alpn": {
                "offered": facts.alpn.offered,
                "negotiated": "h3",
                "spoken": "h3",
            },
            "latency": conn.round_trips(),
            "tls": tls,
            "quic": quic,
            "http3": http3,
            "request": {"stream_id": request.stream_id, "index": request.index},
        });
        // With `--geoip`, as over TCP: looked up now, not stored.
        if let (Some(geo), Value::Object(map)) = (&state.geo, &mut full) {
            let place = serde_json::to_value(geo.echo(conn.peer.ip())).unwrap_or_default();
            map.insert("geo".into(), place);
        }
        full
    };
    let (status, body) = match path {
        "/api/all" => (200, full()),
        _ if path.starts_with("/probe/") => (200, full()),
        "/api/clean" => (200, clean),
        _ => (
            404,
            json!({"api_version": API_VERSION, "error": "not_found", "path": path, "fingerprint": clean}),
        ),
    };
    H3Answer {
        status,
        body: serde_json::to_vec_pretty(&body).unwrap_or_default(),
    }
}

fn error_answer(error: &ApiError) -> H3Answer {
    let body = json!({
        "api_version": API_VERSION,
        "error": "bad_token",
        "message": error.to_string(),
    });
    H3Answer {
        status: 400,
        body: serde_json::to_vec_pretty(&body).unwrap_or_default(),
    }
}
