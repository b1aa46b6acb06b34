//! Probe the echo server once through one exit and print what the echo saw.
//!
//! Run with:
//! `cargo run -p exitvoice-auditor --example probe_one -- http://u:pw@127.0.0.1:3128 https://localhost:8443 sha256//…`
//! (the pin as `exitvoice serve` prints it; `direct` instead of a proxy URL probes without an exit).
#![allow(clippy::print_stdout)]

use exitvoice_auditor::probe::{self, H2Profile};
use exitvoice_exits::dial::Timeouts;
use exitvoice_exits::{EchoTarget, Exit, ProxyUrl};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [proxy, echo_url, pin] = args.as_slice() else {
        return Err("usage: probe_one <proxy-url|direct> <echo-url> <pin>".into());
    };
    let exit = match proxy.as_str() {
        "direct" => None,
        url => Some(Exit::new("cli", ProxyUrl::parse(url)?)),
    };
    let echo = EchoTarget::new(echo_url, pin)?;
    let token = probe::new_token();
    let outcome = probe::probe(
        exit.as_ref(),
        &echo,
        &H2Profile::chrome(),
        &token,
        &Timeouts::default(),
    )
    .await?;
    println!(
        "alpn {:?}, pinned certificate: {}, latency {:?}",
        outcome.alpn,
        outcome.cert.as_ref().is_some_and(|c| c.pinned),
        outcome.latency
    );
    println!("{}", serde_json::to_string_pretty(&outcome.echo)?);
    Ok(())
}
