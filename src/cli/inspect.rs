//! `exitvoice inspect`: the echo server's analysis, offline, printed as JSON.
//!
//! What an input is, is told by its content, never by its file name:
//! - a pcap or pcapng capture (magic number): one JSON object per TCP connection that carried a
//!   ClientHello or plain HTTP, with its client's SYN (`tcp`, as the echo reads it from the
//!   kernel) when captured, and the client's HTTP/2 or HTTP/1 bytes when the capture is
//!   cleartext or carries TLS keys (pcapng Decryption Secrets Block, or `--keylog`), and the
//!   round trips its capture times show (`latency`: SYN-ACK to the handshake ACK, the server's
//!   handshake flight to the client's answer, judged as the echo judges them); then one
//!   per QUIC client whose Initials were found in UDP (`"transport": "quic"`), its ClientHello
//!   through the same TLS analysis (JA4 `q…`) and a `quic` object (version, Initial packets,
//!   transport parameters in wire order);
//! - TLS records (first byte 0x16) or a bare ClientHello handshake message (0x01);
//! - a decrypted client prefix: the HTTP/2 connection preface or an HTTP/1 request line;
//! - any of the above written as hex (whitespace allowed).
//!
//! A ClientHello input followed by a prefix input is one connection (`inspect HELLO PREFIX`).
//! One input prints one JSON value (an object, or an array of connections for a capture); several
//! print an array with one object per input, named by `input` (a capture's connections under
//! `connections`). Bad input ends with a message and a non-zero exit code.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use exitvoice_echo::view::EchoView;
use exitvoice_protocol::analysis::{self, Analysis, ConnectionInput, Follower, SynSource};
use exitvoice_protocol::classify;
use exitvoice_protocol::pcap::{self, ClientData, PcapConnection, QuicConnection};
use exitvoice_protocol::tcp::P0fDb;
use exitvoice_protocol::{h1, quic, tls};
use exitvoice_schema::{
    ConnectionFacts, Measures, RequestRecord, RoundTrips, Spoken, TcpRoundTrip,
};
use serde_json::{json, Map, Value};

/// Largest input read (a capture is held in memory whole).
const MAX_INPUT_LEN: u64 = 1 << 30;

/// Flags of `exitvoice inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Inputs: a pcap/pcapng capture, TLS records, a ClientHello handshake message, an HTTP/2 or
    /// HTTP/1 client prefix, or any of these as hex; `-` reads standard input. A ClientHello
    /// followed by a prefix is analysed as one connection.
    #[arg(required = true, value_name = "FILE")]
    pub inputs: Vec<String>,
    /// NSS key log (`SSLKEYLOGFILE`) used to decrypt TLS connections in captures, on top of any
    /// keys the capture carries.
    #[arg(long, value_name = "FILE")]
    pub keylog: Option<PathBuf>,
    /// Write each capture connection's ClientHello records (`<capture>-<n>-hello.bin`) and client
    /// HTTP bytes (`<capture>-<n>-client.bin`) into this folder, for `inspect HELLO PREFIX`.
    #[arg(long, value_name = "DIR")]
    pub extract: Option<PathBuf>,
    /// The ALPN protocol the server selected, for `inspect HELLO PREFIX` (the files do not carry
    /// it; `--record-dir`'s `<id>.json` says it as `alpn_negotiated`). Without it, what the
    /// client spoke stands for it, and a silent downgrade (bucket D) cannot be seen.
    #[arg(long, value_name = "PROTOCOL")]
    pub negotiated: Option<String>,
    /// A p0f v3 signature database (`p0f.fp`, e.g. Debian's `/etc/p0f/p0f.fp`): each captured
    /// SYN's `tcp.os` is the OS it names.
    #[arg(long, value_name = "FILE")]
    pub p0f_db: Option<PathBuf>,
    /// Print one line of JSON instead of indented JSON.
    #[arg(long)]
    pub compact: bool,
}

/// One input, classified by content.
enum Input {
    /// A pcap or pcapng file.
    Capture(Vec<u8>),
    /// TLS records or a handshake message.
    Hello(Vec<u8>),
    /// Client bytes after the handshake (or of a cleartext connection).
    Prefix(Vec<u8>),
}

/// Runs `exitvoice inspect`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let keylog = match &args.keylog {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read key log {}", path.display()))?,
        ),
        None => None,
    };
    let p0f_db = match &args.p0f_db {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read p0f database {}", path.display()))?;
            Some(P0fDb::parse(&text).with_context(|| path.display().to_string())?)
        }
        None => None,
    };
    let files = (args.extract.as_deref(), p0f_db.as_ref());
    let mut inputs = Vec::with_capacity(args.inputs.len());
    for name in &args.inputs {
        let bytes = read_input(name)?;
        inputs.push((name.as_str(), classify(bytes, name)?));
    }
    let output = match inputs.as_slice() {
        [(_, Input::Hello(hello)), (_, Input::Prefix(prefix))] => {
            let negotiated = args.negotiated.as_deref().map(str::as_bytes);
            let mut out = connection(
                (SynSource::default(), None),
                Some(hello),
                Some(prefix),
                negotiated,
            );
            check_single(&out)?;
            strip_errors_if_empty(&mut out);
            out
        }
        [(name, input)] => analyse(name, input, keylog.as_deref(), files)?,
        many => {
            let mut all = Vec::with_capacity(many.len());
            for (name, input) in many {
                let value = analyse(name, input, keylog.as_deref(), files)?;
                let mut map = match value {
                    Value::Object(map) => map,
                    connections => Map::from_iter([("connections".to_owned(), connections)]),
                };
                map.insert("input".into(), Value::from(*name));
                all.push(Value::Object(map));
            }
            Value::Array(all)
        }
    };
    let text = if args.compact {
        serde_json::to_string(&output)?
    } else {
        serde_json::to_string_pretty(&output)?
    };
    println!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// One connection read from files, analysed as `inspect` prints it (for `exitvoice diff`): a
/// ClientHello, a client prefix, the two together, or a capture's first connection that carried
/// a ClientHello or HTTP.
///
/// # Errors
/// Unreadable or unrecognised files, more than one capture, or nothing that could be analysed.
pub(crate) fn connection_of_files(names: &[&str]) -> anyhow::Result<Value> {
    let mut hello = None;
    let mut prefix = None;
    for name in names {
        match classify(read_input(name)?, name)? {
            Input::Capture(bytes) if names.len() == 1 => {
                let capture = pcap::read(&bytes, None).with_context(|| (*name).to_owned())?;
                // The first TCP connection with a layer, else the first QUIC client with a hello.
                let tcp = capture
                    .connections
                    .iter()
                    .map(|c| capture_connection(c, None));
                let quic = capture.quic.iter().map(quic_connection);
                return tcp
                    .chain(quic)
                    .find(|c| ["tls", "http2", "http1"].iter().any(|l| !c[l].is_null()))
                    .with_context(|| format!("{name}: no connection with a ClientHello or HTTP"));
            }
            Input::Capture(_) => bail!("{name}: a capture stands alone, not with other files"),
            Input::Hello(bytes) => hello = Some(bytes),
            Input::Prefix(bytes) => prefix = Some(bytes),
        }
    }
    let out = connection(
        (SynSource::default(), None),
        hello.as_deref(),
        prefix.as_deref(),
        None,
    );
    check_single(&out)?;
    Ok(out)
}

fn read_input(name: &str) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    if name == "-" {
        std::io::stdin()
            .take(MAX_INPUT_LEN)
            .read_to_end(&mut bytes)
            .context("cannot read standard input")?;
    } else {
        std::fs::File::open(name)
            .with_context(|| format!("cannot open {name}"))?
            .take(MAX_INPUT_LEN)
            .read_to_end(&mut bytes)
            .with_context(|| format!("cannot read {name}"))?;
    }
    Ok(bytes)
}

fn classify(bytes: Vec<u8>, name: &str) -> anyhow::Result<Input> {
    if let Some(input) = classify_binary(&bytes) {
        return Ok(match input {
            Kind::Capture => Input::Capture(bytes),
            Kind::Hello => Input::Hello(bytes),
            Kind::Prefix => Input::Prefix(bytes),
        });
    }
    if let Some(decoded) = decode_hex(&bytes) {
        return match classify_binary(&decoded) {
            Some(Kind::Capture) => Ok(Input::Capture(decoded)),
            Some(Kind::Hello) => Ok(Input::Hello(decoded)),
            Some(Kind::Prefix) => Ok(Input::Prefix(decoded)),
            None => bail!(
                "{name}: hex that decodes to neither TLS nor an HTTP client prefix (starts {})",
                hex::encode(decoded.get(..8).unwrap_or(&decoded))
            ),
        };
    }
    if bytes.is_empty() {
        bail!("{name}: empty input");
    }
    bail!(
        "{name}: not a pcap/pcapng capture, TLS records, a ClientHello, an HTTP client prefix or \
         hex (starts {})",
        hex::encode(bytes.get(..8).unwrap_or(&bytes))
    )
}

/// What binary input is, told by its first bytes.
enum Kind {
    Capture,
    Hello,
    Prefix,
}

fn classify_binary(bytes: &[u8]) -> Option<Kind> {
    if pcap::is_capture(bytes) {
        Some(Kind::Capture)
    } else if matches!(bytes.first(), Some(0x16 | 0x01)) {
        Some(Kind::Hello)
    } else if bytes.starts_with(b"PRI * HTTP/2.0") || pcap::is_http_start(bytes) {
        Some(Kind::Prefix)
    } else {
        None
    }
}

/// The bytes written as hex in `text` (ASCII whitespace ignored), if that is what it is.
fn decode_hex(text: &[u8]) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if digits.is_empty() {
        return None;
    }
    hex::decode(digits).ok()
}

fn analyse(
    name: &str,
    input: &Input,
    keylog: Option<&str>,
    files: (Option<&Path>, Option<&P0fDb>),
) -> anyhow::Result<Value> {
    match input {
        Input::Capture(bytes) => capture(name, bytes, keylog, files),
        Input::Hello(hello) => {
            let mut out = connection((SynSource::default(), None), Some(hello), None, None);
            check_single(&out).with_context(|| name.to_owned())?;
            strip_errors_if_empty(&mut out);
            Ok(out)
        }
        Input::Prefix(prefix) => {
            let mut out = connection((SynSource::default(), None), None, Some(prefix), None);
            check_single(&out).with_context(|| name.to_owned())?;
            strip_errors_if_empty(&mut out);
            Ok(out)
        }
    }
}

/// A single input whose only layer failed to parse is an error, not an empty object.
fn check_single(out: &Value) -> anyhow::Result<()> {
    let layers = ["tls", "http2", "http1"];
    if layers.iter().all(|l| out.get(l).is_none_or(Value::is_null)) {
        let errors = out
            .get("errors")
            .and_then(Value::as_array)
            .map(|e| {
                e.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default();
        bail!("nothing could be analysed: {errors}");
    }
    Ok(())
}

fn strip_errors_if_empty(out: &mut Value) {
    if let Value::Object(map) = out {
        if map
            .get("errors")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
        {
            map.remove("errors");
        }
    }
}

/// The analysis of one connection: its ClientHello records, the client's HTTP bytes, and the
/// ALPN protocol the server chose when the input says (a TLS 1.2 ServerHello in a capture). The
/// same analysis the live server makes ([`analysis::analyse`]), the first request's head read
/// the same way ([`analysis::Follower`]), and its layers answered through the server's own
/// [`EchoView`].
///
/// The bucket needs ALPN offered and negotiated. Offered comes from the ClientHello; without
/// one, it is taken from what the client spoke. Negotiated is the server's choice when known,
/// else what the client spoke (TLS 1.3 encrypts the server's choice, and a prefix file does not
/// carry it), so a silent downgrade (bucket D) is only seen when the ServerHello shows `h2`.
fn connection(
    (syn, p0f_db): (SynSource<'_>, Option<&P0fDb>),
    hello: Option<&[u8]>,
    prefix: Option<&[u8]>,
    server_alpn: Option<&[u8]>,
) -> Value {
    let spoken = prefix.map_or(Spoken::Unknown, |p| {
        classify::sniff(p).unwrap_or(Spoken::Unknown)
    });
    let server_alpn = server_alpn.map(String::from_utf8_lossy);
    let inferred_alpn = (spoken == Spoken::H2).then_some("h2");
    let analysis = analysis::analyse(&ConnectionInput {
        syn,
        p0f_db,
        hello: hello.unwrap_or_default(),
        prefix: prefix.unwrap_or_default(),
        alpn_negotiated: server_alpn.as_deref().or(inferred_alpn),
        tls_version: None,
        cipher: None,
        spoken: None,
    });
    let facts = &analysis.facts;
    let hello_parsed = facts.tls.is_some();
    let mut errors = layer_errors(&analysis);
    let (record, head_error) = first_request(facts, spoken, prefix);
    errors.extend(head_error);
    let json = analysis.json(hello.unwrap_or_default(), prefix.unwrap_or_default());
    // The layers as the server answers them: the same view, without a peer.
    let mut echo = match serde_json::to_value(EchoView::new(&analysis, json, None, &record)) {
        Ok(Value::Object(echo)) => echo,
        _ => Map::new(),
    };
    let mut layer = |name: &str| echo.remove(name).unwrap_or(Value::Null);
    let tcp = layer("tcp");
    let tcp_absent = layer("tcp_absent");
    let mut tls = layer("tls");
    if let Value::Object(map) = &mut tls {
        map.insert("sni".into(), json!(facts.sni));
        map.insert("alpn".into(), json!(facts.alpn.offered));
    }
    let http2 = layer("http2");
    let mut http1 = layer("http1");
    // Offline only: the request head in full, values included.
    if let (Value::Object(map), Some(bytes)) = (&mut http1, prefix) {
        if let Ok(parsed) = h1::parse_head(bytes) {
            map.insert(
                "detail".into(),
                serde_json::to_value(&parsed).unwrap_or_default(),
            );
        }
    }
    let mut out = Map::new();
    out.insert("tcp".into(), tcp);
    if !tcp_absent.is_null() {
        out.insert("tcp_absent".into(), tcp_absent);
    }
    out.insert("tls".into(), tls);
    out.insert("http2".into(), http2);
    out.insert("http1".into(), http1);
    out.insert(
        "alpn".into(),
        json!({
            "offered": hello_parsed.then_some(&facts.alpn.offered),
            "negotiated": server_alpn,
            "spoken": prefix.map(|_| spoken),
            "inferred": !hello_parsed || server_alpn.is_none(),
        }),
    );
    out.insert("bucket".into(), layer("bucket"));
    out.insert("profile".into(), layer("profile"));
    out.insert("errors".into(), json!(errors));
    Value::Object(out)
}

/// What the analysis could not read, named by layer.
fn layer_errors(analysis: &Analysis) -> Vec<String> {
    analysis
        .errors
        .iter()
        .map(|e| {
            let layer = match e.layer {
                "h2" => "http2",
                "h1" => "http1",
                other => other,
            };
            format!("{layer}: {}", e.message)
        })
        .collect()
}

/// The first request on the connection as the server records it, without the words only a live
/// request has (time, method, path, token), and what kept its head from being read.
fn first_request(
    facts: &ConnectionFacts,
    spoken: Spoken,
    prefix: Option<&[u8]>,
) -> (RequestRecord, Option<String>) {
    let (head, head_error) = Follower::new(spoken).head(prefix.unwrap_or_default(), 0, 1);
    let mut error = head_error.map(|e| format!("http2: {}", e.message));
    match prefix {
        // A connection opened and never used (browsers preconnect) sent no application data.
        Some([]) | None => {}
        Some(_) if spoken == Spoken::Unknown => {
            error =
                Some("client bytes are neither the HTTP/2 preface nor an HTTP/1 request".into());
        }
        Some(_) => {}
    }
    // Without a ClientHello, what the client spoke stands for what it offered.
    let mut bucket_facts = ConnectionFacts::clone(facts);
    if facts.tls.is_none() && spoken == Spoken::H2 {
        bucket_facts.alpn.offered = vec!["h2".to_owned()];
    }
    let record = RequestRecord {
        conn_id: String::new(),
        index: 1,
        time_unix_ms: 0,
        token: None,
        method: String::new(),
        path: String::new(),
        stream_id: head.stream_id,
        bucket: prefix.and_then(|_| analysis::bucket(&bucket_facts, 1, false)),
        pseudo_header_order: head.pseudo_header_order,
        header_order: head.header_order,
        http1: head.http1,
    };
    (record, error)
}

fn capture(
    name: &str,
    bytes: &[u8],
    keylog: Option<&str>,
    (extract, p0f_db): (Option<&Path>, Option<&P0fDb>),
) -> anyhow::Result<Value> {
    let capture = pcap::read(bytes, keylog).with_context(|| format!("{name}: cannot read"))?;
    if let Some(stopped) = &capture.stopped {
        eprintln!("exitvoice: {name}: {stopped}; showing the connections before that point");
    }
    let stem = Path::new(name)
        .file_name()
        .map_or_else(|| "stdin".into(), |s| s.to_string_lossy().into_owned());
    let mut all = Vec::with_capacity(capture.connections.len());
    for (index, conn) in capture.connections.iter().enumerate() {
        if let Some(dir) = extract {
            write_extract(dir, &stem, index, conn)?;
        }
        all.push(capture_connection(conn, p0f_db));
    }
    all.extend(capture.quic.iter().map(quic_connection));
    Ok(Value::Array(all))
}

fn write_extract(
    dir: &Path,
    stem: &str,
    index: usize,
    conn: &PcapConnection,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    if let Some(hello) = conn.client_hellos.first() {
        let path = dir.join(format!("{stem}-{index}-hello.bin"));
        std::fs::write(&path, hello).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(bytes) = conn.client_data.bytes() {
        let path = dir.join(format!("{stem}-{index}-client.bin"));
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// The round trips a capture's times show, judged as the echo judges its own: the SYN-ACK to
/// the client's handshake ACK for TCP, the server's handshake flight to the client's answer for
/// the application; `None` when the capture shows neither (no times, or no handshake). Both are
/// read from where the capture was taken: only a capture at the server sees the client's whole
/// path in the flight.
fn capture_round_trips(conn: &PcapConnection) -> Option<RoundTrips> {
    if conn.handshake_rtt_us.is_none() && conn.flight_rtt_us.is_none() {
        return None;
    }
    Some(RoundTrips::judge(&Measures {
        tcp: conn.handshake_rtt_us.map(|us| TcpRoundTrip {
            rtt_us: us,
            min_rtt_us: Some(us),
            rttvar_us: None,
        }),
        tcp_absent: Some("the capture holds no SYN-ACK and handshake ACK of this connection"),
        tls_us: conn.flight_rtt_us,
        ..Measures::default()
    }))
}

fn capture_connection(conn: &PcapConnection, p0f_db: Option<&P0fDb>) -> Value {
    let syn = conn
        .syn
        .as_deref()
        .map_or_else(SynSource::default, SynSource::Saved);
    let mut value = connection(
        (syn, p0f_db),
        conn.client_hellos.first().map(Vec::as_slice),
        conn.client_data.bytes(),
        conn.server_hello.as_ref().and_then(|s| s.alpn.as_deref()),
    );
    let Value::Object(map) = &mut value else {
        return value;
    };
    map.insert("transport".into(), json!("tcp"));
    map.insert("client".into(), json!(conn.client.to_string()));
    map.insert("server".into(), json!(conn.server.to_string()));
    map.insert("first_frame".into(), json!(conn.first_frame));
    map.insert(
        "server_hello".into(),
        json!(conn.server_hello.as_ref().map(|s| json!({
            "version": format!("{:#06x}", s.version),
            "cipher_suite": format!("{:#06x}", s.cipher_suite),
        }))),
    );
    let client_data = match &conn.client_data {
        ClientData::Cleartext(_) => json!("cleartext"),
        ClientData::Decrypted(_) => json!("decrypted"),
        _ => match &conn.decrypt_error {
            Some(error) => json!(format!("not decrypted: {error}")),
            None => Value::Null,
        },
    };
    map.insert("client_data".into(), client_data);
    if let Some(latency) = capture_round_trips(conn) {
        map.insert("latency".into(), json!(latency));
    }
    map.insert(
        "client_data_len".into(),
        json!(conn.client_data.bytes().map(<[u8]>::len)),
    );
    map.insert(
        "client_stream".into(),
        json!({
            "bytes": conn.client_stream.bytes,
            "gap": conn.client_stream.gap,
            "capped": conn.client_stream.capped,
            "start_guessed": conn.client_stream.start_guessed,
        }),
    );
    // A second ClientHello, after a HelloRetryRequest, is fingerprinted too.
    if let Some(retry) = conn.client_hellos.get(1) {
        let retry_tls = tls::parse_client_hello(retry)
            .ok()
            .and_then(|h| serde_json::to_value(h.fingerprints()).ok());
        map.insert("retry_tls".into(), retry_tls.unwrap_or(Value::Null));
    }
    value
}

/// A QUIC client of a capture: its reassembled ClientHello through the same analysis as a TCP
/// one, and what its Initials looked like.
fn quic_connection(conn: &QuicConnection) -> Value {
    let hello = conn.client_hello.as_deref();
    let mut value = connection((SynSource::default(), None), hello, None, None);
    let Value::Object(map) = &mut value else {
        return value;
    };
    map.insert("transport".into(), json!("quic"));
    map.insert("client".into(), json!(conn.client.to_string()));
    map.insert("server".into(), json!(conn.server.to_string()));
    map.insert("first_frame".into(), json!(conn.first_frame));
    let parameters = hello
        .and_then(|h| tls::parse_client_hello(h).ok())
        .and_then(|h| quic::transport_parameters(&h));
    let (parameters, parameters_error) = match parameters {
        Some(Ok(list)) => (json!(list), Value::Null),
        Some(Err(error)) => (Value::Null, json!(error.to_string())),
        None => (Value::Null, Value::Null),
    };
    map.insert(
        "quic".into(),
        json!({
            "version": conn.version,
            "first_dcid_len": conn.first_dcid_len,
            "datagram_sizes": conn.datagram_sizes,
            "initial_packets": conn.packets,
            "client_hello_complete": hello.is_some(),
            "error": conn.error.as_ref().map(ToString::to_string),
            "transport_parameters": parameters,
            "transport_parameters_error": parameters_error,
        }),
    );
    value
}
