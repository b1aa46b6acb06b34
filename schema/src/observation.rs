//! Observations: what the echo server saw on one connection or one request, as stored and as
//! served by `GET /api/observations`.

use serde::{Deserialize, Serialize};

use crate::echo::{Alpn, Peer, Spoken, TlsEcho};

/// Version of the observation JSON shape. Bump when a field changes meaning or is removed.
pub const OBSERVATION_SCHEMA_VERSION: u32 = 1;

/// One observation, as the echo server queues it for the store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Connection id, unique per server start (also the file stem under `--record-dir`).
    pub conn_id: String,
    /// 1 for the first request on the connection, 2 for the second, …; 0 for a connection that
    /// carried no request (a failed handshake, a silent client).
    pub request_index: u32,
    /// When it happened, RFC 3339 UTC.
    pub time: String,
    /// The same instant in milliseconds since the Unix epoch (for `since` queries).
    pub time_unix_ms: i64,
    /// The TCP peer.
    pub peer: Peer,
    /// The probe token, when the request carried one.
    pub token: Option<String>,
    /// The server name the ClientHello asked for.
    pub sni: Option<String>,
    /// Why the connection failed (`handshake_timeout`, `tls_alert_received:UnknownCA`, …).
    pub failure: Option<String>,
    /// The parsed summary: the echo JSON for a request, the connection summary otherwise.
    pub summary: serde_json::Value,
    /// The ClientHello records exactly as received (hex in JSON; left out when empty, e.g. when
    /// `/api/observations` was asked without `raw=true`).
    #[serde(with = "hex_bytes", default, skip_serializing_if = "Vec::is_empty")]
    pub hello: Vec<u8>,
    /// The decrypted client bytes kept by the tap, up to the capture cap (hex in JSON; left out
    /// when empty).
    #[serde(with = "hex_bytes", default, skip_serializing_if = "Vec::is_empty")]
    pub prefix: Vec<u8>,
}

/// What the echo server saw on one connection as a whole: stored as the summary of a connection
/// that carried no request, and written as `<conn-id>.json` under `--record-dir`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionSummary {
    /// [`OBSERVATION_SCHEMA_VERSION`] of the server that wrote it.
    pub schema_version: u32,
    /// Connection id (the file stem under `--record-dir`).
    pub conn_id: String,
    /// When the connection was accepted, RFC 3339 UTC.
    pub time: String,
    /// The TCP peer.
    pub peer: Peer,
    /// The server software, `exitvoice/<version>`.
    pub server: String,
    /// The server name the ClientHello asked for.
    pub sni: Option<String>,
    /// ALPN offered, negotiated and spoken.
    pub alpn: Alpn,
    /// The negotiated TLS version (`TLSv1.3`, …), when the handshake completed.
    pub tls_version: Option<String>,
    /// The negotiated cipher suite (IANA name, or hex when unnamed).
    pub cipher: Option<String>,
    /// Why the connection failed, if it did.
    pub failure: Option<String>,
    /// Requests the connection carried.
    pub requests: u32,
    /// The first request, when there was one.
    pub first_request: Option<FirstRequest>,
    /// Bytes of ClientHello records captured.
    pub hello_len: usize,
    /// Bytes of decrypted client data captured.
    pub prefix_len: usize,
    /// The client sent more decrypted bytes than the capture cap kept.
    pub prefix_truncated: bool,
    /// TLS fingerprints, when the ClientHello parsed.
    pub tls: Option<TlsEcho>,
    /// Why the ClientHello did not parse, when it did not.
    pub tls_error: Option<String>,
}

/// The first request of a connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirstRequest {
    /// Request method.
    pub method: String,
    /// Path and query as received.
    pub path: String,
    /// HTTP/2 stream id, when the connection spoke h2.
    pub stream_id: Option<u32>,
}

/// `<conn-id>.json` under `--record-dir`: the provenance of one recorded connection, in the flat
/// format of the captures/ recorder (`tests/tools/record.py`), so captures/ can be recorded by
/// the echo server itself. Beside it: `<conn-id>.hello.bin` (the ClientHello records as
/// received) and `<conn-id>.prefix.bin` (the decrypted client bytes, up to the capture cap).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionRecord {
    /// Connection id (the file stem).
    pub conn_id: String,
    /// When the connection was accepted, RFC 3339 UTC.
    pub time: String,
    /// The TCP peer as `ip:port` (`[ip]:port` for IPv6).
    pub peer: String,
    /// The server name the ClientHello asked for.
    pub sni: Option<String>,
    /// ALPN protocol names offered, wire order.
    pub alpn_offered: Vec<String>,
    /// The ALPN protocol the server selected.
    pub alpn_negotiated: Option<String>,
    /// What the client's first decrypted bytes were.
    pub spoken: Spoken,
    /// The negotiated TLS version (`TLSv1.3`, …).
    pub tls_version: Option<String>,
    /// The negotiated cipher suite (IANA name).
    pub cipher: Option<String>,
    /// The first request, when there was one.
    pub first_request: Option<FirstRequest>,
    /// Requests the connection carried.
    pub requests: u32,
    /// Bytes in `<conn-id>.hello.bin`.
    pub hello_len: usize,
    /// Bytes in `<conn-id>.prefix.bin`.
    pub prefix_len: usize,
    /// The client sent more than the capture cap kept.
    pub prefix_truncated: bool,
    /// Why the connection failed, if it did.
    pub failure: Option<String>,
    /// What recorded it: `exitvoice/<version> serve --record-dir`.
    pub recorder: String,
}

/// An observation read back from the store, with its row id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredObservation {
    /// Row id, increasing in insertion order.
    pub id: i64,
    /// The observation.
    #[serde(flatten)]
    pub observation: Observation,
}

/// A query over stored observations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservationQuery {
    /// Only observations stored under this probe token.
    pub token: Option<String>,
    /// Only observations at or after this instant (ms since the Unix epoch).
    pub since_unix_ms: Option<i64>,
    /// At most this many, oldest first.
    pub limit: u32,
}

/// Lowercase hex for byte fields, so the JSON stays readable and `exitvoice inspect` can take it.
mod hex_bytes {
    use serde::{de, Deserialize, Deserializer, Serializer};

    const DIGITS: &[u8; 16] = b"0123456789abcdef";

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = String::with_capacity(bytes.len() * 2);
        for byte in bytes {
            out.push(char::from(DIGITS[usize::from(byte >> 4)]));
            out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
        }
        serializer.serialize_str(&out)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(de::Error::custom("invalid hex digit")),
        };
        let digits = text.as_bytes();
        if digits.len() % 2 != 0 {
            return Err(de::Error::custom("odd number of hex digits"));
        }
        digits
            .chunks_exact(2)
            .map(|pair| match pair {
                [high, low] => Ok(nibble(*high)? << 4 | nibble(*low)?),
                _ => Err(de::Error::custom("odd number of hex digits")),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_bytes_round_trip_as_hex() {
        let observation = Observation {
            conn_id: "c1".to_owned(),
            request_index: 0,
            time: "2026-01-01T00:00:00Z".to_owned(),
            time_unix_ms: 1_767_225_600_000,
            peer: Peer {
                ip: "::1".to_owned(),
                port: 4242,
            },
            token: None,
            sni: None,
            failure: Some("handshake_timeout".to_owned()),
            summary: serde_json::json!({}),
            hello: vec![0x16, 0x03, 0x01, 0xab],
            prefix: Vec::new(),
        };
        let json = serde_json::to_value(&observation).expect("serialize");
        assert_eq!(json["hello"], "160301ab");
        assert!(json.get("prefix").is_none(), "empty bytes are left out");
        let back: Observation = serde_json::from_value(json.clone()).expect("deserialize");
        assert_eq!(back, observation);
        for bad in ["abc", "zz"] {
            let mut json = json.clone();
            json["hello"] = serde_json::json!(bad);
            assert!(serde_json::from_value::<Observation>(json).is_err());
        }
    }
}
