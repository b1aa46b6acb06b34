//! The connection to the pool's Redis: one server (through a connection manager, which
//! connects again after a failure) or a Redis Cluster (whose client follows the slots as they
//! move, a replica's promotion included). Every step names the pool's key, so in a cluster it
//! goes to the node that holds the pool's slot; `FUNCTION LOAD` goes to every primary.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::url::RedisUrl;
use crate::lease_store::StoreFailure;

/// How long one command may take before the store counts as failed (answered `503`).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a (re)connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection to one server or to a cluster; clones share it.
#[derive(Clone)]
pub(super) enum Link {
    One(ConnectionManager),
    Cluster(ClusterConnection),
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
        if let Some(nodes) = url.cluster_nodes() {
            let mut builder = ClusterClientBuilder::new(nodes)
                .connection_timeout(CONNECT_TIMEOUT)
                .response_timeout(RESPONSE_TIMEOUT);
            if let Some(root) = ca_pem {
                builder = builder.certs(certificates(root));
            }
            let client = builder.build().map_err(|_| unparsed())?;
            return Ok(Self::Cluster(client.get_async_connection().await?));
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

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::One(connection) => connection.req_packed_command(cmd),
            Self::Cluster(connection) => connection.req_packed_command(cmd),
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
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::One(connection) => connection.get_db(),
            Self::Cluster(connection) => connection.get_db(),
        }
    }
}
