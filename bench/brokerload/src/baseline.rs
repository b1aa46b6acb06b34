//! `brokerload baseline`: the published Redis broker (`get_free_proxy`, `release_proxy`) as the
//! Redis commands it sends, driven like the broker's store: the side-by-side figure.
//!
//! Acquire: `SMEMBERS proxy:pool`, shuffled; for up to 20 candidates, `EXISTS proxy:banned:<p>`
//! then `SET proxy:lock:<p> <server> NX EX 30`, the first that sets is the proxy; none is a
//! failed acquire. Release: `DEL proxy:lock:<p>`. Keys are prefixed per run.

use std::time::Instant;

use rand::seq::SliceRandom as _;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::AsyncCommands as _;

use crate::drive::{Cycler, Step};

/// Candidates one acquire tries, as the published code does.
const MAX_ATTEMPTS: usize = 20;
/// The lock's time to live, s, as published.
const LOCK_TTL: u64 = 30;

/// One client (one "server" of the published text) on a shared connection.
pub struct BaselineClient {
    connection: ConnectionManager,
    prefix: String,
    server: String,
}

impl BaselineClient {
    fn key(&self, kind: &str, proxy: &str) -> String {
        format!("{}proxy:{kind}:{proxy}", self.prefix)
    }
}

impl Cycler for BaselineClient {
    async fn cycle(&mut self) -> anyhow::Result<Step> {
        let asked = Instant::now();
        let mut candidates: Vec<String> = self
            .connection
            .smembers(format!("{}proxy:pool", self.prefix))
            .await?;
        candidates.shuffle(&mut rand::rng());
        let mut taken = None;
        for proxy in candidates.iter().take(MAX_ATTEMPTS) {
            let banned: bool = self.connection.exists(self.key("banned", proxy)).await?;
            if banned {
                continue;
            }
            let set: Option<String> = redis::cmd("SET")
                .arg(self.key("lock", proxy))
                .arg(&self.server)
                .arg("NX")
                .arg("EX")
                .arg(LOCK_TTL)
                .query_async(&mut self.connection)
                .await?;
            if set.is_some() {
                taken = Some(proxy);
                break;
            }
        }
        let acquire = asked.elapsed();
        let Some(proxy) = taken else {
            return Ok(Step {
                acquire,
                done: false,
                failed: true,
            });
        };
        let _: u64 = self.connection.del(self.key("lock", proxy)).await?;
        Ok(Step {
            acquire,
            done: true,
            failed: false,
        })
    }
}

/// Loads a pool of `units` proxies (`SADD`), locks `held` of them for an hour, and returns
/// `clients` clients sharing one connection, as a server's workers would.
///
/// # Errors
/// Redis failing.
pub async fn prepare(
    url: &str,
    units: usize,
    held: usize,
    clients: usize,
) -> anyhow::Result<Vec<BaselineClient>> {
    // No response timeout: at 100,000 proxies each acquire's SMEMBERS answer is a megabyte,
    // and 64 of them queue on the connection; the figure is how long that takes.
    let config = ConnectionManagerConfig::new().set_response_timeout(None);
    let client = redis::Client::open(url)?;
    let mut connection = ConnectionManager::new_with_config(client, config).await?;
    let prefix = format!("baseline-{:08x}:", rand::random::<u32>());
    let proxies: Vec<String> = (0..units).map(|n| format!("e-{n}")).collect();
    for chunk in proxies.chunks(1000) {
        let _: u64 = connection
            .sadd(format!("{prefix}proxy:pool"), chunk)
            .await?;
    }
    for proxy in proxies.iter().take(held) {
        let _: () = connection
            .set_ex(format!("{prefix}proxy:lock:{proxy}"), "held", 3600)
            .await?;
    }
    Ok((0..clients)
        .map(|c| BaselineClient {
            connection: connection.clone(),
            prefix: prefix.clone(),
            server: format!("server-{c}"),
        })
        .collect())
}
