//! Gateway test doubles: HTTP CONNECT proxies that terminate the client's TLS (ALPN h2) and
//! re-originate upstream, the way commercial proxy gateways do.
//!
//! - [`Mode::Downgrade`]: negotiates h2 upstream (ALPN `h2`, `http/1.1`) and then speaks
//!   HTTP/1.1 on it: the echo server sees a silent downgrade (bucket D).
//! - [`Mode::Remux`]: forwards every client's request over one shared upstream h2 connection:
//!   the echo server sees later probes mid-connection (bucket C).
//!
//! Built from hyper (server and client) and rustls; runs on its own runtime thread, loopback
//! only. Upstream, it trusts the echo server's generated certificate (read from its directory).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

/// How the double treats traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// h2 to the client, HTTP/1.1 on an h2-negotiated upstream connection.
    Downgrade,
    /// h2 to the client, one shared upstream h2 connection for all clients.
    Remux,
}

/// A running double; it lives as long as the test process.
pub struct Gateway {
    /// Its CONNECT port on 127.0.0.1.
    pub port: u16,
}

struct Shared {
    mode: Mode,
    upstream_tls: Arc<rustls::ClientConfig>,
    remux: Mutex<Option<hyper::client::conn::http2::SendRequest<Full<Bytes>>>>,
}

impl Gateway {
    /// Starts a double of `mode`; `echo_cert` is the echo server's certificate PEM.
    pub fn start(mode: Mode, echo_cert: &Path) -> Self {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(echo_cert).expect("echo cert") {
            roots.add(cert.expect("echo cert PEM")).expect("add root");
        }
        let mut upstream = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        upstream.alpn_protocols = match mode {
            Mode::Downgrade => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            Mode::Remux => vec![b"h2".to_vec()],
        };
        let own = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(own.signing_key.serialize_der()));
        let mut server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![own.cert.der().clone()], key)
            .unwrap();
        server.alpn_protocols = vec![b"h2".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let shared = Arc::new(Shared {
            mode,
            upstream_tls: Arc::new(upstream),
            remux: Mutex::new(None),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                while let Ok((tcp, _)) = listener.accept().await {
                    let acceptor = acceptor.clone();
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let _ = client(tcp, acceptor, shared).await;
                    });
                }
            });
        });
        Self { port }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn client(
    mut tcp: TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    shared: Arc<Shared>,
) -> Result<(), BoxError> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        if tcp.read(&mut byte).await? == 0 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let target: SocketAddr = {
        let authority = text
            .split_whitespace()
            .nth(1)
            .ok_or_else(|| "no CONNECT target".to_owned())?;
        let port = authority
            .rsplit(':')
            .next()
            .ok_or_else(|| "no port".to_owned())?
            .parse::<u16>()?;
        SocketAddr::from(([127, 0, 0, 1], port))
    };
    tcp.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    let tls = acceptor.accept(tcp).await?;
    let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        let shared = shared.clone();
        async move {
            let response = match forward(request, target, &shared).await {
                Ok(response) => response,
                Err(error) => {
                    let mut response =
                        http::Response::new(Full::new(Bytes::from(error.to_string())));
                    *response.status_mut() = http::StatusCode::BAD_GATEWAY;
                    response
                }
            };
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(tls), service)
        .await?;
    Ok(())
}

async fn upstream_tls(
    target: SocketAddr,
    shared: &Shared,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, BoxError> {
    let tcp = TcpStream::connect(target).await?;
    let connector = tokio_rustls::TlsConnector::from(shared.upstream_tls.clone());
    Ok(connector
        .connect(ServerName::try_from("localhost".to_owned())?, tcp)
        .await?)
}

async fn forward(
    request: http::Request<Incoming>,
    target: SocketAddr,
    shared: &Shared,
) -> Result<http::Response<Full<Bytes>>, BoxError> {
    let path = request
        .uri()
        .path_and_query()
        .map_or("/".to_owned(), |p| p.to_string());
    match shared.mode {
        Mode::Downgrade => {
            let mut upstream = upstream_tls(target, shared).await?;
            let request = format!(
                "GET {path} HTTP/1.1\r\nHost: localhost:{}\r\nUser-Agent: gateway-double\r\n\
                 Connection: close\r\n\r\n",
                target.port()
            );
            upstream.write_all(request.as_bytes()).await?;
            let mut raw = Vec::new();
            match upstream.read_to_end(&mut raw).await {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
                Err(e) => return Err(e.into()),
            }
            let mut fields = [httparse::EMPTY_HEADER; 64];
            let mut response = httparse::Response::new(&mut fields);
            let httparse::Status::Complete(len) = response.parse(&raw)? else {
                return Err("partial upstream response".to_owned().into());
            };
            let status = response.code.unwrap_or(502);
            let body = Bytes::copy_from_slice(&raw[len..]);
            Ok(http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Full::new(body))?)
        }
        Mode::Remux => {
            let mut sender = {
                let mut slot = shared.remux.lock().await;
                match slot.as_ref() {
                    Some(sender) if !sender.is_closed() => sender.clone(),
                    _ => {
                        let tls = upstream_tls(target, shared).await?;
                        let (sender, connection) = hyper::client::conn::http2::handshake(
                            TokioExecutor::new(),
                            TokioIo::new(tls),
                        )
                        .await?;
                        tokio::spawn(connection);
                        *slot = Some(sender.clone());
                        sender
                    }
                }
            };
            let upstream_request =
                http::Request::get(format!("https://localhost:{}{path}", target.port()))
                    .body(Full::new(Bytes::new()))?;
            sender.ready().await?;
            let response = sender.send_request(upstream_request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            Ok(http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Full::new(body))?)
        }
    }
}
