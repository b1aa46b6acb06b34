//! HTTP/3 over one quinn connection, reading what a fingerprint needs from the client's own
//! stream bytes: its control stream's SETTINGS in wire order (RFC 9114 section 6.2.1) and each
//! request's QPACK field section in wire order (RFC 9204 section 4.5). Answers come from the
//! API ([`Answer`]).
//!
//! Our SETTINGS leave SETTINGS_QPACK_MAX_TABLE_CAPACITY at its default of 0 (RFC 9204 section
//! 3.2.3), so a client cannot use the dynamic table and every field section decodes alone.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use exitvoice_protocol::h3::{
    decode_field_section, decode_settings, encode_field_section, encode_frame, get_varint,
    read_frame, FrameType, HeaderField, Setting, StreamType,
};
use quinn::{Connection, RecvStream, SendStream};
use tokio::sync::Notify;

use super::attempts::InitialCapture;
use crate::metrics::Metrics;

/// Largest frame read on the control stream or as a request's HEADERS.
const MAX_FRAME: usize = 64 * 1024;
/// Time a request has to send its HEADERS.
const HEADERS_DEADLINE: Duration = Duration::from_secs(10);
/// Time the first request's answer waits for the client's SETTINGS (they travel on another
/// stream, so they may arrive after it).
const SETTINGS_WAIT: Duration = Duration::from_secs(1);
/// SETTINGS_MAX_FIELD_SECTION_SIZE we announce (RFC 9114 section 7.2.4.1).
const OUR_MAX_FIELD_SECTION: u64 = 64 * 1024;

/// The client's SETTINGS, or why they could not be read.
pub(crate) type ClientSettings = Result<Vec<Setting>, String>;

/// One QUIC connection as the API sees it.
#[derive(Debug)]
pub(crate) struct QuicConnection {
    /// The connection id in the observation store's sense.
    pub(crate) id: String,
    /// The client's address.
    pub(crate) peer: SocketAddr,
    /// What the client's Initials showed, when the capture saw them.
    pub(crate) initial: Option<InitialCapture>,
    settings: OnceLock<ClientSettings>,
    settings_read: Notify,
    requests: AtomicU32,
    first_fields: OnceLock<Vec<HeaderField>>,
    /// The QUIC connection, for its round-trip estimate.
    transport: Option<quinn::Connection>,
}

impl QuicConnection {
    pub(crate) fn new(id: String, peer: SocketAddr, initial: Option<InitialCapture>) -> Self {
        Self {
            id,
            peer,
            initial,
            settings: OnceLock::new(),
            settings_read: Notify::new(),
            requests: AtomicU32::new(0),
            first_fields: OnceLock::new(),
            transport: None,
        }
    }

    /// The connection with its QUIC transport, whose round trip it reports.
    pub(crate) fn timed(self, transport: quinn::Connection) -> Self {
        Self {
            transport: Some(transport),
            ..self
        }
    }

    /// The QUIC stack's smoothed round-trip estimate (RFC 9002 section 5.3): end to end, to the
    /// client through any UDP relay, with no kernel round trip to a relay below it.
    pub(crate) fn round_trips(&self) -> exitvoice_schema::RoundTrips {
        exitvoice_schema::RoundTrips::judge(&exitvoice_schema::Measures {
            quic_us: self
                .transport
                .as_ref()
                .map(|t| u32::try_from(t.rtt().as_micros()).unwrap_or(u32::MAX)),
            tcp_absent: Some(
                "QUIC runs end to end over UDP: no transport round trip to a relay below it",
            ),
            ..exitvoice_schema::Measures::default()
        })
    }

    /// The client's SETTINGS, `None` when its control stream has not brought them (yet).
    pub(crate) fn settings(&self) -> Option<&ClientSettings> {
        self.settings.get()
    }

    /// HTTP/3 requests read so far.
    pub(crate) fn requests(&self) -> u32 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The fields of the connection's first request, wire order.
    pub(crate) fn first_fields(&self) -> Option<&[HeaderField]> {
        self.first_fields.get().map(Vec::as_slice)
    }

    fn set_settings(&self, settings: ClientSettings) {
        let _ = self.settings.set(settings);
        self.settings_read.notify_waiters();
    }

    async fn wait_for_settings(&self) {
        let read = self.settings_read.notified();
        if self.settings.get().is_none() {
            let _ = tokio::time::timeout(SETTINGS_WAIT, read).await;
        }
    }
}

/// One request as read from its stream.
#[derive(Debug)]
pub(crate) struct H3Request {
    /// The QUIC stream id.
    pub(crate) stream_id: u64,
    /// 1 for the connection's first request.
    pub(crate) index: u32,
    /// Its fields, wire order.
    pub(crate) fields: Vec<HeaderField>,
}

impl H3Request {
    /// The value of the first field named `name`.
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.value.as_str())
    }
}

/// What the API answers.
#[derive(Debug)]
pub(crate) struct H3Answer {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
}

/// The API's answer to a request on a connection.
pub(crate) type Answer = Arc<dyn Fn(&QuicConnection, &H3Request) -> H3Answer + Send + Sync>;

/// Serves HTTP/3 on `connection` until the client or the idle timeout ends it.
pub(crate) async fn serve(
    connection: Connection,
    quic: Arc<QuicConnection>,
    answer: Answer,
    metrics: Arc<Metrics>,
) {
    tracing::debug!(
        conn = %quic.id,
        captured = quic.initial.is_some(),
        "QUIC connection established"
    );
    // Our control stream: its type, then SETTINGS; it stays open as long as the connection
    // (closing it is a connection error, RFC 9114 section 6.2.1).
    let _control = match open_control(&connection).await {
        Ok(control) => control,
        Err(()) => return,
    };
    let uni = {
        let (connection, quic, metrics) =
            (connection.clone(), Arc::clone(&quic), Arc::clone(&metrics));
        tokio::spawn(async move {
            while let Ok(stream) = connection.accept_uni().await {
                tokio::spawn(read_uni(stream, Arc::clone(&quic), Arc::clone(&metrics)));
            }
        })
    };
    while let Ok((send, recv)) = connection.accept_bi().await {
        let (quic, answer, metrics) =
            (Arc::clone(&quic), Arc::clone(&answer), Arc::clone(&metrics));
        tokio::spawn(async move {
            if request(send, recv, &quic, &answer).await.is_err() {
                metrics.quic("h3_request_errors");
            }
        });
    }
    uni.abort();
}

async fn open_control(connection: &Connection) -> Result<SendStream, ()> {
    let mut control = connection.open_uni().await.map_err(drop)?;
    let mut settings = Vec::new();
    exitvoice_protocol::h3::put_varint(&mut settings, 0x06);
    exitvoice_protocol::h3::put_varint(&mut settings, OUR_MAX_FIELD_SECTION);
    let mut bytes = Vec::new();
    exitvoice_protocol::h3::put_varint(&mut bytes, StreamType::CONTROL.0);
    encode_frame(&mut bytes, FrameType::SETTINGS, &settings);
    control.write_all(&bytes).await.map_err(drop)?;
    Ok(control)
}

/// Reads more of `stream` into `buf`; `false` at the end of the stream or on an error.
async fn read_more(stream: &mut RecvStream, buf: &mut Vec<u8>) -> bool {
    match stream.read_chunk(MAX_FRAME, true).await {
        Ok(Some(chunk)) => {
            buf.extend_from_slice(&chunk.bytes);
            true
        }
        _ => false,
    }
}

/// Reads a unidirectional stream: the control stream's first frame must be SETTINGS; the rest
/// of every stream is read and dropped (a QPACK encoder stream carries nothing when the table
/// capacity is 0; unknown stream types are ignored, RFC 9114 section 6.2).
async fn read_uni(mut stream: RecvStream, quic: Arc<QuicConnection>, metrics: Arc<Metrics>) {
    let mut buf = Vec::new();
    let kind = loop {
        if let Some((kind, used)) = get_varint(&buf) {
            buf.drain(..used);
            break StreamType(kind);
        }
        if !read_more(&mut stream, &mut buf).await {
            return;
        }
    };
    if kind == StreamType::CONTROL {
        let settings = loop {
            match read_frame(&buf, MAX_FRAME) {
                Ok(Some(frame)) if frame.kind == FrameType::SETTINGS => {
                    let payload = &buf[frame.payload_start..frame.end()];
                    break decode_settings(payload).map_err(|e| e.to_string());
                }
                Ok(Some(frame)) => {
                    break Err(format!(
                        "control stream opens with frame type {:#x}",
                        frame.kind.0
                    ))
                }
                Err(error) => break Err(error.to_string()),
                Ok(None) => {
                    if !read_more(&mut stream, &mut buf).await {
                        break Err("control stream ended before SETTINGS".to_owned());
                    }
                }
            }
        };
        if settings.is_err() {
            metrics.quic("h3_bad_control_stream");
        }
        quic.set_settings(settings);
    }
    buf.clear();
    while read_more(&mut stream, &mut buf).await {
        buf.clear();
    }
}

/// Reads one request's HEADERS and writes the answer.
async fn request(
    mut send: SendStream,
    mut recv: RecvStream,
    quic: &QuicConnection,
    answer: &Answer,
) -> Result<(), ()> {
    let stream_id = u64::from(recv.id());
    let mut buf = Vec::new();
    let headers = tokio::time::timeout(HEADERS_DEADLINE, async {
        loop {
            match read_frame(&buf, MAX_FRAME) {
                Ok(Some(frame)) if frame.kind == FrameType::HEADERS => {
                    return decode_field_section(&buf[frame.payload_start..frame.end()])
                        .map_err(drop);
                }
                // Reserved and unknown frame types before HEADERS are skipped (RFC 9114
                // section 9); DATA before HEADERS is a malformed request.
                Ok(Some(frame)) if frame.kind != FrameType::DATA => {
                    buf.drain(..frame.end());
                }
                Ok(Some(_)) | Err(_) => return Err(()),
                Ok(None) => {
                    if !read_more(&mut recv, &mut buf).await {
                        return Err(());
                    }
                }
            }
        }
    })
    .await
    .map_err(drop)??;
    let index = quic.requests.fetch_add(1, Ordering::Relaxed) + 1;
    if index == 1 {
        let _ = quic.first_fields.set(headers.clone());
        quic.wait_for_settings().await;
    }
    let request = H3Request {
        stream_id,
        index,
        fields: headers,
    };
    let answered = answer(quic, &request);
    let length = answered.body.len().to_string();
    let status = answered.status.to_string();
    let section = encode_field_section(&[
        (":status", &status),
        ("content-type", "application/json"),
        ("content-length", &length),
    ]);
    let mut bytes = Vec::with_capacity(section.len() + answered.body.len() + 16);
    encode_frame(&mut bytes, FrameType::HEADERS, &section);
    encode_frame(&mut bytes, FrameType::DATA, &answered.body);
    send.write_all(&bytes).await.map_err(drop)?;
    send.finish().map_err(drop)?;
    Ok(())
}
