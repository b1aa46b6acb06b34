//! The QUIC probe: one HTTP/3 request (RFC 9114) to the echo over UDP, directly for the
//! baseline, through the exit's UDP relay for a SOCKS5 exit (`UDP ASSOCIATE`, [`socks5_udp`]).
//! An HTTP `CONNECT` exit carries TCP only, so it is not probed: its UDP is not carried by
//! construction ([`UdpPath::HttpConnect`]).
//!
//! The client is quinn with the `h3` crate, on the same pinned rustls configuration as the TCP
//! probes (TLS 1.3 only, as QUIC requires, RFC 9001 section 4.2). The echo answers
//! `/probe/<token>` over HTTP/3 with its `quic` and `http3` layers; the probe keeps their voices.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use exitvoice_exits::dial::socks5::Target;
use exitvoice_exits::dial::{
    connect_proxy, resolve, socks5_target, socks5_udp, ProxyLeg, Timeouts,
};
use exitvoice_exits::error::{within, Phase, ProbeError};
use exitvoice_exits::{EchoTarget, Exit, ProxyScheme};
use exitvoice_schema::{H3Probe, UdpPath};
use quinn::{AsyncUdpSocket, Endpoint, EndpointConfig, Runtime, TokioRuntime};

use exitvoice_exits::tls::{pinned_config, server_name, shown, CertView};

/// Largest echo body read over HTTP/3: the echo is a few KiB; anything far past it is not one.
const MAX_BODY: usize = 1 << 20;

/// What the echo answered over HTTP/3.
struct H3Echo {
    echo: serde_json::Value,
    cert: CertView,
    latency: Duration,
}

/// The QUIC probe of `exit` (or the direct baseline), with its own `token`.
pub async fn probe(
    exit: Option<&Exit>,
    echo: &EchoTarget,
    token: &str,
    timeouts: &Timeouts,
) -> H3Probe {
    let via = match exit.map(|e| e.proxy.scheme) {
        None => UdpPath::Direct,
        Some(ProxyScheme::Socks5 | ProxyScheme::Socks5h) => UdpPath::Socks5UdpAssociate,
        Some(ProxyScheme::Http | ProxyScheme::Https) => {
            return H3Probe::not_carried(UdpPath::HttpConnect);
        }
    };
    let result = match exit {
        None => direct(echo, token, timeouts).await,
        Some(exit) => through_socks5(exit, echo, token, timeouts).await,
    };
    match result {
        Ok(answer) => H3Probe {
            via,
            udp_carried: true,
            token: Some(token.to_owned()),
            latency_ms: Some(u64::try_from(answer.latency.as_millis()).unwrap_or(u64::MAX)),
            error: None,
            egress_ip: text(&answer.echo, "/peer/ip"),
            tls_voice_id: text(&answer.echo, "/tls/voice_id"),
            quic_voice_id: text(&answer.echo, "/quic/voice_id"),
            http3_voice_id: text(&answer.echo, "/http3/voice_id"),
            tls_intercepted: !answer.cert.pinned,
        },
        Err(error) => H3Probe {
            token: Some(token.to_owned()),
            error: Some(crate::record::failure(&error)),
            ..H3Probe::not_carried(via)
        },
    }
}

fn text(echo: &serde_json::Value, pointer: &str) -> Option<String> {
    echo.pointer(pointer)
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
}

async fn direct(echo: &EchoTarget, token: &str, timeouts: &Timeouts) -> Result<H3Echo, ProbeError> {
    let started = Instant::now();
    let remote = resolve(&echo.host, echo.port, timeouts.connect).await?;
    let local = SocketAddr::new(unspecified_like(remote), 0);
    let socket = std::net::UdpSocket::bind(local).map_err(|e| io(&e))?;
    let socket = TokioRuntime.wrap_udp_socket(socket).map_err(|e| io(&e))?;
    exchange(socket, remote, echo, token, timeouts, started).await
}

async fn through_socks5(
    exit: &Exit,
    echo: &EchoTarget,
    token: &str,
    timeouts: &Timeouts,
) -> Result<H3Echo, ProbeError> {
    let started = Instant::now();
    let ProxyLeg { tcp, credentials } = connect_proxy(exit, timeouts).await?;
    let association = within(
        Phase::Tunnel,
        timeouts.tunnel,
        socks5_udp::associate(tcp, credentials.auth()),
    )
    .await?;
    let target = socks5_target(exit.proxy.scheme, &echo.host, echo.port, timeouts.connect).await?;
    let remote = match &target {
        Target::Addr(addr) => *addr,
        Target::Name(..) => socks5_udp::placeholder_remote(echo.port),
    };
    let socket = socks5_udp::RelayedUdp::bind(&association, &target, remote).await?;
    let answer = exchange(Arc::new(socket), remote, echo, token, timeouts, started).await;
    // The association ends with its control connection, once the exchange is over.
    drop(association);
    answer
}

/// QUIC handshake and one HTTP/3 request over `socket`.
async fn exchange(
    socket: Arc<dyn AsyncUdpSocket>,
    remote: SocketAddr,
    echo: &EchoTarget,
    token: &str,
    timeouts: &Timeouts,
    started: Instant,
) -> Result<H3Echo, ProbeError> {
    let (config, seen) = pinned_config(echo, &[&rustls::version::TLS13], &[b"h3"])?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(Arc::new(config))
        .map_err(|e| ProbeError::Tls(e.to_string()))?;
    let mut endpoint = Endpoint::new_with_abstract_socket(
        EndpointConfig::default(),
        None,
        socket,
        Arc::new(TokioRuntime),
    )
    .map_err(|e| io(&e))?;
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    let name = server_name(echo)?.to_str().into_owned();
    let connection = within(Phase::Tls, timeouts.tls, async {
        endpoint
            .connect(remote, &name)
            .map_err(|e| ProbeError::Tls(e.to_string()))?
            .await
            .map_err(|e| ProbeError::Tls(e.to_string()))
    })
    .await?;
    let cert = shown(&seen)?;
    let authority = echo.authority();
    let body = within(Phase::Response, timeouts.response, async {
        let (mut driver, mut requests) = h3::client::builder()
            .send_grease(false)
            .build::<_, _, Bytes>(h3_quinn::Connection::new(connection.clone()))
            .await
            .map_err(|e| h3_error(&e))?;
        let drive = tokio::spawn(async move {
            std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        let request = http::Request::get(format!("https://{authority}/probe/{token}"))
            .header("user-agent", "exitvoice-auditor")
            .body(())
            .map_err(|_| ProbeError::BadEcho("unusable probe request".to_owned()))?;
        let result = async {
            let mut stream = requests
                .send_request(request)
                .await
                .map_err(|e| h3_error(&e))?;
            stream.finish().await.map_err(|e| h3_error(&e))?;
            let response = stream.recv_response().await.map_err(|e| h3_error(&e))?;
            if response.status() != http::StatusCode::OK {
                return Err(ProbeError::BadEcho(format!("status {}", response.status())));
            }
            let mut body = Vec::new();
            while let Some(mut chunk) = stream.recv_data().await.map_err(|e| h3_error(&e))? {
                if body.len() + chunk.remaining() > MAX_BODY {
                    return Err(ProbeError::BadEcho("echo body too large".to_owned()));
                }
                while chunk.has_remaining() {
                    let part = chunk.chunk();
                    body.extend_from_slice(part);
                    let len = part.len();
                    chunk.advance(len);
                }
            }
            Ok(body)
        }
        .await;
        drive.abort();
        result
    })
    .await;
    connection.close(0_u32.into(), b"done");
    endpoint.close(0_u32.into(), b"done");
    let echo_json: serde_json::Value = serde_json::from_slice(&body?)
        .map_err(|e| ProbeError::BadEcho(format!("not an echo: {e}")))?;
    if echo_json.get("token").and_then(serde_json::Value::as_str) != Some(token) {
        return Err(ProbeError::BadEcho("token mismatch".to_owned()));
    }
    Ok(H3Echo {
        echo: echo_json,
        cert,
        latency: started.elapsed(),
    })
}

fn unspecified_like(remote: SocketAddr) -> std::net::IpAddr {
    match remote {
        SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    }
}

fn io(error: &std::io::Error) -> ProbeError {
    ProbeError::io(Phase::Connect, "udp socket", error)
}

/// An HTTP/3 failure after the handshake: the echo's answer did not come back as one.
fn h3_error(error: &dyn std::error::Error) -> ProbeError {
    ProbeError::BadEcho(format!("HTTP/3: {error}"))
}
