//! The Chromium persona: real headless Chromium, through the exit, via a forwarding shim.
//!
//! Chromium takes no proxy credentials on its command line (`--proxy-server` drops them, and
//! headless Chromium cannot answer a 407), and has no SOCKS5 username/password support. So the
//! auditor runs a shim on 127.0.0.1: Chromium sends it a plain `CONNECT` without credentials,
//! the shim dials the exit with [`dial`] (credentials, SOCKS5, timeouts included)
//! and then copies bytes both ways. The TLS inside the tunnel is Chromium's own, end to end.
//!
//! Chromium loads `https://<echo>/probe/<token>` with `--dump-dom`; the echo JSON is read from
//! the `<pre>` element Chromium renders a JSON response into. `--proxy-bypass-list=<-loopback>`
//! stops Chromium's implicit proxy bypass for loopback origins (tests run on loopback).
//!
//! The pin: Chromium itself checks the echo's certificate by its SPKI pin
//! (`--ignore-certificate-errors-spki-list=<base64 sha256>`, no blanket
//! `--ignore-certificate-errors`), so a certificate swapped by an interceptor fails the load.
//! The probe then loads the page without the pin, to record the interceptor's voice, and once
//! more with it (a passing network error is not interception); when only the pin-less load
//! works, the certificate is reported as not pinned (`tls_intercepted`). The shim never sees the
//! certificate (it is inside the tunnel), so the interceptor's SPKI and issuer are unknown.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use exitvoice_schema::Echo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use base64::Engine;
use exitvoice_exits::dial::{dial, Timeouts};
use exitvoice_exits::error::{Phase, ProbeError};
use exitvoice_exits::{EchoTarget, Exit};

use super::{CertView, ProbeOutcome};

/// Headless Chromium with nothing of its own on the network: no background fetches, component
/// updates or sync (on a closed network those are refused, many at a time). QUIC stays
/// Chromium's to try: whether Chromium behind an exit ever comes back over HTTP/3 after the
/// echo's `alt-svc` is what the echo's h3 ledger records ([`super::ledger`]).
pub const HEADLESS_FLAGS: [&str; 7] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];
/// Largest CONNECT head the shim reads from Chromium.
const MAX_CONNECT_HEAD: usize = 8 * 1024;
/// Largest DOM read from Chromium's stdout.
const MAX_DOM: usize = 1 << 20;

/// How to start Chromium.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChromiumConfig {
    /// The binary (`chromium`).
    pub binary: PathBuf,
    /// Limit for the whole page load.
    pub limit: Duration,
}

impl Default for ChromiumConfig {
    fn default() -> Self {
        Self {
            binary: PathBuf::from("chromium"),
            limit: Duration::from_secs(45),
        }
    }
}

/// Runs the shim: every accepted CONNECT is dialed through `exit` (or directly).
async fn shim(listener: TcpListener, exit: Option<Exit>, timeouts: Timeouts) {
    let exit = Arc::new(exit);
    while let Ok((client, _)) = listener.accept().await {
        let exit = exit.clone();
        tokio::spawn(async move {
            if let Err(error) = forward(client, exit.as_ref().as_ref(), &timeouts).await {
                tracing::debug!(error = %error, "chromium shim: tunnel failed");
            }
        });
    }
}

async fn forward(
    mut client: TcpStream,
    exit: Option<&Exit>,
    timeouts: &Timeouts,
) -> Result<(), ProbeError> {
    let io = |e: std::io::Error| ProbeError::io(Phase::Tunnel, "chromium", &e);
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_CONNECT_HEAD || client.read(&mut byte).await.map_err(io)? == 0 {
            return Err(ProbeError::ProxyProtocol("chromium sent no CONNECT head"));
        }
        head.extend_from_slice(&byte);
    }
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut fields);
    let parsed = request.parse(&head);
    let target = match (parsed, request.method, request.path) {
        (Ok(httparse::Status::Complete(_)), Some("CONNECT"), Some(target)) => target.to_owned(),
        _ => {
            let _ = client
                .write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                .await;
            return Err(ProbeError::ProxyProtocol(
                "chromium sent something else than CONNECT",
            ));
        }
    };
    let (host, port) = target
        .rsplit_once(':')
        .and_then(|(h, p)| {
            Some((
                h.trim_start_matches('[').trim_end_matches(']'),
                p.parse().ok()?,
            ))
        })
        .ok_or(ProbeError::ProxyProtocol("CONNECT target without port"))?;
    match dial(exit, host, port, timeouts).await {
        Ok(mut upstream) => {
            client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .map_err(io)?;
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            Ok(())
        }
        Err(error) => {
            let _ = client
                .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                .await;
            Err(error)
        }
    }
}

/// Extracts the echo JSON from Chromium's DOM dump (`<pre>…</pre>`, HTML-escaped text).
pub fn echo_from_dom(dom: &str) -> Result<Echo, ProbeError> {
    let start = dom
        .find("<pre")
        .and_then(|at| dom.get(at..)?.find('>').map(|end| at + end + 1))
        .ok_or_else(|| ProbeError::BadEcho("no <pre> in the page".to_owned()))?;
    let rest = dom.get(start..).unwrap_or_default();
    let end = rest
        .find("</pre>")
        .ok_or_else(|| ProbeError::BadEcho("unterminated <pre>".to_owned()))?;
    let text = rest
        .get(..end)
        .unwrap_or_default()
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&text).map_err(|e| ProbeError::BadEcho(format!("not an echo: {e}")))
}

/// Probes the echo server with headless Chromium through `exit` (or directly).
///
/// # Errors
/// Chromium missing or failing, a page without the echo, a timeout of the whole load.
pub async fn probe(
    exit: Option<&Exit>,
    echo: &EchoTarget,
    token: &str,
    timeouts: &Timeouts,
    config: &ChromiumConfig,
) -> Result<ProbeOutcome, ProbeError> {
    let started = Instant::now();
    let pin = base64::engine::general_purpose::STANDARD.encode(echo.spki_sha256);
    let pinned = load(exit, echo, token, timeouts, config, Some(&pin)).await;
    let (echo_json, cert) = match pinned {
        Ok(echo_json) => (
            echo_json,
            CertView {
                spki_sha256: echo.spki_sha256,
                issuer: UNREAD_ISSUER.to_owned(),
                pinned: true,
            },
        ),
        // The page did not load with the pin. If it loads without, and still not with it (so a
        // passing network error is not taken for interception), someone else's certificate
        // answered: the pin-less load recorded their voice.
        Err(pinned_error @ ProbeError::BadEcho(_)) => {
            let Ok(unpinned) = load(exit, echo, token, timeouts, config, None).await else {
                return Err(pinned_error);
            };
            match load(exit, echo, token, timeouts, config, Some(&pin)).await {
                Ok(echo_json) => (
                    echo_json,
                    CertView {
                        spki_sha256: echo.spki_sha256,
                        issuer: UNREAD_ISSUER.to_owned(),
                        pinned: true,
                    },
                ),
                Err(_) => (
                    unpinned,
                    CertView {
                        spki_sha256: [0; 32],
                        issuer: UNREAD_ISSUER.to_owned(),
                        pinned: false,
                    },
                ),
            }
        }
        Err(error) => return Err(error),
    };
    Ok(ProbeOutcome {
        alpn: echo_json.alpn.negotiated.clone(),
        echo: echo_json,
        cert: Some(cert),
        latency: started.elapsed(),
    })
}

/// What the Chromium persona records as the certificate's issuer: the shim cannot read it.
const UNREAD_ISSUER: &str = "(not read by the chromium persona)";

/// One page load of the echo by Chromium through the shim: accepting only the certificate
/// whose SPKI has the base64 sha256 `pin`, or any certificate when `pin` is `None`.
async fn load(
    exit: Option<&Exit>,
    echo: &EchoTarget,
    token: &str,
    timeouts: &Timeouts,
    config: &ChromiumConfig,
    pin: Option<&str>,
) -> Result<Echo, ProbeError> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| ProbeError::io(Phase::Connect, "127.0.0.1", &e))?;
    let shim_port = listener
        .local_addr()
        .map_err(|e| ProbeError::io(Phase::Connect, "127.0.0.1", &e))?
        .port();
    let shim_task = tokio::spawn(shim(listener, exit.cloned(), *timeouts));
    let profile = std::env::temp_dir().join(format!(
        "exitvoice-chromium-{token}-{}",
        if pin.is_some() { "pinned" } else { "any" }
    ));
    let url = format!("https://{}/probe/{token}", echo.authority());
    let child = tokio::process::Command::new(&config.binary)
        .args(HEADLESS_FLAGS)
        .arg("--proxy-bypass-list=<-loopback>")
        .arg(pin.map_or_else(
            || "--ignore-certificate-errors".to_owned(),
            |pin| format!("--ignore-certificate-errors-spki-list={pin}"),
        ))
        .arg(format!("--proxy-server=http://127.0.0.1:{shim_port}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(&url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|_| ProbeError::Unsupported("cannot start chromium"))?;
    let result = tokio::time::timeout(config.limit, child.wait_with_output()).await;
    shim_task.abort();
    let _ = std::fs::remove_dir_all(&profile);
    let output = match result {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(ProbeError::io(Phase::Response, "chromium", &e)),
        Err(_) => {
            return Err(ProbeError::Timeout {
                phase: Phase::Response,
                limit: config.limit,
            })
        }
    };
    let dom = String::from_utf8_lossy(
        output
            .stdout
            .get(..MAX_DOM.min(output.stdout.len()))
            .unwrap_or_default(),
    );
    let echo_json = echo_from_dom(&dom)?;
    if echo_json.token.as_deref() != Some(token) {
        return Err(ProbeError::BadEcho("token mismatch".to_owned()));
    }
    Ok(echo_json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dom_extraction() {
        assert!(echo_from_dom("<html><body>nothing</body></html>").is_err());
        assert!(echo_from_dom("<pre>{&quot;x").is_err());
        let dom = "<html><head></head><body><pre style=\"word-wrap: break-word;\">{\"a\":\"&lt;&amp;\"}</pre></body></html>";
        // Valid HTML, valid JSON, but not an echo: a typed error, never a panic.
        assert!(matches!(echo_from_dom(dom), Err(ProbeError::BadEcho(_))));
    }
}
