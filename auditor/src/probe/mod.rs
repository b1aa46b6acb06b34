//! One probe: dial (directly or through an exit), TLS with the pinned echo certificate, one
//! request carrying a unique token, and the echo JSON back.
//!
//! The handshake and the pin are `exitvoice_exits::tls`'s; [`h2`] is the profile-shaped HTTP/2
//! client, [`http1`] the fallback when the server picks `http/1.1`; [`h3`] is the run's QUIC probe
//! (HTTP/3 over UDP, directly or through a SOCKS5 exit's UDP relay). [`chromium`] is the persona
//! that loads the echo in real headless Chromium, [`netlog`] reads what Chromium's TLS was shown.

pub mod chromium;
pub mod h2;
pub mod h3;
pub mod http1;
pub mod ledger;
pub mod netlog;

use std::time::{Duration, Instant};

use exitvoice_exits::dial::{dial, Timeouts};
use exitvoice_exits::error::{within, Phase, ProbeError};
use exitvoice_exits::{EchoTarget, Exit};
use exitvoice_schema::Echo;
use rand::Rng;

pub use exitvoice_exits::tls::CertView;
pub use h2::H2Profile;

/// What a successful probe brought back.
#[derive(Clone, Debug)]
pub struct ProbeOutcome {
    /// The echo server's view of the connection.
    pub echo: Echo,
    /// ALPN the auditor saw negotiated.
    pub alpn: Option<String>,
    /// The certificate the auditor was shown (the Chromium persona's, read from Chromium's net
    /// log); `None` only when no certificate was checked.
    pub cert: Option<CertView>,
    /// From the start of the dial to the full echo.
    pub latency: Duration,
}

/// A fresh probe token: 128 random bits, hex.
pub fn new_token() -> String {
    format!("{:032x}", rand::rng().random::<u128>())
}

/// Probes the echo server through `exit` (or directly), sending `profile`'s h2 shape.
///
/// # Errors
/// Every failure as a [`ProbeError`] with its class; never hangs past the sum of the timeouts.
pub async fn probe(
    exit: Option<&Exit>,
    echo: &EchoTarget,
    profile: &H2Profile,
    token: &str,
    timeouts: &Timeouts,
) -> Result<ProbeOutcome, ProbeError> {
    let started = Instant::now();
    let tunnel = dial(exit, &echo.host, echo.port, timeouts).await?;
    let handshake =
        exitvoice_exits::tls::handshake(tunnel, echo, &[b"h2", b"http/1.1"], timeouts.tls).await?;
    let mut stream = handshake.stream;
    let authority = echo.authority();
    let path = format!("/probe/{token}");
    let response = within(Phase::Response, timeouts.response, async {
        if handshake.alpn.as_deref() == Some("h2") {
            h2::exchange(&mut stream, profile, &authority, &path).await
        } else {
            let user_agent = profile
                .headers
                .iter()
                .find(|(name, _)| name == "user-agent")
                .map_or("exitvoice-auditor", |(_, value)| value.as_str());
            http1::exchange(&mut stream, &authority, &path, user_agent).await
        }
    })
    .await?;
    if response.status != 200 {
        return Err(ProbeError::BadEcho(format!("status {}", response.status)));
    }
    let echo_json: Echo = serde_json::from_slice(&response.body)
        .map_err(|e| ProbeError::BadEcho(format!("not an echo: {e}")))?;
    if echo_json.token.as_deref() != Some(token) {
        return Err(ProbeError::BadEcho("token mismatch".to_owned()));
    }
    Ok(ProbeOutcome {
        echo: echo_json,
        alpn: handshake.alpn,
        cert: Some(handshake.cert),
        latency: started.elapsed(),
    })
}
