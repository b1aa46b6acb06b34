//! `exitvoice lease acquire|renew|release`: the broker's API for shell scripts. Prints the
//! broker's JSON answer on stdout; exits 0 on success, 3 when no exit was free (`503`), 4 when
//! the broker refused (`409`, `404`), 1 on anything else. The token comes from
//! `--broker-token` or `EXITVOICE_BROKER_TOKEN`; an `https://` broker's certificate is checked
//! against `--broker-ca` (the broker's own for a self-signed one).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use serde_json::json;

use super::shared::parse_duration;

/// `exitvoice lease`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The broker, `http://127.0.0.1:8490`.
    #[arg(
        long,
        value_name = "URL",
        env = "EXITVOICE_BROKER",
        default_value = "http://127.0.0.1:8490"
    )]
    broker: Uri,
    /// The broker's bearer token.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "EXITVOICE_BROKER_TOKEN",
        hide_env_values = true
    )]
    broker_token: Option<String>,
    /// PEM certificates an `https://` broker's chain must lead to.
    #[arg(long, value_name = "FILE", env = "EXITVOICE_BROKER_CA")]
    broker_ca: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: LeaseCommand,
}

#[derive(Debug, clap::Subcommand)]
enum LeaseCommand {
    /// Lease an exit: prints the lease (`lease_id`, `fence`, `proxy_url`, …).
    Acquire {
        /// `identity`, `anonymous` or `stateless`.
        #[arg(long)]
        class: String,
        /// Who holds it (a worker's name).
        #[arg(long)]
        holder: String,
        /// The task it serves: a task that holds a live lease gets it back.
        #[arg(long)]
        task: Option<String>,
        /// The origin it will talk to (bans are per exit and origin).
        #[arg(long)]
        origin: Option<String>,
        /// Its time to live.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        ttl: Option<Duration>,
        /// How long to wait for a free exit.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        wait: Option<Duration>,
        /// Check the address the exit leaves from, at the exits file's echo server.
        #[arg(long)]
        egress: bool,
        /// Only an exit of this country (two letters, e.g. `DE`).
        #[arg(long)]
        country: Option<String>,
        /// Only an exit whose measured round-trip gap (its label's smallest) is at most this
        /// many ms; an exit never measured does not serve.
        #[arg(long, value_name = "MS")]
        max_gap_ms: Option<u64>,
    },
    /// Extend a lease.
    Renew {
        /// The lease id.
        id: String,
        /// The lease's fence.
        #[arg(long)]
        fence: i64,
        /// Its new time to live.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        ttl: Option<Duration>,
    },
    /// Release a lease with its outcome: `ok`, an HTTP status, `captcha`, `timeout`, `error`.
    Release {
        /// The lease id.
        id: String,
        /// The lease's fence.
        #[arg(long)]
        fence: i64,
        /// What the work through the exit got.
        #[arg(long)]
        outcome: String,
        /// How long it took, ms.
        #[arg(long)]
        latency_ms: Option<u64>,
    },
    /// Report a task's outcome (a task the forward proxy serves): ends the task's lease with it,
    /// and closes its tunnels.
    Report {
        /// The task (the `task-…` of the proxy user name).
        task: String,
        /// What the work got: `ok`, an HTTP status, `captcha`, `timeout`, `error`.
        #[arg(long)]
        outcome: String,
        /// How long it took, ms.
        #[arg(long)]
        latency_ms: Option<u64>,
    },
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Runs `exitvoice lease …`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (method, path, body) = match &args.command {
        LeaseCommand::Acquire {
            class,
            holder,
            task,
            origin,
            ttl,
            wait,
            egress,
            country,
            max_gap_ms,
        } => (
            Method::POST,
            "/v1/leases".to_owned(),
            Some(json!({
                "class": class, "holder": holder, "task": task, "origin": origin,
                "ttl_ms": ttl.map(millis), "wait_ms": wait.map(millis), "egress": egress,
                "country": country, "max_gap_ms": max_gap_ms,
            })),
        ),
        LeaseCommand::Renew { id, fence, ttl } => (
            Method::POST,
            format!("/v1/leases/{}/renew", encode(id)),
            Some(json!({ "fence": fence, "ttl_ms": ttl.map(millis) })),
        ),
        LeaseCommand::Release {
            id,
            fence,
            outcome,
            latency_ms,
        } => {
            let mut path = format!(
                "/v1/leases/{}?fence={fence}&outcome={}",
                encode(id),
                encode(outcome)
            );
            if let Some(ms) = latency_ms {
                path.push_str(&format!("&latency_ms={ms}"));
            }
            (Method::DELETE, path, None)
        }
        LeaseCommand::Report {
            task,
            outcome,
            latency_ms,
        } => (
            Method::POST,
            format!("/v1/tasks/{}/outcome", encode(task)),
            Some(json!({ "outcome": outcome, "latency_ms": latency_ms })),
        ),
    };
    let (status, answer) = call(&args, method, &path, body).await?;
    println!("{answer}");
    Ok(match status {
        s if s.is_success() => ExitCode::SUCCESS,
        StatusCode::SERVICE_UNAVAILABLE => ExitCode::from(3),
        StatusCode::CONFLICT | StatusCode::NOT_FOUND => ExitCode::from(4),
        _ => ExitCode::FAILURE,
    })
}

/// Percent-encodes a path segment or query value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One HTTP/1.1 request to the broker; its status and body.
async fn call(
    args: &Args,
    method: Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> anyhow::Result<(StatusCode, String)> {
    let broker = &args.broker;
    let host = broker.host().context("--broker has no host")?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let https = match broker.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => bail!("--broker must be an http:// or https:// URL"),
    };
    let port = broker.port_u16().unwrap_or(if https { 443 } else { 80 });
    let stream = tokio::net::TcpStream::connect((bare, port))
        .await
        .with_context(|| format!("connecting to the broker at {host}:{port}"))?;
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", broker.authority().map_or(host, |a| a.as_str()));
    if let Some(token) = &args.broker_token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let bytes = match body {
        Some(body) => {
            request = request.header("content-type", "application/json");
            Bytes::from(body.to_string())
        }
        None => Bytes::new(),
    };
    let request = request.body(Full::new(bytes))?;
    if !https {
        return send(stream, request).await;
    }
    let ca = args
        .broker_ca
        .as_deref()
        .context("an https:// broker needs --broker-ca (its certificate, or the CA's)")?;
    let mut roots = rustls::RootCertStore::empty();
    let certs = rustls::pki_types::CertificateDer::pem_file_iter(ca)
        .with_context(|| format!("reading {}", ca.display()))?;
    for cert in certs {
        roots.add(cert.with_context(|| format!("reading {}", ca.display()))?)?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(bare.to_owned())?;
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, stream)
        .await
        .context("TLS to the broker")?;
    send(tls, request).await
}

async fn send<T>(stream: T, request: Request<Full<Bytes>>) -> anyhow::Result<(StatusCode, String)>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}
