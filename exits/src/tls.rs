//! TLS to the echo server through a tunnel, verifying the echo's certificate by SPKI pin.
//!
//! The pin *is* the trust decision: the echo server usually runs with a self-signed or private
//! certificate, so there is no chain to a public root to check. The verifier records what it was
//! shown and accepts it for this one handshake; signatures are still verified (RFC 8446 section
//! 4.4.3), so the peer must hold the key of the certificate it showed. A certificate whose SPKI
//! is not the pinned one means something re-originated TLS: the probe is flagged
//! `tls_intercepted` and completes anyway, so the interceptor's view is recorded.
//!
//! Every probe builds its own `ClientConfig`: no session cache is shared, so no probe resumes
//! and every ClientHello is a full one, comparable with the baseline's.

use std::sync::{Arc, Mutex};

use rustls::pki_types::{CertificateDer, ServerName};
use sha2::{Digest, Sha256};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::dial::Tunnel;
use crate::error::{within, Phase, ProbeError};
use crate::leaf::LeafVerifier;
use crate::EchoTarget;

/// The certificate the auditor was shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertView {
    /// sha256 of the end-entity certificate's SubjectPublicKeyInfo (DER).
    pub spki_sha256: [u8; 32],
    /// The certificate's issuer, RFC 4514 form.
    pub issuer: String,
    /// Whether the SPKI matched the pin.
    pub pinned: bool,
}

impl CertView {
    /// The view of the end-entity certificate `der`, judged against `pin`; `None` when it is not
    /// an X.509 certificate.
    pub fn of(der: &[u8], pin: [u8; 32]) -> Option<Self> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let spki: [u8; 32] = Sha256::digest(cert.tbs_certificate.subject_pki.raw).into();
        Some(Self {
            spki_sha256: spki,
            issuer: cert.issuer().to_string(),
            pinned: spki == pin,
        })
    }
}

/// A finished handshake.
pub struct Handshake {
    /// The TLS stream.
    pub stream: TlsStream<Box<dyn Tunnel>>,
    /// The ALPN protocol the server selected.
    pub alpn: Option<String>,
    /// The certificate shown.
    pub cert: CertView,
}

/// Judges the echo's certificate by its SPKI pin: records what it was shown and accepts it for
/// this handshake whether pinned or not (the caller flags a mismatch).
fn record_pin(
    pin: [u8; 32],
    seen: Arc<Mutex<Option<CertView>>>,
) -> impl Fn(&CertificateDer<'_>) -> Result<(), rustls::Error> + Send + Sync + 'static {
    move |end_entity| {
        let view = CertView::of(end_entity, pin).ok_or(rustls::Error::InvalidCertificate(
            rustls::CertificateError::BadEncoding,
        ))?;
        if let Ok(mut seen) = seen.lock() {
            *seen = Some(view);
        }
        Ok(())
    }
}

/// What remembers the certificate a handshake was shown.
pub type Shown = Arc<Mutex<Option<CertView>>>;

/// A client configuration that judges the echo's certificate by its pin (see the module docs),
/// offering `alpn` over `versions`; the certificate shown lands in the returned [`Shown`].
///
/// # Errors
/// The provider does not support `versions`.
pub fn pinned_config(
    echo: &EchoTarget,
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> Result<(rustls::ClientConfig, Shown), ProbeError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let seen = Arc::new(Mutex::new(None));
    let verifier = Arc::new(LeafVerifier::new(
        provider.clone(),
        record_pin(echo.spki_sha256, Arc::clone(&seen)),
    ));
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| ProbeError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok((config, seen))
}

/// The certificate a finished handshake was shown.
///
/// # Errors
/// [`ProbeError::Tls`] when the verifier never ran.
pub fn shown(seen: &Shown) -> Result<CertView, ProbeError> {
    seen.lock()
        .ok()
        .and_then(|mut seen| seen.take())
        .ok_or_else(|| ProbeError::Tls("no certificate was verified".to_owned()))
}

/// The echo's host as a TLS server name.
///
/// # Errors
/// [`ProbeError::Tls`] when the host is not a valid server name.
pub fn server_name(echo: &EchoTarget) -> Result<ServerName<'static>, ProbeError> {
    ServerName::try_from(echo.host.clone())
        .map_err(|_| ProbeError::Tls("echo host is not a valid server name".to_owned()))
}

/// Runs the TLS handshake with the echo server over `stream`, offering `alpn`, under `limit`.
///
/// # Errors
/// [`ProbeError::Tls`] on handshake failure, a TLS-phase timeout.
pub async fn handshake(
    stream: Box<dyn Tunnel>,
    echo: &EchoTarget,
    alpn: &[&[u8]],
    limit: std::time::Duration,
) -> Result<Handshake, ProbeError> {
    let (config, seen) = pinned_config(echo, rustls::DEFAULT_VERSIONS, alpn)?;
    let connector = TlsConnector::from(Arc::new(config));
    let tls = within(Phase::Tls, limit, async {
        connector
            .connect(server_name(echo)?, stream)
            .await
            .map_err(|e| ProbeError::Tls(e.to_string()))
    })
    .await?;
    let alpn = tls
        .get_ref()
        .1
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    Ok(Handshake {
        stream: tls,
        alpn,
        cert: shown(&seen)?,
    })
}
