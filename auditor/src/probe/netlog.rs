//! Chromium's net log (`--log-net-log=FILE`): what each TLS connection of a page load was shown.
//!
//! The file is one JSON object: `constants` names the numeric event types and phases (their
//! numbers change between Chromium builds, their names do not), and `events` lists every event
//! with its `source` (one socket, request or job), `phase` and `params`. Of a socket's events
//! the Chromium persona reads two:
//! - `SSL_CERTIFICATES_RECEIVED`: the chain the server showed, as PEM, logged before Chromium
//!   judges it (so with `--ignore-certificate-errors` too);
//! - the end of `SSL_CONNECT`: the handshake's `net_error` (absent, or 0, when it completed).
//!
//! Events of other types are skipped without parsing their `params`.

use std::collections::HashMap;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde::Deserialize;
use serde_json::value::RawValue;

/// One TLS connection of a load, in the order its handshake began.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsConnection {
    /// The end-entity certificate the server showed, DER; `None` when none arrived.
    pub leaf: Option<Vec<u8>>,
    /// Chromium's `net_error` of the handshake (negative, as in `net_error_list.h`); `None`
    /// while it completed or never ended.
    pub net_error: Option<i32>,
}

/// Why a net log could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NetLogError {
    /// Not the JSON of a net log (e.g. cut short by a killed browser).
    #[error("chromium's net log is not readable JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A received chain whose first certificate is not PEM.
    #[error("chromium's net log carries a certificate that is not PEM")]
    Pem,
}

#[derive(Deserialize)]
struct NetLog<'a> {
    constants: Constants,
    #[serde(borrow)]
    events: Vec<Event<'a>>,
}

#[derive(Deserialize)]
struct Constants {
    #[serde(rename = "logEventTypes")]
    event_types: HashMap<String, u32>,
    #[serde(rename = "logEventPhase")]
    phases: HashMap<String, u8>,
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type")]
    kind: u32,
    source: Source,
    #[serde(default)]
    phase: u8,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Source {
    /// Signed: some sources (the certificate verifier's tasks) have negative ids.
    id: i64,
}

#[derive(Deserialize)]
struct Certificates {
    #[serde(default)]
    certificates: Vec<String>,
}

#[derive(Deserialize)]
struct NetError {
    net_error: Option<i32>,
}

/// The TLS connections of the net log `json`, in the order their handshakes began.
///
/// # Errors
/// Not a net log's JSON, or a received certificate that is not PEM.
pub fn tls_connections(json: &[u8]) -> Result<Vec<TlsConnection>, NetLogError> {
    let log: NetLog<'_> = serde_json::from_slice(json)?;
    let kind = |name: &str| log.constants.event_types.get(name).copied();
    let (Some(connect), Some(received)) = (kind("SSL_CONNECT"), kind("SSL_CERTIFICATES_RECEIVED"))
    else {
        return Ok(Vec::new());
    };
    let phase = |name: &str| log.constants.phases.get(name).copied();
    let (begin, end) = (phase("PHASE_BEGIN"), phase("PHASE_END"));
    let mut order: Vec<i64> = Vec::new();
    let mut connections: HashMap<i64, TlsConnection> = HashMap::new();
    for event in &log.events {
        let id = event.source.id;
        if event.kind == connect && Some(event.phase) == begin {
            order.push(id);
            connections.entry(id).or_default();
        } else if event.kind == connect && Some(event.phase) == end {
            let error = params::<NetError>(event.params)?.and_then(|p| p.net_error);
            connections.entry(id).or_default().net_error = error.filter(|&code| code != 0);
        } else if event.kind == received {
            let chain = params::<Certificates>(event.params)?;
            let Some(pem) = chain.and_then(|c| c.certificates.into_iter().next()) else {
                continue;
            };
            let der =
                CertificateDer::from_pem_slice(pem.as_bytes()).map_err(|_| NetLogError::Pem)?;
            connections.entry(id).or_default().leaf = Some(der.to_vec());
        }
    }
    Ok(order
        .into_iter()
        .filter_map(|id| connections.remove(&id))
        .collect())
}

#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow)]
    url: Option<std::borrow::Cow<'a, str>>,
}

/// The `net_error` the last request for `url` ended with: the end of its `REQUEST_ALIVE` (the
/// begin names the URL). `None` when it succeeded, never ended, or was never made.
///
/// # Errors
/// Not a net log's JSON.
pub fn request_error(json: &[u8], url: &str) -> Result<Option<i32>, NetLogError> {
    let log: NetLog<'_> = serde_json::from_slice(json)?;
    let Some(alive) = log.constants.event_types.get("REQUEST_ALIVE").copied() else {
        return Ok(None);
    };
    let phase = |name: &str| log.constants.phases.get(name).copied();
    let (begin, end) = (phase("PHASE_BEGIN"), phase("PHASE_END"));
    let mut request = None;
    let mut error = None;
    for event in log.events.iter().filter(|event| event.kind == alive) {
        if Some(event.phase) == begin {
            let named = params::<Request<'_>>(event.params)?.and_then(|p| p.url);
            if named.as_deref() == Some(url) {
                request = Some(event.source.id);
                error = None;
            }
        } else if Some(event.phase) == end && request == Some(event.source.id) {
            error = params::<NetError>(event.params)?
                .and_then(|p| p.net_error)
                .filter(|&code| code != 0);
        }
    }
    Ok(error)
}

fn params<'de, T: Deserialize<'de>>(raw: Option<&'de RawValue>) -> Result<Option<T>, NetLogError> {
    raw.map(|raw| serde_json::from_str(raw.get()))
        .transpose()
        .map_err(NetLogError::from)
}

/// Whether `net_error` is one of Chromium's certificate errors (`ERR_CERT_*`, -200 to -299 in
/// `net_error_list.h`).
pub fn is_certificate_error(net_error: i32) -> bool {
    (-299..=-200).contains(&net_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A net log cut to its shape: the numbers are this file's own, as in every real log.
    fn log(events: &str) -> String {
        format!(
            r#"{{"constants":{{"logEventTypes":{{"SSL_CONNECT":7,"SSL_CERTIFICATES_RECEIVED":9,"OTHER":3}},
            "logEventPhase":{{"PHASE_BEGIN":1,"PHASE_END":2,"PHASE_NONE":0}}}},"events":[{events}]}}"#
        )
    }

    #[test]
    fn handshakes_in_order_with_their_errors() {
        let json = log(r#"{"type":7,"source":{"id":47},"phase":1},
               {"type":7,"source":{"id":39},"phase":1},
               {"type":3,"source":{"id":39},"phase":0,"params":{"certificates":17}},
               {"type":7,"source":{"id":47},"phase":2,"params":{"net_error":-202}},
               {"type":7,"source":{"id":39},"phase":2,"params":{"cipher_suite":4865}}"#);
        let connections = tls_connections(json.as_bytes()).unwrap();
        assert_eq!(
            connections,
            vec![
                TlsConnection {
                    leaf: None,
                    net_error: Some(-202)
                },
                TlsConnection::default()
            ]
        );
        assert!(is_certificate_error(-202));
        assert!(!is_certificate_error(-111));
    }

    #[test]
    fn the_last_request_for_the_url_gives_its_error() {
        let json = r#"{"constants":{"logEventTypes":{"REQUEST_ALIVE":5,"OTHER":3},
            "logEventPhase":{"PHASE_BEGIN":1,"PHASE_END":2,"PHASE_NONE":0}},"events":[
            {"type":5,"source":{"id":4},"phase":1,"params":{"url":"https://e/probe/t"}},
            {"type":5,"source":{"id":6},"phase":1,"params":{"url":"https://e/favicon.ico"}},
            {"type":5,"source":{"id":4},"phase":2,"params":{"net_error":-100}},
            {"type":5,"source":{"id":6},"phase":2,"params":{"net_error":-324}},
            {"type":5,"source":{"id":8},"phase":1,"params":{"url":"https://e/probe/t"}},
            {"type":3,"source":{"id":8},"phase":0,"params":{"net_error":-7}},
            {"type":5,"source":{"id":8},"phase":2,"params":{"net_error":-101}}]}"#;
        assert_eq!(
            request_error(json.as_bytes(), "https://e/probe/t").unwrap(),
            Some(-101)
        );
        assert_eq!(
            request_error(json.as_bytes(), "https://e/favicon.ico").unwrap(),
            Some(-324)
        );
        assert_eq!(
            request_error(json.as_bytes(), "https://e/other").unwrap(),
            None
        );
    }

    /// `captures/chromium-netlog/`: a real load through mitmproxy; the expected values are
    /// OpenSSL's, from the PEM inside the log (`capture.json`).
    #[test]
    fn reads_a_real_chromium_net_log() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../captures/chromium-netlog");
        let capture: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("capture.json")).unwrap()).unwrap();
        let log = std::fs::read(dir.join(capture["file"].as_str().unwrap())).unwrap();
        for (url, error) in capture["request_errors"]["values"].as_object().unwrap() {
            let expected = error.as_i64().map(|code| i32::try_from(code).unwrap());
            assert_eq!(request_error(&log, url).unwrap(), expected, "{url}");
        }
        let connections = tls_connections(&log).unwrap();
        let expected = capture["connections"].as_array().unwrap();
        assert_eq!(connections.len(), expected.len());
        for (connection, expected) in connections.iter().zip(expected) {
            let leaf = connection.leaf.as_deref().expect("a certificate");
            let view = crate::probe::CertView::of(leaf, [0; 32]).unwrap();
            assert_eq!(
                hex::encode(view.spki_sha256),
                expected["leaf_spki_sha256"]["value"].as_str().unwrap()
            );
            assert!(!view.pinned);
            // OpenSSL's RFC 2253 string lists the RDNs last first; x509-parser's, as encoded.
            let mut ours: Vec<&str> = view.issuer.split(", ").collect();
            let mut openssl: Vec<&str> = expected["leaf_issuer"]["value"]
                .as_str()
                .unwrap()
                .split(',')
                .collect();
            ours.sort_unstable();
            openssl.sort_unstable();
            assert_eq!(ours, openssl);
            assert_eq!(
                connection.net_error.map(i64::from),
                expected["net_error"]["value"].as_i64()
            );
        }
    }

    #[test]
    fn bad_logs_are_typed_errors() {
        assert!(matches!(
            tls_connections(b"{\"constants\":{"),
            Err(NetLogError::Json(_))
        ));
        let not_pem = log(r#"{"type":7,"source":{"id":1},"phase":1},
               {"type":9,"source":{"id":1},"phase":0,"params":{"certificates":["no pem"]}}"#);
        assert!(matches!(
            tls_connections(not_pem.as_bytes()),
            Err(NetLogError::Pem)
        ));
        let wrong_shape =
            log(r#"{"type":9,"source":{"id":1},"phase":0,"params":{"certificates":5}}"#);
        assert!(tls_connections(wrong_shape.as_bytes()).is_err());
    }
}
