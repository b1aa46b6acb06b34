//! The server's certificate: loaded from PEM files, or generated self-signed on first start and
//! kept beside the database so its pin stays the same across restarts.
//!
//! The pin is the SHA-256 of the certificate's SubjectPublicKeyInfo, base64 — the form of HPKP
//! (RFC 7469 section 2.4) and curl's `--pinnedpubkey sha256//…`. Auditors pin it to tell an
//! intercepting exit from an honest one.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};

/// Names the generated certificate is issued for (loopback use out of the box).
const GENERATED_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Errors from loading or generating the certificate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertError {
    /// Only one of `--cert` and `--key` was given.
    #[error("--cert and --key must be given together")]
    Incomplete,
    /// A PEM file could not be read or holds no usable item.
    #[error("cannot read PEM from {path}: {source}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("no certificate in {0}")]
    NoCertificate(PathBuf),
    /// The leaf certificate is not valid X.509.
    #[error("the leaf certificate is not valid X.509")]
    X509,
    /// Generating the self-signed certificate failed.
    #[error("cannot generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// Writing the generated certificate failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
}

/// Where the certificate came from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CertSource {
    /// Loaded from the given PEM files.
    Files,
    /// Generated now and written to this certificate file.
    Generated(PathBuf),
    /// Generated on an earlier start and reused from this certificate file.
    Reused(PathBuf),
    /// Obtained (and renewed) from an ACME CA for these names; there is no fixed pin, since a
    /// renewal brings a new key.
    Acme(Vec<String>),
}

/// The certificate chain and key the server presents, with its pin.
#[derive(Debug)]
pub struct Identity {
    /// Certificate chain, leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The leaf's private key.
    pub key: PrivateKeyDer<'static>,
    /// `sha256//<base64 SPKI hash>`, ready for curl's `--pinnedpubkey`.
    pub pin: String,
    /// Where it came from.
    pub source: CertSource,
}

/// Loads `cert` + `key`, or (with neither) reuses or generates a self-signed pair beside `db`.
///
/// # Errors
/// Fails when only one file is given, a file is unreadable or holds no certificate/key, or the
/// generated pair cannot be written.
pub fn load_or_generate(
    cert: Option<&Path>,
    key: Option<&Path>,
    db: &Path,
) -> Result<Identity, CertError> {
    match (cert, key) {
        (Some(cert), Some(key)) => load(cert, key, CertSource::Files),
        (None, None) => {
            let (cert, key) = generated_paths(db);
            if cert.exists() && key.exists() {
                load(&cert, &key, CertSource::Reused(cert.clone()))
            } else {
                generate(&cert, &key)?;
                load(&cert, &key, CertSource::Generated(cert.clone()))
            }
        }
        _ => Err(CertError::Incomplete),
    }
}

/// `<db>.cert.pem` and `<db>.key.pem`: beside the database, one pair per database.
fn generated_paths(db: &Path) -> (PathBuf, PathBuf) {
    let mut cert = db.as_os_str().to_owned();
    let mut key = cert.clone();
    cert.push(".cert.pem");
    key.push(".key.pem");
    (PathBuf::from(cert), PathBuf::from(key))
}

fn load(cert: &Path, key: &Path, source: CertSource) -> Result<Identity, CertError> {
    let pem_error = |path: &Path| {
        let path = path.to_owned();
        move |source| CertError::Pem { path, source }
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(pem_error(cert))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_error(cert))?;
    let leaf = chain
        .first()
        .ok_or_else(|| CertError::NoCertificate(cert.to_owned()))?;
    let pin = spki_pin(leaf)?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(pem_error(key))?;
    Ok(Identity {
        chain,
        key,
        pin,
        source,
    })
}

fn generate(cert: &Path, key: &Path) -> Result<(), CertError> {
    let names: Vec<String> = GENERATED_NAMES
        .iter()
        .map(|name| (*name).to_owned())
        .collect();
    let pair = rcgen::generate_simple_self_signed(names)?;
    write_file(key, pair.signing_key.serialize_pem().as_bytes(), true)?;
    write_file(cert, pair.cert.pem().as_bytes(), false)
}

fn write_file(path: &Path, contents: &[u8], secret: bool) -> Result<(), CertError> {
    let write_error = |source| CertError::Write {
        path: path.to_owned(),
        source,
    };
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    let mut file = options.open(path).map_err(write_error)?;
    io::Write::write_all(&mut file, contents).map_err(write_error)
}

/// `sha256//` + base64(SHA-256(SubjectPublicKeyInfo DER)) of `cert` (RFC 7469 section 2.4).
///
/// # Errors
/// Fails when `cert` is not valid X.509.
pub fn spki_pin(cert: &CertificateDer<'_>) -> Result<String, CertError> {
    let (_, parsed) =
        x509_parser::parse_x509_certificate(cert.as_ref()).map_err(|_| CertError::X509)?;
    let digest = Sha256::digest(parsed.tbs_certificate.subject_pki.raw);
    Ok(format!(
        "sha256//{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificate_is_reused_with_the_same_pin() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("e.db");
        let first = load_or_generate(None, None, &db).expect("generate");
        assert!(matches!(first.source, CertSource::Generated(_)));
        assert!(first.pin.starts_with("sha256//"));
        // base64 of 32 bytes is 44 characters.
        assert_eq!(first.pin.len(), "sha256//".len() + 44);
        let second = load_or_generate(None, None, &db).expect("reuse");
        assert!(matches!(second.source, CertSource::Reused(_)));
        assert_eq!(first.pin, second.pin);
        assert!(matches!(
            load_or_generate(Some(&db), None, &db),
            Err(CertError::Incomplete)
        ));
    }
}
