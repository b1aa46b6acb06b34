//! The strike policy: which failures are the peer's fault, and what a strike does (the penalty
//! box of `admission.rs`).

use std::net::SocketAddr;

use exitvoice_schema::Failure;
use tokio::time::Instant;

use super::admission::{Source, Struck};
use super::shared::Shared;

/// Whether a failed handshake's reason is the peer's fault: bytes that are no ClientHello, one
/// over the cap, a hello or handshake not done by the deadline, a TLS protocol error, or a PROXY
/// header from a source that may not send one. A peer
/// that closes (port scans, load-balancer health checks), refuses our certificate, or whose
/// socket fails is not.
pub(super) fn is_handshake_strike(reason: Failure) -> bool {
    matches!(
        reason,
        Failure::ProxyUntrusted
            | Failure::HelloInvalid
            | Failure::HelloTooLarge
            | Failure::HelloTimeout
            | Failure::HandshakeTimeout
            | Failure::TlsError
    )
}

/// Counts a strike against the peer's source, and says so in the log when it puts the source
/// in the penalty box.
pub(super) fn strike(shared: &Shared, peer: SocketAddr, reason: &'static str) {
    shared.metrics.strike();
    if shared.admission.strike(peer.ip(), Instant::now()) == Struck::Penalised {
        shared.metrics.penalty();
        let limits = shared.limits.admission;
        tracing::warn!(
            source = %Source::of(peer.ip()),
            last_strike = reason,
            strikes = limits.strikes,
            window_s = limits.window.as_secs(),
            penalty_s = limits.penalty.as_secs(),
            "source put in the penalty box: its new connections are reset"
        );
    }
}
