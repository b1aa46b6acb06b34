//! The bare TLS echo's parts, shared by `baseline-echo` and by `floor-echo` (bench/floor/), which
//! must do the same TLS and HTTP work as the baseline for the difference to be the issue's work.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use bytes::Bytes;
use http::{header, Response};
use http_body_util::Full;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Where the echo listens and what it serves.
#[derive(Debug, clap::Args)]
pub struct Serving {
    /// Address to listen on; port 0 picks a free port (the address is printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// PEM certificate chain, leaf first.
    #[arg(long)]
    pub cert: PathBuf,
    /// PEM private key of --cert.
    #[arg(long)]
    pub key: PathBuf,
}

/// The baseline's answer to every request.
pub const OK: &[u8] = br#"{"ok":true}"#;

/// `body` as a JSON answer.
///
/// # Errors
/// Never: the error type is the one hyper's `service_fn` wants.
pub fn json(body: Bytes) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut response = Response::new(Full::new(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// rustls (aws-lc-rs) serving `cert` and `key` with ALPN `h2` and `http/1.1` and stateless
/// session tickets, as exitvoice does: both servers do the same TLS work.
///
/// # Errors
/// Fails if the files cannot be read or do not hold a certificate chain and its key.
pub fn tls_config(cert: &Path, key: &Path) -> anyhow::Result<rustls::ServerConfig> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .with_context(|| format!("reading {}", cert.display()))?;
    let key =
        PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading {}", key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()?;
    Ok(config)
}
