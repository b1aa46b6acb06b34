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

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::dial::Tunnel;
use crate::error::{within, Phase, ProbeError};
use crate::exits::EchoTarget;

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

/// A finished handshake.
pub struct Handshake {
    /// The TLS stream.
    pub stream: TlsStream<Box<dyn Tunnel>>,
    /// The ALPN protocol the server selected.
    pub alpn: Option<String>,
    /// The certificate shown.
    pub cert: CertView,
}

#[derive(Debug)]
struct PinVerifier {
    pin: [u8; 32],
    provider: Arc<CryptoProvider>,
    seen: Mutex<Option<CertView>>,
}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let (_, cert) = x509_parser::parse_x509_certificate(end_entity).map_err(|_| {
            rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding)
        })?;
        let spki: [u8; 32] = Sha256::digest(cert.tbs_certificate.subject_pki.raw).into();
        let view = CertView {
            spki_sha256: spki,
            issuer: cert.issuer().to_string(),
            pinned: spki == self.pin,
        };
        if let Ok(mut seen) = self.seen.lock() {
            *seen = Some(view);
        }
        // Accepted for this handshake whether pinned or not; the caller flags a mismatch.
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
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
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier = Arc::new(PinVerifier {
        pin: echo.spki_sha256,
        provider: provider.clone(),
        seen: Mutex::new(None),
    });
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ProbeError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let server_name = ServerName::try_from(echo.host.clone())
        .map_err(|_| ProbeError::Tls("echo host is not a valid server name".to_owned()))?;
    let connector = TlsConnector::from(Arc::new(config));
    let tls = within(Phase::Tls, limit, async {
        connector
            .connect(server_name, stream)
            .await
            .map_err(|e| ProbeError::Tls(e.to_string()))
    })
    .await?;
    let alpn = tls
        .get_ref()
        .1
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    let cert = verifier
        .seen
        .lock()
        .ok()
        .and_then(|mut seen| seen.take())
        .ok_or_else(|| ProbeError::Tls("no certificate was verified".to_owned()))?;
    Ok(Handshake {
        stream: tls,
        alpn,
        cert,
    })
}
