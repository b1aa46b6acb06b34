//! The accept loop: our own, not `axum::serve`, because each connection's handlers need that
//! connection's capture. Every accepted connection passes the gate (`gate.rs`) and runs in its
//! own task; a bad peer ends only its own connection. A connection relayed by a trusted load
//! balancer passes the gate by its client's address, once its PROXY header is read
//! (`connection.rs`).
//!
//! The listener asks the kernel to keep each connection's SYN, and the loop takes it at
//! accept, once (`saved_syn.rs`): raw bytes, parsed only when the connection is analysed.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use super::connection;
use super::gate::{admit, reset, tarpit, Verdict};
use super::saved_syn::{self, SavedSyn};
use super::shared::Shared;
use exitvoice_schema::TcpAbsence;

/// Pause after a failed `accept` (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Accepts connections on `listener` until shutdown is signalled, spawning one task each.
/// A connection's future (TLS and HTTP state inline) is several KiB: boxed, the task holds a
/// pointer, where tokio would otherwise move the whole future by value several times on its
/// way into the task and again when the task ends (it boxes only futures over 16 KiB).
///
/// A connection from a `--proxy-protocol-from` source is admitted only once its PROXY header
/// has named the client (`connection::serve_relayed`): the limits and the penalty box are the
/// client's, not the load balancer's, which carries everyone's connections.
pub(crate) async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let keeps_syn = match saved_syn::keep(&listener) {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(%error, "TCP_SAVE_SYN refused: connections will have no tcp voice");
            false
        }
    };
    let mut shutdown = shared.shutdown.clone();
    loop {
        if *shutdown.borrow() {
            break;
        }
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => break,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        if shared.relays_proxy_protocol(peer.ip()) {
            // The kernel's SYN is the load balancer's: not taken (it goes with the socket).
            let open = shared.metrics.accept();
            tokio::spawn(Box::pin(connection::serve_relayed(
                Arc::clone(&shared),
                tcp,
                peer,
                open,
            )));
            continue;
        }
        match admit(&shared, peer.ip()) {
            Verdict::Refuse => reset(tcp),
            Verdict::Hold(permit) => {
                tokio::spawn(tarpit(Arc::clone(&shared), tcp, permit));
            }
            Verdict::Serve(permit) => {
                let open = shared.metrics.accept();
                let shared = Arc::clone(&shared);
                let syn = if keeps_syn {
                    saved_syn::take(&tcp)
                } else {
                    SavedSyn::Absent(TcpAbsence::Unsupported)
                };
                tokio::spawn(Box::pin(async move {
                    let _open = open;
                    let _permit = permit;
                    connection::serve(shared, tcp, peer, syn).await;
                }));
            }
        }
    }
}
