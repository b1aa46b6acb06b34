//! A public certificate from an ACME CA (RFC 8555), obtained through the TLS-ALPN-01 challenge
//! (RFC 8737) on the serving port itself, by the maintained `rustls-acme` crate: it orders,
//! caches (account and certificate, under [`AcmeSettings::cache`]), renews before expiry and
//! swaps the certificate in its resolver, so renewals are served without a restart.
//!
//! The echo's own path is unchanged: the ClientHello is still read and replayed into rustls,
//! whose certificate resolver is `rustls-acme`'s. A connection that negotiates the `acme-tls/1`
//! protocol is the CA validating a challenge (RFC 8737 section 3): it gets the challenge
//! certificate, is counted, and is closed without being stored as an observation.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::StreamExt;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::server::ResolvesServerCert;
use rustls_acme::caches::DirCache;
use rustls_acme::AcmeConfig;

/// Let's Encrypt's production directory, the default of `--acme-directory`.
pub const LETS_ENCRYPT: &str = rustls_acme::acme::LETS_ENCRYPT_PRODUCTION_DIRECTORY;
/// Let's Encrypt's staging directory (`--acme-staging`).
pub const LETS_ENCRYPT_STAGING: &str = rustls_acme::acme::LETS_ENCRYPT_STAGING_DIRECTORY;
/// The ALPN protocol of TLS-ALPN-01 validation connections (RFC 8737 section 6.2).
pub(crate) const ACME_TLS_ALPN: &[u8] = rustls_acme::acme::ACME_TLS_ALPN_NAME;

/// Where and for what names to get certificates.
#[derive(Clone, Debug)]
pub struct AcmeSettings {
    /// The names the certificate covers (`--acme-domain`).
    pub domains: Vec<String>,
    /// Contact URLs of the account (`mailto:…`).
    pub contact: Vec<String>,
    /// The CA's directory URL.
    pub directory: String,
    /// A PEM root to trust for the directory's HTTPS, beside the public roots (a private CA, or
    /// a test CA such as pebble's).
    pub directory_ca: Option<PathBuf>,
    /// Directory holding the account key and the certificates.
    pub cache: PathBuf,
}

/// Why ACME could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcmeError {
    /// `--acme-directory-ca` could not be read or holds no certificate.
    #[error("--acme-directory-ca: {0}")]
    DirectoryCa(String),
    /// rustls refused the client configuration.
    #[error("ACME client TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// The certificate resolver to serve with, and the task that orders and renews (run it until
/// shutdown).
pub(crate) struct Acme {
    pub(crate) resolver: Arc<dyn ResolvesServerCert>,
    pub(crate) driver: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
}

/// Sets up ordering, caching and renewal for `settings`.
///
/// # Errors
/// [`AcmeError`] when the directory's extra root cannot be loaded.
pub(crate) fn start(settings: &AcmeSettings) -> Result<Acme, AcmeError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(path) = &settings.directory_ca {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .and_then(Iterator::collect)
            .map_err(|error| AcmeError::DirectoryCa(format!("{}: {error}", path.display())))?;
        if certs.is_empty() {
            return Err(AcmeError::DirectoryCa(format!(
                "{}: no certificate",
                path.display()
            )));
        }
        for cert in certs {
            roots.add(cert)?;
        }
    }
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut state = AcmeConfig::new_with_client_config(&settings.domains, Arc::new(client))
        .contact(&settings.contact)
        .directory(&settings.directory)
        .cache(DirCache::new(settings.cache.clone()))
        .state();
    let resolver: Arc<dyn ResolvesServerCert> = state.resolver();
    let driver = Box::pin(async move {
        while let Some(event) = state.next().await {
            match event {
                Ok(ok) => tracing::info!(event = ?ok, "ACME"),
                Err(error) => tracing::warn!(%error, "ACME"),
            }
        }
    });
    Ok(Acme { resolver, driver })
}
