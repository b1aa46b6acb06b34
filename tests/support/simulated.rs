//! Many exits in the test's own process (`exitvoice-exitsim`, real tunnels on loopback) and an
//! echo server that takes all of their probes: every probe comes from 127.0.0.1, so the echo's
//! per-source limits are lifted.

use std::path::{Path, PathBuf};

use exitvoice_exitsim::{exits_file, Simulator};

use super::EchoServer;

/// `exitvoice serve` flags that lift the per-source limits.
pub const UNLIMITED: [&str; 8] = [
    "--per-ip-rate",
    "0",
    "--per-ip-connections",
    "100000",
    "--max-connections",
    "100000",
    "--penalty-strikes",
    "0",
];

/// An echo server without per-source limits, on `database` (see [`EchoServer::start_on`]).
pub fn unlimited_echo(database: Option<&str>) -> EchoServer {
    EchoServer::start_on(database, &UNLIMITED)
}

/// `exits` simulated exits with one password on an HTTP `CONNECT` port and, with `socks`, a
/// SOCKS5 port too, served on `runtime`.
pub fn simulator(
    runtime: &tokio::runtime::Runtime,
    exits: usize,
    password: &str,
    socks: bool,
) -> Simulator {
    let loopback = || "127.0.0.1:0".parse().expect("an address");
    runtime
        .block_on(Simulator::start(
            exits,
            password.to_owned(),
            loopback(),
            socks.then(loopback),
        ))
        .expect("start the exit simulator")
}

/// Writes `path`: an exits file for `echo` with `exits` exits of `sim`, named `<prefix>sim-N`.
pub fn exits_file(
    path: &Path,
    prefix: &str,
    exits: usize,
    sim: &Simulator,
    password: &str,
    echo: &EchoServer,
) -> PathBuf {
    let mut text = Vec::new();
    exits_file::write(
        &mut text,
        &exits_file::Spec {
            exits,
            http: Some(sim.http),
            socks: sim.socks,
            password,
            echo_url: &format!("https://127.0.0.1:{}", echo.port),
            echo_pin: &echo.pin,
        },
    )
    .expect("exits file");
    let text = String::from_utf8(text)
        .expect("UTF-8")
        .replace("name = \"sim-", &format!("name = \"{prefix}sim-"));
    std::fs::write(path, text).expect("write the exits file");
    path.to_owned()
}
