//! A probe retried while it fails transiently (timeouts, resets, DNS), with exponential
//! backoff, at most [`RunConfig::retries`] times; auth, refusals, TLS and bad echoes are not.

use exitvoice_exits::error::ProbeError;
use exitvoice_exits::{EchoTarget, Exit};
use exitvoice_schema::ProbeFailure;

use super::config::{Persona, RunConfig};
use crate::probe::{self, ProbeOutcome};
use crate::record;

/// A sample's probe, retried while it fails transiently: the outcome of its last attempt, and
/// the failures of the attempts before it (each its own connection through the exit).
pub(super) async fn probe_with_retries(
    exit: Option<&Exit>,
    echo: &EchoTarget,
    config: &RunConfig,
    token: &str,
) -> (Result<ProbeOutcome, ProbeError>, Vec<ProbeFailure>) {
    let mut retried = Vec::new();
    loop {
        let result = match &config.persona {
            Persona::Rustls => {
                probe::probe(exit, echo, &config.profile, token, &config.timeouts).await
            }
            Persona::Chromium(chromium) => {
                probe::chromium::probe(exit, echo, token, &config.timeouts, chromium).await
            }
        };
        let attempt = u32::try_from(retried.len()).unwrap_or(u32::MAX);
        match result {
            Err(error) if error.class().is_transient() && attempt < config.retries => {
                let delay = config.backoff.saturating_mul(1 << attempt.min(16));
                tracing::debug!(
                    exit = exit.map_or("direct", |e| e.name.as_str()),
                    class = %error.class(),
                    attempt,
                    "transient probe failure, retrying"
                );
                retried.push(record::failure(&error));
                tokio::time::sleep(delay).await;
            }
            other => return (other, retried),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use exitvoice_exits::dial::Timeouts;

    use super::*;

    /// A loopback listener that counts connections and answers each with `reply` (or holds it
    /// silent when `reply` is empty).
    async fn counting_proxy(reply: &'static [u8]) -> (u16, Arc<AtomicU64>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let count = Arc::new(AtomicU64::new(0));
        let counter = count.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::Relaxed);
                if !reply.is_empty() {
                    let mut buf = [0u8; 1024];
                    let _ = socket.read(&mut buf).await;
                    let _ = socket.write_all(reply).await;
                }
                held.push(socket);
            }
        });
        (port, count)
    }

    #[tokio::test]
    async fn only_transient_failures_are_retried() {
        let config = RunConfig {
            retries: 2,
            backoff: Duration::from_millis(10),
            timeouts: Timeouts {
                tunnel: Duration::from_millis(150),
                ..Timeouts::default()
            },
            ..RunConfig::default()
        };
        let echo = EchoTarget::new("https://127.0.0.1:9", &"00".repeat(32)).unwrap();
        let exit_for = |port: u16| {
            Exit::new(
                "x",
                exitvoice_exits::ProxyUrl::parse(&format!("http://u:p@127.0.0.1:{port}")).unwrap(),
            )
        };

        let (silent, attempts) = counting_proxy(b"").await;
        let (outcome, retried) =
            probe_with_retries(Some(&exit_for(silent)), &echo, &config, "t").await;
        assert_eq!(
            outcome.unwrap_err().class(),
            exitvoice_exits::error::ErrorClass::Timeout
        );
        assert_eq!(attempts.load(Ordering::Relaxed), 3, "1 try + 2 retries");
        // The two retried attempts are kept as evidence, each its own connection.
        let classes: Vec<&str> = retried.iter().map(|f| f.class.as_str()).collect();
        assert_eq!(classes, ["timeout", "timeout"]);

        let (auth, attempts) =
            counting_proxy(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n").await;
        let (outcome, retried) =
            probe_with_retries(Some(&exit_for(auth)), &echo, &config, "t").await;
        assert_eq!(
            outcome.unwrap_err().class(),
            exitvoice_exits::error::ErrorClass::ProxyAuth
        );
        assert!(retried.is_empty());
        assert_eq!(
            attempts.load(Ordering::Relaxed),
            1,
            "auth failures are not retried"
        );

        // A tunnel that opens and then stays silent: a timeout of the TLS phase.
        let (mute, _) = counting_proxy(b"HTTP/1.1 200 Connection established\r\n\r\n").await;
        let config = RunConfig {
            retries: 0,
            timeouts: Timeouts {
                tls: Duration::from_millis(150),
                ..Timeouts::default()
            },
            ..RunConfig::default()
        };
        let error = probe_with_retries(Some(&exit_for(mute)), &echo, &config, "t")
            .await
            .0
            .unwrap_err();
        assert_eq!(error.class(), exitvoice_exits::error::ErrorClass::Timeout);
        assert_eq!(error.phase(), Some(exitvoice_exits::error::Phase::Tls));
    }
}
