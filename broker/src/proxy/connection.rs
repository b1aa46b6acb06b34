//! One client connection to the proxy: the handshake read (sniffed: SOCKS5, HTTP, or TLS to the
//! proxy with HTTP inside), the lease held, the exit dialled, the bytes relayed, the hold given
//! back with what the broker saw.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use exitvoice_exits::dial::{self, Tunnel};
use exitvoice_exits::error::ErrorClass;
use exitvoice_exits::ProxyScheme;
use tokio::net::TcpStream;

use super::client::Client;
use super::holdings::Ticket;
use super::http_head::{self, Ask, BadHead, Target};
use super::relay::{self, Carried, Closed};
use super::socks5::{self, Reply, SocksError};
use super::username::Asked;
use super::Proxy;
use crate::lease_store::LeaseStore;
use crate::service::BrokerError;

/// The first byte of a TLS handshake record (RFC 8446 §5.1).
const TLS_HANDSHAKE: u8 = 0x16;

/// How the client spoke, for the answers after the handshake.
enum Spoke {
    Http(Ask),
    Socks,
}

/// A request read: who asks, for what, where to.
struct Request {
    client: Client,
    spoke: Spoke,
    target: Target,
    asked: Asked,
}

/// A handshake that opened no tunnel: answered (when the protocol has an answer) and counted.
struct Refused(&'static str);

/// Serves one client connection to its end.
pub(super) async fn serve<S: LeaseStore>(
    proxy: Arc<Proxy<S>>,
    tcp: TcpStream,
    peer: SocketAddr,
    fixed: Option<Arc<Asked>>,
) {
    let metrics = proxy.holdings.broker().metrics().tunnels();
    let deadline = tokio::time::Instant::now() + proxy.settings.handshake;
    // The handshake's, the lease's and the dial's futures are boxed: only the relay's state
    // stays in the tunnel's task, which an idle tunnel holds for as long as it lasts.
    let read = tokio::time::timeout_at(
        deadline,
        Box::pin(read_request(&proxy, tcp, fixed.as_deref())),
    );
    let mut request = match read.await {
        Ok(Ok(request)) => request,
        Ok(Err(Refused(reason))) => return metrics.refused(reason),
        Err(_) => return metrics.refused("handshake_timeout"),
    };
    let read_at = Instant::now();
    let holder = request
        .asked
        .holder
        .clone()
        .unwrap_or_else(|| format!("proxy@{}", peer.ip()));
    let mut lease = request
        .asked
        .request(&holder, 0, millis(proxy.settings.wait));
    lease.origin = lease.origin.or_else(|| Some(request.target.host.clone()));
    let ticket = match Box::pin(proxy.holdings.hold(lease)).await {
        Ok(ticket) => ticket,
        Err(error) => {
            let reason = refuse_lease(&mut request, &error).await;
            return metrics.refused(reason);
        }
    };
    let mut exit = ticket.riding.exit.clone();
    // The exit resolves the target's name, whatever its scheme says: the broker never looks
    // a target up, so its own network is never one.
    if exit.proxy.scheme == ProxyScheme::Socks5 {
        exit.proxy.scheme = ProxyScheme::Socks5h;
    }
    let target = &request.target;
    let dialled = Box::pin(dial::dial(
        Some(&exit),
        &target.host,
        target.port,
        &proxy.settings.timeouts,
    ));
    let upstream = match dialled.await {
        Ok(upstream) => upstream,
        Err(error) => {
            let class = error.class();
            refuse_exit(&mut request, class).await;
            metrics.refused("exit_failed");
            let outcome = if class == ErrorClass::Timeout {
                "timeout"
            } else {
                "error"
            };
            // A task's lease stays: one refused tunnel (a browser's fetch of a host the exit
            // will not reach) must not end the task's other tunnels.
            return proxy.holdings.close(ticket, outcome).await;
        }
    };
    let early = match &request.spoke {
        Spoke::Http(Ask::Connect) => {
            let sent = request
                .client
                .send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await;
            sent.map(|()| Vec::new())
        }
        Spoke::Http(Ask::Forward { forward }) => Ok(forward.clone()),
        Spoke::Socks => socks5::answer(&mut request.client, Reply::Succeeded)
            .await
            .map(|()| Vec::new()),
    };
    let Ok(mut early) = early else {
        return proxy.holdings.close(ticket, "closed").await;
    };
    let (client, after_head) = request.client.into_parts();
    early.extend_from_slice(&after_head);
    relay_through(&proxy, ticket, client, upstream, &early, read_at).await;
}

/// Relays the open tunnel, then counts it and gives the hold back with its outcome.
async fn relay_through<S: LeaseStore>(
    proxy: &Proxy<S>,
    ticket: Ticket,
    client: Box<dyn Tunnel>,
    upstream: Box<dyn Tunnel>,
    early: &[u8],
    read_at: Instant,
) {
    let metrics = proxy.holdings.broker().metrics().tunnels();
    let riding = ticket.riding.clone();
    metrics.opened(
        &riding.class,
        &riding.unit,
        ticket.joined,
        read_at.elapsed().as_secs_f64(),
    );
    let idle = proxy.settings.tunnel_idle;
    let carried = relay::relay(
        client,
        upstream,
        early,
        idle,
        &riding.ended,
        &riding.deadline,
    )
    .await;
    let reason = match (carried.closed, riding.ended_by()) {
        (Closed::LeaseEnded, Some(by)) => by.as_str(),
        (closed, _) => closed.as_str(),
    };
    metrics.closed(
        &riding.class,
        &riding.unit,
        reason,
        carried.up,
        carried.down,
    );
    proxy.holdings.close(ticket, outcome(&carried)).await;
}

/// What the broker saw of a tunnel, as an outcome: bytes back from the exit are a success; a
/// reset before any came back is the exit's failure; anything else judges nothing.
fn outcome(carried: &Carried) -> &'static str {
    match carried.closed {
        _ if carried.down > 0 => "ok",
        Closed::Reset => "error",
        _ => "closed",
    }
}

/// Reads the client's request under the handshake's deadline: the protocol sniffed from its
/// first byte, the credentials judged.
async fn read_request<S: LeaseStore>(
    proxy: &Proxy<S>,
    tcp: TcpStream,
    fixed: Option<&Asked>,
) -> Result<Request, Refused> {
    let mut first = [0; 1];
    let peeked = tcp.peek(&mut first).await.map_err(|_| Refused("io"))?;
    if peeked == 0 {
        return Err(Refused("io"));
    }
    let stream: Box<dyn Tunnel> = if first[0] == TLS_HANDSHAKE {
        let acceptor = proxy.tls.as_ref().ok_or(Refused("tls_not_served"))?;
        let tls = acceptor.accept(tcp).await.map_err(|_| Refused("tls"))?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let mut client = Client::new(stream, Vec::new());
    client.need(1).await.map_err(|_| Refused("io"))?;
    if client.read()[0] == socks5::VERSION {
        read_socks(proxy, client, fixed).await
    } else {
        read_http(proxy, client, fixed).await
    }
}

/// The HTTP request's head, its credentials judged (`407` when they fail).
async fn read_http<S: LeaseStore>(
    proxy: &Proxy<S>,
    mut client: Client,
    fixed: Option<&Asked>,
) -> Result<Request, Refused> {
    let head = loop {
        match http_head::parse(client.read()) {
            Ok(Some(head)) => break head,
            Ok(None) => {
                if !client.more().await.map_err(|_| Refused("io"))? {
                    return Err(Refused("io"));
                }
            }
            Err(error) => {
                let (status, reason) = match error {
                    BadHead::TooLarge => ("431 Request Header Fields Too Large", "head_too_large"),
                    _ => ("400 Bad Request", "bad_request"),
                };
                let _ = client.send(&answer(status, &[], &error.to_string())).await;
                return Err(Refused(reason));
            }
        }
    };
    client.take(head.len);
    let asked = match proxy.judge(head.credentials.as_ref(), fixed) {
        Ok(asked) => asked,
        Err(why) => {
            let challenge = [("Proxy-Authenticate", "Basic realm=\"exitvoice broker\"")];
            let refusal = answer("407 Proxy Authentication Required", &challenge, &why);
            let _ = client.send(&refusal).await;
            return Err(Refused("credentials"));
        }
    };
    Ok(Request {
        client,
        spoke: Spoke::Http(head.ask),
        target: head.target,
        asked,
    })
}

/// The SOCKS5 greeting, credentials (judged, RFC 1929 failure when they fail) and request.
async fn read_socks<S: LeaseStore>(
    proxy: &Proxy<S>,
    mut client: Client,
    fixed: Option<&Asked>,
) -> Result<Request, Refused> {
    let socks = |error: SocksError| match error {
        SocksError::Io(_) => Refused("io"),
        SocksError::Protocol(_) => Refused("bad_request"),
        SocksError::NoMethod => Refused("credentials"),
        SocksError::Unsupported(_) => Refused("socks_unsupported"),
    };
    let (user, password) = socks5::credentials(&mut client).await.map_err(socks)?;
    let judged = proxy.judge(Some(&(user, password)), fixed);
    let admitted = judged.is_ok();
    socks5::answer_credentials(&mut client, admitted)
        .await
        .map_err(|_| Refused("io"))?;
    let Ok(asked) = judged else {
        return Err(Refused("credentials"));
    };
    let target = socks5::request(&mut client).await.map_err(socks)?;
    Ok(Request {
        client,
        spoke: Spoke::Socks,
        target,
        asked,
    })
}

/// Answers a request the broker granted no lease; the metrics' reason.
async fn refuse_lease(request: &mut Request, error: &BrokerError) -> &'static str {
    let (status, reply, reason, retry) = match error {
        BrokerError::Unavailable { retry_after_ms, .. } => (
            "503 Service Unavailable",
            Reply::GeneralFailure,
            "unavailable",
            Some(retry_after_ms.div_ceil(1000).max(1)),
        ),
        BrokerError::BadRequest(_) => (
            "407 Proxy Authentication Required",
            Reply::NotAllowed,
            "bad_lease_request",
            None,
        ),
        BrokerError::Refused(_) | BrokerError::Store(_) | BrokerError::Internal(_) => (
            "503 Service Unavailable",
            Reply::GeneralFailure,
            "broker_failed",
            Some(1),
        ),
    };
    let _ = match request.spoke {
        Spoke::Socks => socks5::answer(&mut request.client, reply).await,
        Spoke::Http(_) => {
            let retry = retry.map(|s| s.to_string());
            let fields: Vec<(&str, &str)> = retry
                .as_deref()
                .map(|s| ("Retry-After", s))
                .into_iter()
                .collect();
            let text = match error {
                // A store's failure stays in the broker's log.
                BrokerError::Store(_) | BrokerError::Internal(_) => {
                    "the broker could not reach its lease store".to_owned()
                }
                other => other.to_string(),
            };
            request.client.send(&answer(status, &fields, &text)).await
        }
    };
    reason
}

/// Answers a request whose exit failed the tunnel: `502` naming the class of error, or the
/// SOCKS5 reply that says the same.
async fn refuse_exit(request: &mut Request, class: ErrorClass) {
    let _ = match request.spoke {
        Spoke::Socks => {
            let reply = match class {
                ErrorClass::Timeout => Reply::TimedOut,
                ErrorClass::ProxyRefused | ErrorClass::ProxyAuth => Reply::Refused,
                _ => Reply::HostUnreachable,
            };
            socks5::answer(&mut request.client, reply).await
        }
        Spoke::Http(_) => {
            let fields = [("X-Exitvoice-Exit-Error", class.as_str())];
            let text = format!("the exit failed the tunnel: {}", class.as_str());
            request
                .client
                .send(&answer("502 Bad Gateway", &fields, &text))
                .await
        }
    };
}

/// An HTTP/1.1 answer that closes the connection.
fn answer(status: &str, fields: &[(&str, &str)], text: &str) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status}\r\n");
    for (name, value) in fields {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let body = format!("{text}\n");
    head.push_str(&format!(
        "Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    head.into_bytes()
}

/// Milliseconds of `duration`, saturating.
fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
