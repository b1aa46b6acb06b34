//! The world of the broker's forward-proxy tests (`tests/broker_proxy.rs`,
//! `tests/broker_proxy_examples.rs`): simulated exits (`bench/exitsim`) audited for real labels
//! against an echo server, and a broker with two proxy listeners.

use std::net::SocketAddr;
use std::process::Command;

use exitvoice_exitsim::Simulator;

use super::broker::Broker;
use super::{simulated, EchoServer};

/// The broker's token: the proxy's password.
pub const TOKEN: &str = "proxy-test-token-0123456789";
/// Every simulated exit's password.
pub const PASSWORD: &str = "exit-secret-pw-4711";
/// Simulated exits.
pub const EXITS: usize = 3;

/// Simulated exits with real labels, an echo server, and a broker with two proxy listeners:
/// one that asks for credentials, and one that leases a fixed task to clients that send none.
pub struct World {
    /// Serves the simulated exits and any helper server a test starts.
    pub runtime: tokio::runtime::Runtime,
    /// The simulated exits.
    pub sim: Simulator,
    /// The origin the exits were audited against.
    pub echo: EchoServer,
    /// The broker: `proxies[0]` asks for credentials, `proxies[1]` has a fixed lease.
    pub broker: Broker,
    _dir: tempfile::TempDir,
}

impl World {
    /// The world with an echo server on a generated certificate, and `extra` broker flags.
    pub fn start(extra: &[&str]) -> Self {
        Self::start_on(&[], extra)
    }

    /// The world with `echo_flags` for the echo server (`--cert`, `--key`), and `extra`
    /// broker flags.
    pub fn start_on(echo_flags: &[&str], extra: &[&str]) -> Self {
        Self::start_labelled(echo_flags, extra, &[])
    }

    /// [`World::start_on`] with the exits' round-trip gaps in the labels the broker reads set
    /// as `gaps` says ([`super::broker::set_gaps`]).
    pub fn start_labelled(
        echo_flags: &[&str],
        extra: &[&str],
        gaps: &[(&str, Option<u32>)],
    ) -> Self {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let sim = simulated::simulator(&runtime, EXITS, PASSWORD, true);
        let mut flags = simulated::UNLIMITED.to_vec();
        flags.extend_from_slice(echo_flags);
        let echo = EchoServer::start_on(None, &flags);
        let dir = tempfile::tempdir().unwrap();
        let exits = simulated::exits_file(
            &dir.path().join("exits.toml"),
            "",
            EXITS,
            &sim,
            PASSWORD,
            &echo,
        );
        let database = dir.path().join("broker.db").to_string_lossy().into_owned();
        super::broker::audit(&exits, &database);
        if !gaps.is_empty() {
            super::broker::set_gaps(&database, gaps);
        }
        let mut args = vec![
            "--proxy-listen",
            "127.0.0.1:0",
            "--proxy-listen",
            "127.0.0.1:0=class-anonymous-task-browser",
        ];
        args.extend_from_slice(extra);
        let broker = Broker::start(&exits, &database, TOKEN, &args);
        assert_eq!(broker.proxies.len(), 2, "two proxy listeners");
        Self {
            runtime,
            sim,
            echo,
            broker,
            _dir: dir,
        }
    }

    /// The proxy listener that asks for credentials.
    pub fn proxy(&self) -> SocketAddr {
        self.broker.proxies[0]
    }

    /// The echo server's URL at `path`.
    pub fn echo_url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.echo.port)
    }

    /// `GET` of the broker's API at `path`.
    pub fn api(&self, path: &str) -> serde_json::Value {
        let out = Command::new("curl")
            .args(["-sf", "-H", &format!("Authorization: Bearer {TOKEN}")])
            .arg(format!("{}{path}", self.broker.url))
            .output()
            .unwrap();
        assert!(out.status.success(), "GET {path}");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The broker's `/metrics` text.
    pub fn metrics(&self) -> String {
        let out = Command::new("curl")
            .args(["-sf", "-H", &format!("Authorization: Bearer {TOKEN}")])
            .arg(format!("{}/metrics", self.broker.url))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Leases granted so far, over every exit (each grant takes its exit's next fence).
    pub fn served(&self) -> i64 {
        self.api("/v1/exits")["exits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|exit| exit["leases_served"].as_i64().unwrap())
            .sum()
    }

    /// Live leases over every exit.
    pub fn live(&self) -> usize {
        self.api("/v1/exits")["exits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|exit| exit["holders"].as_array().unwrap().len())
            .sum()
    }

    /// `POST /v1/tasks/{task}/outcome`: the status code.
    pub fn report(&self, task: &str, outcome: &str) -> String {
        let out = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
            .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
            .args(["-H", "Content-Type: application/json"])
            .args(["-d", &format!("{{\"outcome\":\"{outcome}\"}}")])
            .arg(format!("{}/v1/tasks/{task}/outcome", self.broker.url))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The barest `CONNECT` proxy: no credentials, reads the request head, dials the target,
    /// answers `200` and copies bytes both ways.
    pub fn bare_connect_proxy(&self) -> SocketAddr {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        self.runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            tokio::spawn(async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        let mut head = Vec::new();
                        let mut byte = [0; 1];
                        while !head.ends_with(b"\r\n\r\n") {
                            if client.read(&mut byte).await.unwrap_or(0) == 0 {
                                return;
                            }
                            head.push(byte[0]);
                        }
                        let head = String::from_utf8_lossy(&head).into_owned();
                        let Some(target) = head.strip_prefix("CONNECT ") else {
                            return;
                        };
                        let target = target.split_whitespace().next().unwrap_or_default();
                        let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await else {
                            return;
                        };
                        let answered = client
                            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                            .await;
                        if answered.is_ok() {
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                        }
                    });
                }
            });
            address
        })
    }

    /// A plain-http origin that answers each request with its own head, as received.
    pub fn http_origin(&self) -> u16 {
        self.http_origin_answering("200 OK")
    }

    /// A plain-http origin that answers each request with `status` (`429 Too Many Requests`)
    /// and the request's own head, as received.
    pub fn http_origin_answering(&self, status: &'static str) -> u16 {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        self.runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            tokio::spawn(async move {
                while let Ok((mut socket, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        let mut head = Vec::new();
                        let mut byte = [0; 1];
                        while !head.ends_with(b"\r\n\r\n") {
                            if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                                return;
                            }
                            head.push(byte[0]);
                        }
                        let answer = format!(
                            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            head.len()
                        );
                        let _ = socket.write_all(answer.as_bytes()).await;
                        let _ = socket.write_all(&head).await;
                    });
                }
            });
            port
        })
    }
}
