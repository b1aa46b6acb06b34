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
//! One sample is one load and one connection through the exit, as with the rustls persona, so
//! a balancer that rotates one exit's connections over several backends shows each of them
//! within as many samples. Chromium itself would open more: its background fetches (refused by
//! the shim: they are no business of the exit) and up to three connections to the echo for one
//! page (the navigation's preconnects and the request's own job), of which whichever finishes
//! its handshake first carries the request. The shim dials the exit for the first `CONNECT` to
//! the echo only and holds the others unanswered until that tunnel ends (then `502`), so the
//! request always rides the one connection the exit made.
//!
//! The pin: Chromium accepts any certificate (`--ignore-certificate-errors`) and writes its net
//! log (`--log-net-log`, [`super::netlog`]); the certificate the echo connection was shown is
//! read from it and judged by the echo's SPKI pin, as the rustls persona judges its own
//! handshake. So an interceptor's certificate flags the sample `tls_intercepted` and its voice
//! is recorded, from the same load: interception is read from what Chromium was shown, never
//! inferred from whether a retry succeeds. A load whose log shows no certificate fails.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use exitvoice_schema::Echo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use exitvoice_exits::dial::{dial, Timeouts};
use exitvoice_exits::error::{Phase, ProbeError};
use exitvoice_exits::{EchoTarget, Exit};

use super::{netlog, CertView, ProbeOutcome};

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
/// Largest net log read (one load's is ~200 KiB).
const MAX_NETLOG: u64 = 32 << 20;

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

/// What the shim did with one load's `CONNECT`s to the echo.
struct Tunnel {
    /// Set once the first `CONNECT` to the echo was taken: the load's one dial of the exit.
    taken: AtomicBool,
    /// That dial's failure: the sample fails with it, classed as the rustls persona's would be.
    failure: Mutex<Option<ProbeError>>,
    /// `true` once that tunnel ended; the held `CONNECT`s wait for it.
    ended: watch::Sender<bool>,
}

/// Runs the shim for one load until aborted: the first `CONNECT` to the echo is dialed through
/// `exit` (or directly), later ones are held until it ends, any other target is refused.
async fn shim(
    listener: TcpListener,
    exit: Option<Exit>,
    echo: EchoTarget,
    timeouts: Timeouts,
    tunnel: Arc<Tunnel>,
) {
    let exit = Arc::new(exit);
    let echo = Arc::new(echo);
    // Owned here, so the load's end (aborting the shim) ends every tunnel and held CONNECT.
    let mut tunnels = JoinSet::new();
    while let Ok((client, _)) = listener.accept().await {
        while tunnels.try_join_next().is_some() {}
        let (exit, echo, tunnel) = (exit.clone(), echo.clone(), tunnel.clone());
        tunnels.spawn(async move {
            if let Err(error) =
                forward(client, exit.as_ref().as_ref(), &echo, &timeouts, &tunnel).await
            {
                tracing::debug!(error = %error, "chromium shim: tunnel failed");
            }
        });
    }
}

async fn forward(
    mut client: TcpStream,
    exit: Option<&Exit>,
    echo: &EchoTarget,
    timeouts: &Timeouts,
    tunnel: &Tunnel,
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
                p.parse::<u16>().ok()?,
            ))
        })
        .ok_or(ProbeError::ProxyProtocol("CONNECT target without port"))?;
    // Chromium's own background fetches never reach the exit.
    if !(host.eq_ignore_ascii_case(&echo.host) && port == echo.port) {
        let _ = client
            .write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            .await;
        return Ok(());
    }
    if tunnel.taken.swap(true, Ordering::AcqRel) {
        // A preconnect beside the load's tunnel: answered only once that tunnel is over, so the
        // request never rides a second connection through the exit.
        let _ = tunnel.ended.subscribe().wait_for(|ended| *ended).await;
        let _ = client
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            .await;
        return Ok(());
    }
    let result = match dial(exit, host, port, timeouts).await {
        Ok(mut upstream) => {
            let answered = client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await;
            if answered.is_ok() {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
            answered.map_err(io)
        }
        Err(error) => {
            let _ = client
                .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                .await;
            if let Ok(mut failure) = tunnel.failure.lock() {
                *failure = Some(error);
            }
            Err(ProbeError::ProxyProtocol("the exit could not be dialed"))
        }
    };
    tunnel.ended.send_replace(true);
    result
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

/// Probes the echo server with headless Chromium through `exit` (or directly): one page load,
/// one connection through the exit.
///
/// # Errors
/// Chromium missing or failing, the exit's dial failing (as the shim saw it), a handshake that
/// Chromium's net log shows failed, a page without the echo, a timeout of the whole load.
pub async fn probe(
    exit: Option<&Exit>,
    echo: &EchoTarget,
    token: &str,
    timeouts: &Timeouts,
    config: &ChromiumConfig,
) -> Result<ProbeOutcome, ProbeError> {
    let started = Instant::now();
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| ProbeError::io(Phase::Connect, "127.0.0.1", &e))?;
    let shim_port = listener
        .local_addr()
        .map_err(|e| ProbeError::io(Phase::Connect, "127.0.0.1", &e))?
        .port();
    let tunnel = Arc::new(Tunnel {
        taken: AtomicBool::new(false),
        failure: Mutex::new(None),
        ended: watch::Sender::new(false),
    });
    let shim_task = tokio::spawn(shim(
        listener,
        exit.cloned(),
        echo.clone(),
        *timeouts,
        tunnel.clone(),
    ));
    let profile = std::env::temp_dir().join(format!("exitvoice-chromium-{token}"));
    let url = format!("https://{}/probe/{token}", echo.authority());
    let loaded = load(&url, config, shim_port, &profile).await;
    shim_task.abort();
    let _ = std::fs::remove_dir_all(&profile);
    let (dom, netlog) = loaded?;
    let echo_json = match echo_from_dom(&dom) {
        Ok(echo_json) => echo_json,
        Err(error) => {
            if let Some(failure) = tunnel.failure.lock().ok().and_then(|mut f| f.take()) {
                return Err(failure);
            }
            return Err(handshake_failure(&netlog)
                .or_else(|| load_failure(&netlog, &url))
                .unwrap_or(error));
        }
    };
    if echo_json.token.as_deref() != Some(token) {
        return Err(ProbeError::BadEcho("token mismatch".to_owned()));
    }
    Ok(ProbeOutcome {
        alpn: echo_json.alpn.negotiated.clone(),
        echo: echo_json,
        cert: Some(shown(&netlog, echo.spki_sha256)?),
        latency: started.elapsed(),
    })
}

/// The certificate the load's echo connection was shown, judged by `pin`. The shim let one
/// connection through, so every certificate in the log is that connection's: any one off the
/// pin makes the sample intercepted.
fn shown(netlog: &[u8], pin: [u8; 32]) -> Result<CertView, ProbeError> {
    let connections =
        netlog::tls_connections(netlog).map_err(|e| ProbeError::Tls(e.to_string()))?;
    let mut views = connections
        .iter()
        .filter_map(|c| c.leaf.as_deref())
        .map(|leaf| {
            CertView::of(leaf, pin).ok_or_else(|| {
                ProbeError::Tls("chromium was shown a certificate that is not X.509".to_owned())
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if views.is_empty() {
        return Err(ProbeError::Tls(
            "chromium's net log shows no certificate".to_owned(),
        ));
    }
    let at = views.iter().position(|view| !view.pinned).unwrap_or(0);
    Ok(views.swap_remove(at))
}

/// The failure of a handshake the net log shows, if one failed.
fn handshake_failure(netlog: &[u8]) -> Option<ProbeError> {
    let connections = netlog::tls_connections(netlog).ok()?;
    let code = connections.iter().find_map(|c| c.net_error)?;
    Some(ProbeError::Tls(format!("chromium net error {code}")))
}

/// The network error the load of `url` ended with, if the net log shows one. (Headless
/// Chromium dumps an empty page for a failed load, without its error page.)
fn load_failure(netlog: &[u8], url: &str) -> Option<ProbeError> {
    let code = netlog::request_error(netlog, url).ok()??;
    Some(ProbeError::Browser(code))
}

/// One page load of the echo by Chromium through the shim at `shim_port`, accepting any
/// certificate; returns the DOM dump and the net log.
async fn load(
    url: &str,
    config: &ChromiumConfig,
    shim_port: u16,
    profile: &Path,
) -> Result<(String, Vec<u8>), ProbeError> {
    tokio::fs::create_dir_all(profile)
        .await
        .map_err(|e| ProbeError::io(Phase::Connect, "chromium", &e))?;
    let netlog_path = profile.join("netlog.json");
    let child = tokio::process::Command::new(&config.binary)
        .args(HEADLESS_FLAGS)
        .arg("--proxy-bypass-list=<-loopback>")
        .arg("--ignore-certificate-errors")
        .arg(format!("--proxy-server=http://127.0.0.1:{shim_port}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--log-net-log={}", netlog_path.display()))
        .arg("--dump-dom")
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|_| ProbeError::Unsupported("cannot start chromium"))?;
    let output = match tokio::time::timeout(config.limit, child.wait_with_output()).await {
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
    )
    .into_owned();
    let mut netlog = Vec::new();
    if let Ok(file) = tokio::fs::File::open(&netlog_path).await {
        let _ = file.take(MAX_NETLOG).read_to_end(&mut netlog).await;
    }
    Ok((dom, netlog))
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
