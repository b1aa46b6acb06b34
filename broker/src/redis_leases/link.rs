//! The connection to the pool's Redis: one server (through a connection manager, which
//! connects again after a failure), a Redis Cluster (whose client follows the slots as they
//! move, a replica's promotion included), or the primary that Redis Sentinel names (asked
//! again when the primary stops answering or has become a replica). Every step names the
//! pool's key, so in a cluster it goes to the node that holds the pool's slot; `FUNCTION LOAD`
//! goes to every primary.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, Pipeline, RedisError, RedisFuture, RedisResult,
    TlsMode, Value,
};

use super::url::{RedisUrl, Topology};
use crate::lease_store::StoreFailure;

/// How long one command may take before the store counts as failed (answered `503`).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a (re)connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection to one server, a cluster or a sentinel's primary; clones share it.
#[derive(Clone)]
pub(super) enum Link {
    One(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(Arc<Sentinel>),
}

impl Link {
    /// Connects to `url` (for TLS, `ca_pem` replaces the system's roots when given).
    pub(super) async fn connect(
        url: &RedisUrl,
        ca_pem: Option<Vec<u8>>,
    ) -> Result<Self, StoreFailure> {
        let certificates = |root| redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(root),
        };
        let unparsed = || StoreFailure::message("the Redis URL does not parse".to_owned());
        match url.topology() {
            Topology::One => {}
            Topology::Cluster(nodes) => {
                let mut builder = ClusterClientBuilder::new(nodes)
                    .connection_timeout(CONNECT_TIMEOUT)
                    .response_timeout(RESPONSE_TIMEOUT);
                if let Some(root) = ca_pem {
                    builder = builder.certs(certificates(root));
                }
                let client = builder.build().map_err(|_| unparsed())?;
                return Ok(Self::Cluster(client.get_async_connection().await?));
            }
            Topology::Sentinel { sentinels, name } => {
                let addresses = sentinels
                    .iter()
                    .map(|sentinel| address(sentinel, url.tls()))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(unparsed)?;
                let mut builder =
                    SentinelClientBuilder::new(addresses, name, SentinelServerType::Master)?;
                if let Some((user, password)) = url.credentials() {
                    if !user.is_empty() {
                        builder = builder.set_client_to_redis_username(user);
                    }
                    if let Some(password) = password {
                        builder = builder.set_client_to_redis_password(password);
                    }
                }
                if url.tls() {
                    builder = builder
                        .set_client_to_redis_tls_mode(TlsMode::Secure)
                        .set_client_to_sentinel_tls_mode(TlsMode::Secure);
                    if let Some(root) = ca_pem {
                        builder = builder
                            .set_client_to_redis_certificates(certificates(root.clone()))
                            .set_client_to_sentinel_certificates(certificates(root));
                    }
                }
                let sentinel = Sentinel {
                    client: tokio::sync::Mutex::new(builder.build()?),
                    primary: Mutex::default(),
                };
                sentinel.connection().await?;
                return Ok(Self::Sentinel(Arc::new(sentinel)));
            }
        }
        let client = match ca_pem {
            Some(root) => redis::Client::build_with_tls(url.expose(), certificates(root)),
            None => redis::Client::open(url.expose()),
        }
        .map_err(|_| unparsed())?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(1);
        Ok(Self::One(
            ConnectionManager::new_with_config(client, config).await?,
        ))
    }
}

/// A sentinel's address from its URL (`redis://host:port/`).
fn address(url: &str, tls: bool) -> Option<ConnectionAddr> {
    let parsed = url::Url::parse(url).ok()?;
    let host = parsed.host_str()?.to_owned();
    let port = parsed.port().unwrap_or(26379);
    Some(if tls {
        ConnectionAddr::TcpTls {
            host,
            port,
            insecure: false,
            tls_params: None,
        }
    } else {
        ConnectionAddr::Tcp(host, port)
    })
}

/// The primary a sentinel names, and the connection to it while it answers as one.
pub(super) struct Sentinel {
    client: tokio::sync::Mutex<SentinelClient>,
    primary: Mutex<Option<MultiplexedConnection>>,
}

impl Sentinel {
    /// The connection to the primary: the one held, or one to the primary the sentinels name
    /// now (their client checks that it answers `ROLE` as a primary).
    async fn connection(&self) -> RedisResult<MultiplexedConnection> {
        if let Some(held) = self.held() {
            return Ok(held);
        }
        let mut client = self.client.lock().await;
        // Another call may have found it while this one waited.
        if let Some(held) = self.held() {
            return Ok(held);
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        let connection = client
            .async_get_client()
            .await?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        *self.primary.lock().unwrap_or_else(PoisonError::into_inner) = Some(connection.clone());
        Ok(connection)
    }

    fn held(&self) -> Option<MultiplexedConnection> {
        self.primary
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Runs `send` on the primary; when it has gone or become a replica, once more on the one
    /// the sentinels name then.
    async fn run<T, F>(&self, send: impl Fn(MultiplexedConnection) -> F) -> RedisResult<T>
    where
        F: std::future::Future<Output = RedisResult<T>>,
    {
        match send(self.connection().await?).await {
            Err(error) if moved(&error) => {
                self.primary
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                send(self.connection().await?).await
            }
            answer => answer,
        }
    }
}

/// Whether the primary has gone (the connection failed) or is one no more (`READONLY`: a
/// replica now).
fn moved(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
        || error.code() == Some("READONLY")
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::One(connection) => connection.req_packed_command(cmd),
            Self::Cluster(connection) => connection.req_packed_command(cmd),
            Self::Sentinel(sentinel) => Box::pin(sentinel.run(move |mut connection| async move {
                connection.req_packed_command(cmd).await
            })),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::One(connection) => connection.req_packed_commands(pipeline, offset, count),
            Self::Cluster(connection) => connection.req_packed_commands(pipeline, offset, count),
            Self::Sentinel(sentinel) => Box::pin(sentinel.run(move |mut connection| async move {
                connection
                    .req_packed_commands(pipeline, offset, count)
                    .await
            })),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::One(connection) => connection.get_db(),
            Self::Cluster(connection) => connection.get_db(),
            Self::Sentinel(_) => 0,
        }
    }
}
