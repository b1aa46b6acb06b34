//! The echo server as a whole: certificate, rustls configuration, store, writer, API router and
//! listeners, and the orderly shutdown (stop accepting, let connections finish, drain the queue).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use exitvoice_protocol::tcp::P0fDb;
use exitvoice_store::{Store, StoreError};
use time::OffsetDateTime;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::acme;
use crate::api::{self, ApiShared};
use crate::capture::admission::Admission;
use crate::capture::limiter::Limiter;
use crate::capture::listener::accept_loop;
use crate::capture::quic::{self, QuicListener};
use crate::capture::Shared;
use crate::cert::{self, CertError, CertSource};
use crate::config::Config;
use crate::exposition;
use crate::geo;
use crate::ledger::Ledger;
use crate::metrics::Metrics;
use crate::writer::{self, WriterHandle};

/// How often shutdown checks whether every connection has ended.
const DRAIN_POLL: Duration = Duration::from_millis(20);

/// Errors that stop the server from starting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The certificate could not be loaded or generated.
    #[error(transparent)]
    Cert(#[from] CertError),
    /// rustls refused the certificate, key or settings.
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// The database could not be opened or migrated.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// ACME could not be set up.
    #[error(transparent)]
    Acme(#[from] acme::AcmeError),
    /// `--record-dir` could not be created.
    #[error("cannot create the record directory: {0}")]
    RecordDir(std::io::Error),
    /// A `--geoip` database could not be read.
    #[error(transparent)]
    Geo(#[from] exitvoice_geo::GeoError),
    /// The `--p0f-db` file could not be read.
    #[error("cannot read the p0f database {path}: {reason}")]
    P0fDb {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// A bound, ready-to-run echo server.
pub struct Server {
    shared: Arc<Shared>,
    /// Orders and renews ACME certificates, with `--acme-domain`.
    acme_driver: Option<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// The Prometheus exposition's listener and registry (`--metrics-listen`).
    metrics: Option<(
        exitvoice_exposition::Listener,
        prometheus_client::registry::Registry,
    )>,
    metrics_addr: Option<SocketAddr>,
    writer: WriterHandle,
    listeners: Vec<TcpListener>,
    local_addrs: Vec<SocketAddr>,
    /// The UDP listeners, one per TCP one (same address and port); none with `--no-quic`.
    quic: Vec<QuicListener>,
    shutdown_tx: watch::Sender<bool>,
    writer_task: JoinHandle<()>,
    store: Store,
    pin: String,
    cert_source: CertSource,
    shutdown_grace: Duration,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("local_addrs", &self.local_addrs)
            .field("pin", &self.pin)
            .field("cert_source", &self.cert_source)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Loads or generates the certificate, opens the store, starts the writer and binds every
    /// listen address.
    ///
    /// # Errors
    /// [`ServerError`] when any of those fails.
    pub async fn bind(config: Config) -> Result<Self, ServerError> {
        let (tls, quic_tls, pin, cert_source, acme_driver) = match &config.acme {
            Some(settings) => {
                let acme = acme::start(settings)?;
                let resolver = Arc::clone(&acme.resolver);
                let quic_tls = quic_tls_config(|builder| Ok(builder.with_cert_resolver(resolver)))?;
                let mut tls = tls_config(|builder| Ok(builder.with_cert_resolver(acme.resolver)))?;
                tls.alpn_protocols.push(acme::ACME_TLS_ALPN.to_vec());
                let source = CertSource::Acme(settings.domains.clone());
                (tls, quic_tls, "none".to_owned(), source, Some(acme.driver))
            }
            None => {
                let identity = cert::load_or_generate(
                    config.cert.as_deref(),
                    config.key.as_deref(),
                    &config.database.state_base(),
                )?;
                let (pin, source) = (identity.pin.clone(), identity.source.clone());
                let (chain, key) = (identity.chain.clone(), identity.key.clone_key());
                let quic_tls = quic_tls_config(|builder| builder.with_single_cert(chain, key))?;
                let tls =
                    tls_config(|builder| builder.with_single_cert(identity.chain, identity.key))?;
                (tls, quic_tls, pin, source, None)
            }
        };
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        let metrics = Arc::new(Metrics::default());
        let geo = geo::open(&config.geoip, &metrics)?;
        let p0f_db = match &config.p0f_db {
            Some(path) => {
                let failed = |reason: String| ServerError::P0fDb {
                    path: path.clone(),
                    reason,
                };
                let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
                let db = P0fDb::parse(&text).map_err(|e| failed(e.to_string()))?;
                Some(Arc::new(db))
            }
            None => None,
        };
        if let Some(dir) = &config.record_dir {
            std::fs::create_dir_all(dir).map_err(ServerError::RecordDir)?;
        }
        let store = Store::connect(&config.database).await?;
        let ledger = Arc::new(open_ledger(&store, config.store_peer_ip, config.ledger_rule).await);
        let (writer, writer_task) = writer::spawn(
            store.clone(),
            config.writer,
            config.record_dir.clone(),
            Arc::clone(&metrics),
            Arc::clone(&ledger),
        );
        let mut listeners = Vec::with_capacity(config.listen.len());
        let mut local_addrs = Vec::with_capacity(config.listen.len());
        for addr in &config.listen {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| ServerError::Bind {
                    addr: *addr,
                    source,
                })?;
            let local = listener.local_addr().map_err(|source| ServerError::Bind {
                addr: *addr,
                source,
            })?;
            local_addrs.push(local);
            listeners.push(listener);
        }
        let (metrics_listener, metrics_addr) = match config.metrics_listen {
            Some(addr) => {
                let listener = exitvoice_exposition::Listener::bind(addr)
                    .await
                    .map_err(|source| ServerError::Bind { addr, source })?;
                let local = listener.local_addr();
                let registry = exposition::registry(Arc::clone(&metrics), writer.clone());
                (Some((listener, registry)), Some(local))
            }
            None => (None, None),
        };
        let admission = Arc::new(Admission::new(config.limits.admission));
        let api_state = Arc::new(ApiShared {
            metrics: Arc::clone(&metrics),
            store: store.clone(),
            writer: writer.clone(),
            api_token: config.api_token.clone(),
            admission: Arc::clone(&admission),
            body_cap: config.limits.body_cap,
            started: OffsetDateTime::now_utc(),
            ledger,
            alt_svc: config.quic,
            geo,
        });
        let responder = Arc::new(api::Api::new(api_state.clone()));
        let mut udp_sockets = Vec::new();
        let mut alt_svc_value = None;
        if config.quic {
            for local in &local_addrs {
                let bind_error = |source| ServerError::Bind {
                    addr: *local,
                    source,
                };
                udp_sockets.push(std::net::UdpSocket::bind(local).map_err(bind_error)?);
            }
            alt_svc_value = local_addrs.first().map(|first| alt_svc(first.port()));
        }
        let (shutdown_tx, shutdown) = watch::channel(false);
        let boot_ms = OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
        let shared = Arc::new(Shared {
            acceptor,
            responder,
            alt_svc: alt_svc_value,
            limiter: Arc::new(Limiter::new(
                config.limits.max_connections,
                config.limits.per_ip_connections,
            )),
            admission,
            limits: config.limits,
            metrics,
            sink: Box::new(writer.clone()),
            shutdown,
            boot_id: boot_ms.to_string(),
            store_peer_ip: config.store_peer_ip,
            proxy_from: config.proxy_protocol_from,
            p0f_db,
            next_connection: AtomicU64::new(0),
        });
        let mut quic = Vec::with_capacity(udp_sockets.len());
        for socket in udp_sockets {
            let addr = socket.local_addr().map_err(|source| ServerError::Bind {
                addr: config.listen[0],
                source,
            })?;
            let ids = Arc::clone(&shared);
            let listener = quic::bind(
                socket,
                quic_tls.clone(),
                Arc::clone(&shared.metrics),
                api::h3_answer(api_state.clone(), config.store_peer_ip),
                Arc::new(move || ids.connection_id()),
                Arc::clone(&api_state.ledger),
            )
            .map_err(|source| ServerError::Bind { addr, source })?;
            quic.push(listener);
        }
        Ok(Self {
            shared,
            acme_driver,
            metrics: metrics_listener,
            metrics_addr,
            writer,
            listeners,
            local_addrs,
            quic,
            shutdown_tx,
            writer_task,
            store,
            pin,
            cert_source,
            shutdown_grace: config.shutdown_grace,
        })
    }

    /// The addresses actually bound (port 0 resolved).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// The UDP addresses QUIC and HTTP/3 are served on (none with `--no-quic`).
    pub fn quic_addrs(&self) -> Vec<SocketAddr> {
        self.quic
            .iter()
            .filter_map(QuicListener::local_addr)
            .collect()
    }

    /// Where the Prometheus exposition is served (port 0 resolved), with `--metrics-listen`.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The certificate pin, `sha256//<base64>`.
    pub fn pin(&self) -> &str {
        &self.pin
    }

    /// Where the certificate came from.
    pub fn cert_source(&self) -> &CertSource {
        &self.cert_source
    }

    /// Serves until `shutdown` resolves, then stops accepting, gives open connections the
    /// shutdown grace to finish, drains the observation queue into the store and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let loops: Vec<_> = self
            .listeners
            .into_iter()
            .map(|listener| tokio::spawn(accept_loop(Arc::clone(&self.shared), listener)))
            .collect();
        let quic: Vec<_> = self
            .quic
            .into_iter()
            .map(|listener| tokio::spawn(listener.run(self.shutdown_tx.subscribe())))
            .collect();
        let acme = self.acme_driver.map(tokio::spawn);
        let exposition = self.metrics.map(|(listener, registry)| {
            let mut stopping = self.shutdown_tx.subscribe();
            tokio::spawn(async move {
                let stopped = async move {
                    let _ = stopping.wait_for(|stopping| *stopping).await;
                };
                if let Err(error) = listener.serve(registry, stopped).await {
                    tracing::warn!(%error, "metrics listener failed");
                }
            })
        });
        shutdown.await;
        tracing::info!("shutting down: no new connections");
        let _ = self.shutdown_tx.send(true);
        for accept in loops {
            let _ = accept.await;
        }
        for listener in quic {
            let _ = listener.await;
        }
        if let Some(exposition) = exposition {
            let _ = exposition.await;
        }
        if let Some(acme) = acme {
            acme.abort();
        }
        let grace = tokio::time::Instant::now() + self.shutdown_grace;
        while self.shared.metrics.open() > 0 && tokio::time::Instant::now() < grace {
            tokio::time::sleep(DRAIN_POLL).await;
        }
        let open = self.shared.metrics.open();
        if open > 0 {
            tracing::warn!(open, "connections still open after the shutdown grace");
        }
        self.writer.close();
        let _ = self.writer_task.await;
        self.store.pool().close().await;
        tracing::info!("observations flushed; stopped");
    }
}

/// A rustls configuration waiting for its certificate.
type WantsCert = rustls::ConfigBuilder<rustls::ServerConfig, rustls::server::WantsServerCert>;

/// rustls as a real origin would run it over TCP: TLS 1.2 and 1.3, ALPN `h2` then `http/1.1`.
fn tls_config(
    certificate: impl FnOnce(WantsCert) -> Result<rustls::ServerConfig, rustls::Error>,
) -> Result<rustls::ServerConfig, rustls::Error> {
    rustls_config(rustls::DEFAULT_VERSIONS, &[b"h2", b"http/1.1"], certificate)
}

/// rustls for QUIC: TLS 1.3 only (RFC 9001 section 4.2), ALPN `h3` (RFC 9114 section 3.1).
fn quic_tls_config(
    certificate: impl FnOnce(WantsCert) -> Result<rustls::ServerConfig, rustls::Error>,
) -> Result<rustls::ServerConfig, rustls::Error> {
    rustls_config(&[&rustls::version::TLS13], &[b"h3"], certificate)
}

/// What TCP and QUIC share: the provider, the certificate as `certificate` sets it, session
/// tickets (TLS 1.3 tickets and TLS 1.2 stateless tickets), and `SSLKEYLOGFILE` honoured.
fn rustls_config(
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: &[&[u8]],
    certificate: impl FnOnce(WantsCert) -> Result<rustls::ServerConfig, rustls::Error>,
) -> Result<rustls::ServerConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)?
        .with_no_client_auth();
    let mut config = certificate(builder)?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config.key_log = Arc::new(rustls::KeyLogFile::new());
    config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()?;
    Ok(config)
}

/// `h3=":<port>"; ma=86400`, the `alt-svc` of every TCP response (RFC 7838 section 3; RFC 9114
/// section 3.1.1): the origin is also served over HTTP/3 on that UDP port, for a day.
fn alt_svc(port: u16) -> axum::http::HeaderValue {
    axum::http::HeaderValue::from_str(&format!("h3=\":{port}\"; ma=86400"))
        .unwrap_or_else(|_| axum::http::HeaderValue::from_static("clear"))
}

/// The h3 downgrade ledger: persisted, and its identities of the last `ma` read back, when the
/// store keeps full addresses (an identity is an address); in memory only otherwise. A stored
/// entry that does not read back is skipped (with a warning), never fatal.
async fn open_ledger(
    store: &Store,
    policy: exitvoice_schema::PeerPolicy,
    rule: crate::ledger::NeverRule,
) -> Ledger {
    use crate::ledger::{Entry, ALT_SVC_MAX_AGE_MS, MAX_IDENTITIES};
    if policy != exitvoice_schema::PeerPolicy::Full {
        return Ledger::new(rule, false);
    }
    let ledger = Ledger::new(rule, true);
    let since = crate::clock::now_ms() - ALT_SVC_MAX_AGE_MS;
    let limit = u32::try_from(MAX_IDENTITIES).unwrap_or(u32::MAX);
    match store.ledger_since(since, limit).await {
        Ok(rows) => {
            let count = rows.len();
            let entries: Vec<Entry> = rows
                .iter()
                .filter_map(|row| serde_json::from_str(&row.entry).ok())
                .collect();
            if entries.len() < count {
                tracing::warn!(skipped = count - entries.len(), "unreadable ledger rows");
            }
            ledger.restore(entries);
        }
        Err(error) => tracing::warn!(%error, "the stored ledger could not be read"),
    }
    ledger
}
