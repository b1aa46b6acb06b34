//! A rustls server-certificate verifier that leaves the decision on the end-entity certificate
//! to its owner — a pin, a recorder, an exact certificate — and still verifies the handshake
//! signatures with the provider's algorithms (RFC 8446 section 4.4.3; TLS 1.2's
//! ServerKeyExchange), so the peer must hold the key of the certificate it showed.
//!
//! The echo server runs with a self-signed or private certificate, so no chain to a public root
//! is checked here: whoever builds the verifier says what it trusts.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// What decides on the end-entity certificate: `Ok` accepts it for this handshake.
type Judge = dyn Fn(&CertificateDer<'_>) -> Result<(), rustls::Error> + Send + Sync;

/// A verifier deciding on the leaf certificate with a function of its owner's.
pub struct LeafVerifier {
    provider: Arc<CryptoProvider>,
    judge: Box<Judge>,
}

impl LeafVerifier {
    /// A verifier that accepts the certificates `judge` accepts, checking signatures with
    /// `provider`'s algorithms.
    pub fn new(
        provider: Arc<CryptoProvider>,
        judge: impl Fn(&CertificateDer<'_>) -> Result<(), rustls::Error> + Send + Sync + 'static,
    ) -> Self {
        Self {
            provider,
            judge: Box::new(judge),
        }
    }
}

impl fmt::Debug for LeafVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeafVerifier").finish_non_exhaustive()
    }
}

impl ServerCertVerifier for LeafVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        (self.judge)(end_entity).map(|()| ServerCertVerified::assertion())
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
