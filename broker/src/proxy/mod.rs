//! The broker as a forward proxy (`--proxy-listen`): one address any client points at, that
//! leases an exit per task, relays bytes without touching them, and closes every tunnel of a
//! lease when the lease ends.
//!
//! One port takes HTTP `CONNECT`, absolute-form `GET http://…`, SOCKS5, and either HTTP one
//! over TLS to the proxy, told apart by the connection's first byte (`0x05`: SOCKS5; `0x16`: a
//! TLS handshake; anything else: HTTP). The proxy user name is the lease request
//! ([`username`]), the password the broker's token. Past the handshake the client's bytes go to
//! the exit as they came: the broker terminates no TLS and reads nothing more.
//!
//! The layers, each file importing only those above it in this list:
//! - [`username`]: the user name's grammar;
//! - [`http_head`]: the HTTP proxy request's head;
//! - [`client`]: the client's stream while the handshake is read;
//! - [`socks5`]: the SOCKS5 server handshake;
//! - [`deadline`]: the moment a lease's tunnels stop writing to the exit, by this clock;
//! - [`relay`]: the bytes both ways, until a side closes, idles or the lease ends;
//! - [`holdings`]: the leases the tunnels ride, checked and renewed, ended with them;
//! - `connection`: one client connection, from the first byte to the last.

pub mod client;
mod connection;
pub mod deadline;
pub mod holdings;
pub mod http_head;
pub mod relay;
pub mod socks5;
pub mod username;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use exitvoice_exits::dial::Timeouts;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::auth::BrokerToken;
use crate::lease_store::LeaseStore;
use crate::service::Broker;
use holdings::Holdings;
use username::Asked;

/// The proxy's settings (`exitvoice broker --help`, the `--proxy-…` options).
#[derive(Clone, Debug)]
pub struct ProxySettings {
    /// How long a task's lease stays after its last tunnel closes (its time to live).
    pub task_idle: Duration,
    /// A tunnel that moves no byte for this long is closed.
    pub tunnel_idle: Duration,
    /// How long a request waits for a free exit when its user name names no `wait`.
    pub wait: Duration,
    /// The time to live of a tunnel's own lease (no task), renewed while the tunnel is open:
    /// the longest a killed instance's lease outlives its tunnels.
    pub tunnel_ttl: Duration,
    /// The longest a client may take to send its request (and finish TLS to the proxy).
    pub handshake: Duration,
    /// The dial through the exit.
    pub timeouts: Timeouts,
}

impl Default for ProxySettings {
    fn default() -> Self {
        Self {
            task_idle: Duration::from_secs(5),
            tunnel_idle: Duration::from_secs(30),
            wait: Duration::from_secs(5),
            tunnel_ttl: Duration::from_secs(10),
            handshake: Duration::from_secs(10),
            timeouts: Timeouts {
                connect: Duration::from_secs(5),
                tunnel: Duration::from_secs(10),
                ..Timeouts::default()
            },
        }
    }
}

/// The forward proxy of one broker instance.
pub struct Proxy<S> {
    holdings: Arc<Holdings<S>>,
    token: Option<BrokerToken>,
    tls: Option<TlsAcceptor>,
    settings: ProxySettings,
}

impl<S: LeaseStore> Proxy<S> {
    /// A proxy leasing from `broker`: credentials checked against `token` (any password
    /// when there is none), TLS to the proxy with `tls`. Starts the task that keeps its
    /// leases (renewed, checked, ended with their tunnels).
    pub fn start(
        broker: Arc<Broker<S>>,
        token: Option<BrokerToken>,
        tls: Option<Arc<rustls::ServerConfig>>,
        settings: ProxySettings,
    ) -> Arc<Self> {
        let holdings = Arc::new(Holdings::new(
            broker,
            settings.task_idle,
            settings.tunnel_ttl,
        ));
        tokio::spawn(holdings.clone().keep());
        Arc::new(Self {
            holdings,
            token,
            tls: tls.map(TlsAcceptor::from),
            settings,
        })
    }

    /// The leases its tunnels ride.
    pub fn holdings(&self) -> &Arc<Holdings<S>> {
        &self.holdings
    }

    /// Serves `listener` for ever. With `fixed`, a client that sends no credentials asks for
    /// that lease (a browser that cannot answer a `407`).
    pub async fn serve(self: Arc<Self>, listener: TcpListener, fixed: Option<Asked>) {
        let fixed = fixed.map(Arc::new);
        loop {
            let Ok((tcp, peer)) = listener.accept().await else {
                // Out of descriptors: let some close rather than spin.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            tcp.set_nodelay(true).ok();
            tokio::spawn(connection::serve(self.clone(), tcp, peer, fixed.clone()));
        }
    }

    /// The lease a client asks for: its user name read by the grammar, its password the
    /// token; without credentials, the listener's fixed lease if it has one. Why not, in
    /// words for the client (never the password).
    fn judge(
        &self,
        credentials: Option<&(String, String)>,
        fixed: Option<&Asked>,
    ) -> Result<Asked, String> {
        let Some((user, password)) = credentials else {
            return fixed.cloned().ok_or_else(|| {
                "proxy credentials required: the user name is the lease request \
                 (e.g. class-identity-task-t1), the password the broker's token"
                    .to_owned()
            });
        };
        if self
            .token
            .as_ref()
            .is_some_and(|token| !token.matches(password))
        {
            return Err("the password is not the broker's token".to_owned());
        }
        Asked::parse(user).map_err(|error| error.to_string())
    }
}

/// A listener address and, after `=`, the lease asked for by clients that send no
/// credentials: `127.0.0.1:8492=class-identity-task-browser`.
///
/// # Errors
/// An address that does not parse, a user name the grammar refuses, or a fixed lease on an
/// address off loopback (it asks for no password).
pub fn parse_listen(text: &str) -> Result<(SocketAddr, Option<Asked>), String> {
    let (address, fixed) = match text.split_once('=') {
        Some((address, user)) => (address, Some(user)),
        None => (text, None),
    };
    let address: SocketAddr = address
        .parse()
        .map_err(|_| format!("{address:?} is not an address:port"))?;
    let fixed = fixed
        .map(|user| Asked::parse(user).map_err(|error| error.to_string()))
        .transpose()?;
    if fixed.is_some() && !address.ip().is_loopback() {
        return Err(format!(
            "{address}: a listener with a fixed lease asks for no password, so it must be on \
             loopback"
        ));
    }
    Ok((address, fixed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_with_and_without_a_fixed_lease() {
        let (address, fixed) = parse_listen("127.0.0.1:8491").unwrap();
        assert_eq!((address.port(), fixed), (8491, None));
        let (_, fixed) = parse_listen("[::1]:8492=class-identity-task-browser").unwrap();
        assert_eq!(fixed.unwrap().task.as_deref(), Some("browser"));
        let off = parse_listen("0.0.0.0:8492=class-identity").unwrap_err();
        assert!(off.contains("must be on loopback"), "{off}");
        assert!(parse_listen("127.0.0.1:8492=class-idem")
            .unwrap_err()
            .contains("class"));
        assert!(parse_listen("localhost:1")
            .unwrap_err()
            .contains("address:port"));
    }
}
