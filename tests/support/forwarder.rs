//! A TCP forwarder on loopback whose target can be switched: what a managed store's endpoint
//! (a DNS name, a proxy) does when a replica is promoted. Switching drops every connection
//! through it, as the old primary's death does, so clients connect again, to the new target.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A running forwarder.
pub struct Forwarder {
    /// The loopback port clients connect to.
    pub port: u16,
    target: Arc<AtomicU16>,
    relays: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Forwarder {
    /// Forwards a free loopback port to loopback port `target`, on `runtime`.
    pub fn start(runtime: &tokio::runtime::Runtime, target: u16) -> Self {
        let listener = runtime
            .block_on(TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .expect("bind the forwarder");
        let port = listener.local_addr().expect("its address").port();
        let target = Arc::new(AtomicU16::new(target));
        let relays: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = runtime.spawn({
            let (target, relays) = (Arc::clone(&target), Arc::clone(&relays));
            async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    let to = SocketAddr::from((Ipv4Addr::LOCALHOST, target.load(Ordering::SeqCst)));
                    let relay = tokio::spawn(async move {
                        if let Ok(mut server) = TcpStream::connect(to).await {
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                        }
                    });
                    let mut relays = relays.lock().unwrap_or_else(PoisonError::into_inner);
                    relays.retain(|relay| !relay.is_finished());
                    relays.push(relay);
                }
            }
        });
        Self {
            port,
            target,
            relays,
            accept,
        }
    }

    /// Sends new connections to loopback port `target` and drops the open ones.
    pub fn switch(&self, target: u16) {
        self.target.store(target, Ordering::SeqCst);
        let relays =
            std::mem::take(&mut *self.relays.lock().unwrap_or_else(PoisonError::into_inner));
        for relay in relays {
            relay.abort();
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.accept.abort();
        self.switch(0);
    }
}
