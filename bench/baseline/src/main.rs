//! `baseline-echo`: the bare TLS echo that `scripts/bench.sh` measures exitvoice against.
//!
//! rustls (aws-lc-rs) with ALPN `h2` and `http/1.1`, and hyper-util's auto server (HTTP/1.1 and
//! HTTP/2 with hyper's defaults), answering every request with `{"ok":true}`. No capture, no
//! parsing, no store: the least a Rust TLS + HTTP/2 server does per connection and per request.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use clap::Parser;
use http::{header, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Flags of `baseline-echo`.
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on; port 0 picks a free port (the address is printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// PEM certificate chain, leaf first.
    #[arg(long)]
    cert: PathBuf,
    /// PEM private key of --cert.
    #[arg(long)]
    key: PathBuf,
}

const BODY: &[u8] = br#"{"ok":true}"#;

async fn answer(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut response = Response::new(Full::new(Bytes::from_static(BODY)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

fn tls_config(args: &Args) -> anyhow::Result<rustls::ServerConfig> {
    let certs = CertificateDer::pem_file_iter(&args.cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .with_context(|| format!("reading {}", args.cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(&args.key)
        .with_context(|| format!("reading {}", args.key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    // Stateless session tickets, as exitvoice issues them: both servers do the same TLS work.
    config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()?;
    Ok(config)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let acceptor = TlsAcceptor::from(Arc::new(tls_config(&args)?));
    let listener = TcpListener::bind(args.listen).await?;
    println!(
        "baseline-echo: listening on https://{}",
        listener.local_addr()?
    );
    let server = Arc::new(auto::Builder::new(TokioExecutor::new()));
    loop {
        let (tcp, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, most likely: back off instead of spinning.
                eprintln!("baseline-echo: accept: {error}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // `TCP_NODELAY`, as exitvoice sets it (capture/connection.rs), so that both servers send
        // the same segments. Under Nagle's algorithm the kernel holds a small answer back while
        // an earlier one is unacknowledged and sends them together, and on loopback every
        // segment's receive path runs inside the sender's system call: that would measure
        // Nagle's algorithm, not exitvoice's work (docs/benchmarks.md).
        let _ = tcp.set_nodelay(true);
        let (acceptor, server) = (acceptor.clone(), Arc::clone(&server));
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let _ = server
                .serve_connection(TokioIo::new(tls), service_fn(answer))
                .await;
        });
    }
}
