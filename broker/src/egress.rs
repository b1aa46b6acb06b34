//! The egress check (`"egress": true` in a lease request): one request through the leased exit
//! (for a gateway, with the lease's own session id) to the echo server of the exits file's
//! `[echo]`, over TLS judged by the echo's SPKI pin, as the auditor's probes are. The echo's
//! `/api/all` names the address the connection came from: the exit's egress, as the origin
//! will see it, and, when the echo was given geo databases (`serve --geoip`), its country and
//! network. An interceptor's certificate is reported, not trusted: the answer then comes from
//! the interceptor.

use exitvoice_exits::dial::{dial, Timeouts};
use exitvoice_exits::error::{within, Phase, ProbeError};
use exitvoice_exits::{EchoTarget, Exit};
use exitvoice_schema::EchoGeo;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// The largest echo answer read.
const MAX_ANSWER: usize = 256 * 1024;

/// What the egress check saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Egress {
    /// The address the echo saw the connection come from.
    pub ip: String,
    /// The certificate was not the echo's pinned one.
    pub intercepted: bool,
    /// Where the echo placed that address (its `geo`, with the databases it read), when it has
    /// geo databases.
    pub geo: Option<EchoGeo>,
}

/// Checks the egress of `exit` (its session, if any, already the lease's).
///
/// # Errors
/// The dial, TLS or request failing, or an answer that is not the echo's.
pub async fn check(
    exit: &Exit,
    echo: &EchoTarget,
    timeouts: &Timeouts,
) -> Result<Egress, ProbeError> {
    let tunnel = dial(Some(exit), &echo.host, echo.port, timeouts).await?;
    let handshake =
        exitvoice_exits::tls::handshake(tunnel, echo, &[b"http/1.1"], timeouts.tls).await?;
    let io = |e: hyper::Error| ProbeError::BadEcho(format!("HTTP/1: {e}"));
    let answer = within(Phase::Response, timeouts.response, async {
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(handshake.stream))
                .await
                .map_err(io)?;
        tokio::spawn(connection);
        let request = hyper::Request::get("/api/all")
            .header("host", echo.authority())
            .header("accept", "application/json")
            .body(Empty::<Bytes>::new())
            .map_err(|e| ProbeError::BadEcho(e.to_string()))?;
        let response = sender.send_request(request).await.map_err(io)?;
        if !response.status().is_success() {
            return Err(ProbeError::BadEcho(format!("status {}", response.status())));
        }
        Limited::new(response.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map(|body| body.to_bytes())
            .map_err(|e| ProbeError::BadEcho(format!("answer: {e}")))
    })
    .await?;
    let echo: serde_json::Value = serde_json::from_slice(&answer)
        .map_err(|e| ProbeError::BadEcho(format!("not an echo: {e}")))?;
    let ip = echo["peer"]["ip"]
        .as_str()
        .ok_or_else(|| ProbeError::BadEcho("the echo names no peer address".to_owned()))?;
    Ok(Egress {
        ip: ip.to_owned(),
        intercepted: !handshake.cert.pinned,
        geo: serde_json::from_value(echo["geo"].clone()).ok(),
    })
}
