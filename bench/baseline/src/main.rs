//! `baseline-echo`: the bare TLS echo that `scripts/bench.sh` measures exitvoice against.
//!
//! rustls (aws-lc-rs) with ALPN `h2` and `http/1.1`, and hyper-util's auto server (HTTP/1.1 and
//! HTTP/2 with hyper's defaults), answering every request with `{"ok":true}`. No capture, no
//! parsing, no store: the least a Rust TLS + HTTP/2 server does per connection and per request.

use std::sync::Arc;

use bytes::Bytes;
use clap::Parser;
use exitvoice_baseline::{json, tls_config, Serving, OK};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Flags of `baseline-echo`.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    serving: Serving,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Args { serving } = Args::parse();
    let acceptor = TlsAcceptor::from(Arc::new(tls_config(&serving.cert, &serving.key)?));
    let listener = TcpListener::bind(serving.listen).await?;
    println!(
        "baseline-echo: listening on https://{}",
        listener.local_addr()?
    );
    let server = Arc::new(auto::Builder::new(TokioExecutor::new()));
    loop {
        let (tcp, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, most likely: back off instead of spinning.
                eprintln!("baseline-echo: accept: {error}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // `TCP_NODELAY`, as exitvoice sets it (capture/connection.rs), so that both servers send
        // the same segments. Under Nagle's algorithm the kernel holds a small answer back while
        // an earlier one is unacknowledged and sends them together, and on loopback every
        // segment's receive path runs inside the sender's system call: that would measure
        // Nagle's algorithm, not exitvoice's work (docs/benchmarks.md).
        let _ = tcp.set_nodelay(true);
        let (acceptor, server) = (acceptor.clone(), Arc::clone(&server));
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let _ = server
                .serve_connection(
                    TokioIo::new(tls),
                    service_fn(|_| async { json(Bytes::from_static(OK)) }),
                )
                .await;
        });
    }
}
