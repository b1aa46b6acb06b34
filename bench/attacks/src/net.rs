//! Connections to the target: TCP from a chosen 127.0.0.x source, and TLS that accepts the
//! server's self-signed certificate (the driver attacks; it does not authenticate).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use exitvoice_exits::leaf::LeafVerifier;
use rustls::pki_types::ServerName;
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::client::TlsStream;

/// The server under attack: a loopback address and the TLS settings to reach it.
#[derive(Clone, Debug)]
pub struct Target {
    /// The server's address (loopback only).
    pub addr: SocketAddr,
    h2: Arc<rustls::ClientConfig>,
    http1: Arc<rustls::ClientConfig>,
}

impl Target {
    /// A target at `addr`; refuses any address outside 127.0.0.0/8 and ::1.
    ///
    /// # Errors
    /// When `addr` is not loopback.
    pub fn new(addr: SocketAddr) -> anyhow::Result<Self> {
        anyhow::ensure!(addr.ip().is_loopback(), "{addr}: loopback targets only");
        Ok(Self {
            addr,
            h2: client_config(b"h2"),
            http1: client_config(b"http/1.1"),
        })
    }

    /// A TCP connection from `source` (port chosen by the kernel).
    ///
    /// # Errors
    /// When the socket cannot be bound or connected.
    pub async fn tcp(&self, source: IpAddr) -> std::io::Result<TcpStream> {
        let socket = match source {
            IpAddr::V4(_) => TcpSocket::new_v4()?,
            IpAddr::V6(_) => TcpSocket::new_v6()?,
        };
        socket.bind(SocketAddr::new(source, 0))?;
        let stream = socket.connect(self.addr).await?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    /// A TLS connection from `source` offering ALPN `h2` (or `http/1.1` when `h2` is false).
    ///
    /// # Errors
    /// When the connection or the handshake fails.
    pub async fn tls(&self, source: IpAddr, h2: bool) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = self.tcp(source).await?;
        let config = if h2 { &self.h2 } else { &self.http1 };
        let name = ServerName::try_from("localhost").map_err(std::io::Error::other)?;
        tokio_rustls::TlsConnector::from(Arc::clone(config))
            .connect(name, tcp)
            .await
    }

    /// The bytes of a real ClientHello as rustls sends it (ALPN `h2`, SNI `localhost`).
    ///
    /// # Errors
    /// When rustls cannot build one.
    pub fn client_hello(&self) -> anyhow::Result<Vec<u8>> {
        let name = ServerName::try_from("localhost")?;
        let mut client = rustls::ClientConnection::new(Arc::clone(&self.h2), name)?;
        let mut hello = Vec::new();
        client.write_tls(&mut hello)?;
        Ok(hello)
    }
}

/// The `n`-th source address of `sources` addresses: 127.0.0.1, 127.0.0.2, … (wrapping).
pub fn source(n: usize, sources: usize) -> IpAddr {
    let k = n % sources.clamp(1, 250);
    IpAddr::from([127, 0, 0, u8::try_from(k + 1).unwrap_or(1)])
}

fn client_config(alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|_| unreachable!("the provider supports the default versions"))
        .dangerous()
        // Any certificate (the bench's server has a fresh self-signed one); signatures still checked.
        .with_custom_certificate_verifier(Arc::new(LeafVerifier::new(provider, |_| Ok(()))))
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(config)
}
