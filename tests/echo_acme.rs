//! A public certificate through ACME, end to end against a real ACME server:
//! Debian's `pebble`, started here with its own CA on free loopback ports, validates the
//! TLS-ALPN-01 challenge on the echo's serving port; a client trusting only pebble's root then
//! checks the served chain, and the ClientHello capture keeps working. Needs pebble, curl, the
//! test certificates and the `echo.exitvoice.test` hosts line (scripts/install-test-deps.sh).

mod echo_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use echo_support::{curl, http1_body, EchoServer};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The name the certificate is ordered for; `/etc/hosts` maps it to 127.0.0.1, which is where
/// pebble's validation connects.
const DOMAIN: &str = "echo.exitvoice.test";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("free port")
        .port()
}

fn test_certs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/certs")
}

/// A pebble ACME server; killed on drop.
struct Pebble {
    child: Child,
    /// The directory URL.
    directory: String,
    management: u16,
    _dir: tempfile::TempDir,
}

impl Pebble {
    /// Starts pebble validating TLS-ALPN-01 challenges on `tls_port`, issuing certificates
    /// valid for `validity_s` seconds (pebble's default, five years, when `None`). Its own HTTPS
    /// uses the test leaf certificate (trusted through `ca.pem`). The ports are picked free and
    /// could be taken before pebble binds them, so the start is retried.
    fn start(tls_port: u16, validity_s: Option<u64>) -> Self {
        let certs = test_certs();
        let mut failures = Vec::new();
        for _ in 0..3 {
            let dir = tempfile::tempdir().expect("tempdir");
            let (port, management) = (free_port(), free_port());
            let mut config = serde_json::json!({"pebble": {
                "listenAddress": format!("127.0.0.1:{port}"),
                "managementListenAddress": format!("127.0.0.1:{management}"),
                "certificate": certs.join("leaf-chain.pem"),
                "privateKey": certs.join("leaf.key"),
                "httpPort": free_port(),
                "tlsPort": tls_port,
                "ocspResponderURL": "",
                "externalAccountBindingRequired": false,
            }});
            if let Some(validity) = validity_s {
                config["pebble"]["certificateValidityPeriod"] = validity.into();
            }
            let path = dir.path().join("pebble.json");
            std::fs::write(&path, config.to_string()).expect("write pebble.json");
            let log = std::fs::File::create(dir.path().join("pebble.log")).expect("log");
            let mut child = Command::new("pebble")
                .arg("-config")
                .arg(&path)
                // No random validation delays, no random nonce rejections: a quick, steady run.
                .env("PEBBLE_VA_NOSLEEP", "1")
                .env("PEBBLE_WFE_NONCEREJECT", "0")
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("pebble is installed (scripts/install-test-deps.sh)");
            let directory = format!("https://127.0.0.1:{port}/dir");
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if curl(&["-skf", &directory]).status.success() {
                    return Self {
                        child,
                        directory,
                        management,
                        _dir: dir,
                    };
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
            failures
                .push(std::fs::read_to_string(dir.path().join("pebble.log")).unwrap_or_default());
        }
        panic!("pebble did not start: {failures:#?}");
    }

    /// Pebble's root certificate (new on every start), from its management interface.
    fn root(&self) -> CertificateDer<'static> {
        let out = curl(&[
            "-skf",
            &format!("https://127.0.0.1:{}/roots/0", self.management),
        ]);
        assert!(out.status.success(), "pebble root: {out:?}");
        CertificateDer::from_pem_slice(&out.stdout).expect("root PEM")
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// TLS to `port` as `DOMAIN`, trusting only `root`: the served chain must verify.
async fn connect_verified(
    port: u16,
    root: &CertificateDer<'static>,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).expect("pebble root");
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    let name = ServerName::try_from(DOMAIN).expect("name");
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
}

/// The echo on 127.0.0.1:0 and 127.0.0.1:`port` (pebble's `tlsPort`), its certificate from
/// `pebble`.
fn echo_with_acme(port: u16, pebble: &Pebble) -> EchoServer {
    let listen = format!("127.0.0.1:{port}");
    let ca = test_certs().join("ca.pem").display().to_string();
    EchoServer::start(&[
        "--listen",
        &listen,
        "--metrics-listen",
        "127.0.0.1:0",
        "--acme-domain",
        DOMAIN,
        "--acme-contact",
        "mailto:ops@exitvoice.test",
        "--acme-directory",
        &pebble.directory,
        "--acme-directory-ca",
        &ca,
    ])
}

/// The first connection whose chain verifies against `root` (ordering, validation and download
/// take a few seconds; at most 60).
async fn first_verified(
    port: u16,
    root: &CertificateDer<'static>,
    server: &EchoServer,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match connect_verified(port, root).await {
            Ok(tls) => return tls,
            Err(error) => {
                assert!(
                    Instant::now() < deadline,
                    "no certificate from pebble's CA within 60 s: {error}\n{}",
                    server.stderr()
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
}

/// The leaf certificate a verified connection was served.
fn leaf(tls: &tokio_rustls::client::TlsStream<TcpStream>) -> Vec<u8> {
    let (_, session) = tls.get_ref();
    let chain = session.peer_certificates().expect("a chain");
    chain.first().expect("a leaf").to_vec()
}

#[tokio::test]
async fn a_short_lived_certificate_is_renewed_and_served_without_a_restart() {
    // Certificates valid for 12 s: rustls-acme renews at two thirds of the validity.
    let port = free_port();
    let pebble = Pebble::start(port, Some(12));
    let server = echo_with_acme(port, &pebble);
    let root = pebble.root();
    let first = leaf(&first_verified(port, &root, &server).await);
    let pid = server.pid();
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        if let Ok(tls) = connect_verified(port, &root).await {
            if leaf(&tls) != first {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no renewed certificate within 40 s:\n{}",
            server.stderr()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        server.pid(),
        pid,
        "the same process serves the renewed certificate"
    );
    assert!(server.stderr().matches("DeployedNewCert").count() >= 2);
}

#[tokio::test]
async fn pebble_issues_the_certificate_through_tls_alpn_01_and_the_echo_serves_it() {
    let port = free_port();
    let pebble = Pebble::start(port, None);
    let mut server = echo_with_acme(port, &pebble);
    assert_eq!(server.pin, "none", "an ACME certificate has no fixed pin");
    let root = pebble.root();
    let mut tls = first_verified(port, &root, &server).await;
    let (_, session) = tls.get_ref();
    let chain = session.peer_certificates().expect("a chain");
    assert!(
        chain.len() >= 2,
        "leaf and pebble's intermediate: {}",
        chain.len()
    );

    // The capture works on a connection served with the ACME certificate.
    tls.write_all(
        b"GET /api/all?token=acme-probe HTTP/1.1\r\nHost: echo.exitvoice.test\r\nConnection: close\r\n\r\n",
    )
    .await
    .expect("request");
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    let echo = http1_body(&String::from_utf8_lossy(&response));
    assert_eq!(echo["token"], "acme-probe");
    assert!(
        echo["tls"]["ja4"]
            .as_str()
            .is_some_and(|ja4| ja4.starts_with("t13")),
        "{echo}"
    );

    // pebble's validation connections were counted, and none was stored as an observation.
    let metrics = server.metrics.expect("metrics address");
    let text = String::from_utf8(curl(&["-s", &format!("http://{metrics}/metrics")]).stdout)
        .expect("UTF-8");
    let challenges: f64 = text
        .lines()
        .find_map(|line| line.strip_prefix("exitvoice_acme_challenges_total "))
        .and_then(|value| value.parse().ok())
        .expect("the challenge counter");
    assert!(challenges >= 1.0, "{text}");
    let rows = server
        .rows_until(|rows| {
            rows.iter()
                .any(|r| r.token.as_deref() == Some("acme-probe"))
        })
        .await;
    assert!(rows
        .iter()
        .any(|r| r.token.as_deref() == Some("acme-probe")));
    assert!(
        rows.iter()
            .all(|r| !r.hello.windows(10).any(|w| w == b"acme-tls/1")),
        "no validation connection is stored"
    );

    // The certificate is cached beside the database and reused on the next start.
    let cache = server.dir.path().join("echo.db.acme");
    let cached = std::fs::read_dir(&cache)
        .expect("cache directory")
        .filter_map(Result::ok)
        .any(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("cached_cert_")
        });
    assert!(cached, "certificate cached in {}", cache.display());
    server.restart();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server.stderr().contains("DeployedCachedCert") {
        assert!(Instant::now() < deadline, "cached certificate not deployed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
