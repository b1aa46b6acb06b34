//! The echo's h3 downgrade ledger, read for the Chromium persona: after an exit's samples, the
//! auditor asks the echo directly (`/api/ledger?token=`, pinned TLS, HTTP/1.1) what it saw of the
//! identity those samples made, egress address and Chromium's TLS voice: did Chromium, told by
//! `alt-svc` that the echo speaks HTTP/3, ever come back over it through the exit?

use exitvoice_exits::dial::{dial, Timeouts};
use exitvoice_exits::error::{within, Phase, ProbeError};
use exitvoice_exits::EchoTarget;
use exitvoice_schema::LedgerVerdict;
use serde::Deserialize;

use super::http1;
use exitvoice_exits::tls;

#[derive(Deserialize)]
struct Answer {
    identities: Vec<Identity>,
}

#[derive(Deserialize)]
struct Identity {
    verdict: String,
    why: String,
    tcp_connections_after_alt_svc: u32,
    quic_attempts: u32,
}

/// The ledger's verdict on the identity whose TCP requests carried `token`.
///
/// # Errors
/// The dial, TLS or response failing, a non-200 answer, or no identity for the token.
pub async fn verdict(
    echo: &EchoTarget,
    token: &str,
    timeouts: &Timeouts,
) -> Result<LedgerVerdict, ProbeError> {
    let tunnel = dial(None, &echo.host, echo.port, timeouts).await?;
    let handshake = tls::handshake(tunnel, echo, &[b"http/1.1"], timeouts.tls).await?;
    let mut stream = handshake.stream;
    let path = format!("/api/ledger?token={token}");
    let response = within(
        Phase::Response,
        timeouts.response,
        http1::exchange(&mut stream, &echo.authority(), &path, "exitvoice-auditor"),
    )
    .await?;
    if response.status != 200 {
        return Err(ProbeError::BadEcho(format!(
            "ledger status {}",
            response.status
        )));
    }
    let answer: Answer = serde_json::from_slice(&response.body)
        .map_err(|e| ProbeError::BadEcho(format!("not a ledger answer: {e}")))?;
    // A token is one probe's: its requests made one identity.
    let identity = answer.identities.into_iter().next().ok_or_else(|| {
        ProbeError::BadEcho("the ledger has no identity for the token".to_owned())
    })?;
    Ok(LedgerVerdict {
        verdict: identity.verdict,
        why: identity.why,
        tcp_connections_after_alt_svc: identity.tcp_connections_after_alt_svc,
        quic_attempts: identity.quic_attempts,
    })
}
