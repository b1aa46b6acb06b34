//! TLS to an `https://` proxy, before the `CONNECT` (the tunnel then runs TLS inside TLS).
//!
//! The proxy's certificate is verified normally (webpki, the proxy's host name) against the
//! exit's `proxy_ca` file, or the system CA bundle when none is given. Unlike the echo server,
//! a proxy is not pinned: it is a server the operator chose to trust.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::error::ProbeError;

/// Where Debian, Fedora and Alpine keep the system CA bundle.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

fn roots(ca_file: Option<&Path>) -> Result<rustls::RootCertStore, ProbeError> {
    let mut roots = rustls::RootCertStore::empty();
    let files: Vec<&Path> = match ca_file {
        Some(path) => vec![path],
        None => SYSTEM_BUNDLES
            .iter()
            .map(Path::new)
            .filter(|p| p.exists())
            .collect(),
    };
    for file in files {
        let certs = CertificateDer::pem_file_iter(file)
            .map_err(|_| ProbeError::ProxyTls("cannot read the proxy CA file".to_owned()))?;
        for cert in certs.flatten() {
            // A bundle may hold certificates webpki cannot use; skip those, keep the rest.
            let _ = roots.add(cert);
        }
    }
    if roots.is_empty() {
        return Err(ProbeError::ProxyTls(
            "no usable CA certificate for the proxy".to_owned(),
        ));
    }
    Ok(roots)
}

/// Runs the TLS handshake with the proxy at `host` over `tcp`.
///
/// # Errors
/// [`ProbeError::ProxyTls`] when the CAs cannot be loaded or the handshake fails.
pub async fn connect(
    tcp: TcpStream,
    host: &str,
    ca_file: Option<&Path>,
) -> Result<TlsStream<TcpStream>, ProbeError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ProbeError::ProxyTls(e.to_string()))?
        .with_root_certificates(roots(ca_file)?)
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_owned())
        .map_err(|_| ProbeError::ProxyTls("proxy host is not a valid server name".to_owned()))?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| ProbeError::ProxyTls(e.to_string()))
}
