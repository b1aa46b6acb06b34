//! Dialers against real proxies on loopback: squid (Basic auth), tinyproxy, dante (SOCKS5).
//!
//! Each test tunnels to a TCP echo listener on 127.0.0.1 and checks the bytes come back, or
//! checks the error class of a failure. Needs root and the packages squid, apache2-utils,
//! tinyproxy, dante-server (installed by scripts/install-test-deps.sh).

mod support;

use std::time::{Duration, Instant};

use exitvoice_exits::dial::{dial, Timeouts};
use exitvoice_exits::error::{ErrorClass, Phase, ProbeError};
use exitvoice_exits::{Exit, ProxyUrl};
use support::{Proxy, PASSWORD, PASSWORD_ENCODED, SOCKS_USER, TINY_PASSWORD, USER};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn exit(url: &str) -> Exit {
    Exit::new("test", ProxyUrl::parse(url).expect("proxy url"))
}

async fn roundtrip(exit: &Exit, port: u16) {
    let mut stream = dial(Some(exit), "127.0.0.1", port, &Timeouts::default())
        .await
        .unwrap_or_else(|e| panic!("dial through {}: {e}", exit.proxy));
    stream.write_all(b"exitvoice ping").await.unwrap();
    let mut back = [0u8; 14];
    stream.read_exact(&mut back).await.unwrap();
    assert_eq!(&back, b"exitvoice ping");
}

async fn failure(exit: &Exit, host: &str, port: u16, timeouts: &Timeouts) -> ProbeError {
    match dial(Some(exit), host, port, timeouts).await {
        Ok(_) => panic!("dial through {} succeeded", exit.proxy),
        Err(error) => {
            assert!(!error.to_string().contains(PASSWORD), "{error}");
            error
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn squid_basic_auth_tunnel_and_failures() {
    let squid = Proxy::squid();
    let target = support::tcp_echo::listener().await;
    let good = exit(&format!(
        "http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}",
        squid.port
    ));
    roundtrip(&good, target).await;

    let wrong = exit(&format!("http://{USER}:wrong@127.0.0.1:{}", squid.port));
    let error = failure(&wrong, "127.0.0.1", target, &Timeouts::default()).await;
    assert_eq!(error.class(), ErrorClass::ProxyAuth, "{error}");

    let none = exit(&format!("http://127.0.0.1:{}", squid.port));
    let error = failure(&none, "127.0.0.1", target, &Timeouts::default()).await;
    assert_eq!(error.class(), ErrorClass::ProxyAuth, "{error}");

    // squid answers CONNECT to a closed port with an error status: proxy_refused.
    let (_closed, closed) = support::closed_port();
    let error = failure(&good, "127.0.0.1", closed, &Timeouts::default()).await;
    assert!(
        matches!(error, ProbeError::ConnectStatus { status } if status >= 400),
        "{error}"
    );
    assert_eq!(error.class(), ErrorClass::ProxyRefused);
}

#[tokio::test(flavor = "multi_thread")]
async fn tinyproxy_with_and_without_auth() {
    let open = Proxy::tinyproxy();
    let authed = Proxy::tinyproxy_auth();
    let target = support::tcp_echo::listener().await;
    roundtrip(&exit(&format!("http://127.0.0.1:{}", open.port)), target).await;
    roundtrip(
        &exit(&format!(
            "http://{USER}:{TINY_PASSWORD}@127.0.0.1:{}",
            authed.port
        )),
        target,
    )
    .await;
    let wrong = exit(&format!("http://{USER}:nope@127.0.0.1:{}", authed.port));
    let error = failure(&wrong, "127.0.0.1", target, &Timeouts::default()).await;
    assert_eq!(error.class(), ErrorClass::ProxyAuth, "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn dante_socks5_username_password() {
    let dante = Proxy::dante();
    let target = support::tcp_echo::listener().await;
    // socks5h: the proxy resolves the name.
    roundtrip(
        &exit(&format!(
            "socks5h://{SOCKS_USER}:{PASSWORD_ENCODED}@127.0.0.1:{}",
            dante.port
        )),
        target,
    )
    .await;
    roundtrip(
        &exit(&format!(
            "socks5://{SOCKS_USER}:{PASSWORD_ENCODED}@127.0.0.1:{}",
            dante.port
        )),
        target,
    )
    .await;
    let socks5h = exit(&format!(
        "socks5h://{SOCKS_USER}:{PASSWORD_ENCODED}@127.0.0.1:{}",
        dante.port
    ));
    let mut stream = dial(Some(&socks5h), "localhost", target, &Timeouts::default())
        .await
        .expect("socks5h with a name");
    stream.write_all(b"x").await.unwrap();
    let mut one = [0u8; 1];
    stream.read_exact(&mut one).await.unwrap();
    assert_eq!(&one, b"x");

    let wrong = exit(&format!(
        "socks5h://{SOCKS_USER}:wrong@127.0.0.1:{}",
        dante.port
    ));
    let error = failure(&wrong, "127.0.0.1", target, &Timeouts::default()).await;
    assert_eq!(error.class(), ErrorClass::ProxyAuth, "{error}");

    let none = exit(&format!("socks5h://127.0.0.1:{}", dante.port));
    let error = failure(&none, "127.0.0.1", target, &Timeouts::default()).await;
    assert_eq!(error.class(), ErrorClass::ProxyAuth, "{error}");

    // A target that refuses: SOCKS5 reply code (RFC 1928 section 6), class proxy_refused.
    let good = exit(&format!(
        "socks5h://{SOCKS_USER}:{PASSWORD_ENCODED}@127.0.0.1:{}",
        dante.port
    ));
    let (_closed, closed) = support::closed_port();
    let error = failure(&good, "127.0.0.1", closed, &Timeouts::default()).await;
    assert!(matches!(error, ProbeError::SocksReply { .. }), "{error}");
    assert_eq!(error.class(), ErrorClass::ProxyRefused);
}

#[tokio::test]
async fn closed_proxy_port_is_connect_refused() {
    let (_closed, port) = support::closed_port();
    for scheme in ["http", "socks5h"] {
        let error = failure(
            &exit(&format!("{scheme}://u:{PASSWORD_ENCODED}@127.0.0.1:{port}")),
            "127.0.0.1",
            443,
            &Timeouts::default(),
        )
        .await;
        assert_eq!(error.class(), ErrorClass::ConnectRefused, "{error}");
    }
}

#[tokio::test]
async fn silent_proxy_times_out_in_the_tunnel_phase() {
    // Accepts and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let timeouts = Timeouts {
        tunnel: Duration::from_millis(600),
        ..Timeouts::default()
    };
    for scheme in ["http", "socks5h"] {
        let started = Instant::now();
        let error = failure(
            &exit(&format!("{scheme}://u:{PASSWORD_ENCODED}@127.0.0.1:{port}")),
            "127.0.0.1",
            443,
            &timeouts,
        )
        .await;
        assert_eq!(error.class(), ErrorClass::Timeout, "{error}");
        assert_eq!(error.phase(), Some(Phase::Tunnel));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "hung past the limit"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn https_proxy_tls_then_connect() {
    // haproxy terminates TLS (a certificate for localhost) in front of squid.
    let squid = Proxy::squid();
    let pki = tempfile::tempdir().unwrap();
    let own = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let ca = pki.path().join("proxy-ca.pem");
    std::fs::write(&ca, own.cert.pem()).unwrap();
    let combined = pki.path().join("proxy.pem");
    std::fs::write(&combined, own.cert.pem() + &own.signing_key.serialize_pem()).unwrap();
    let front = Proxy::start(
        "haproxy-tls",
        &[combined.to_str().unwrap(), &squid.port.to_string()],
    );
    let target = support::tcp_echo::listener().await;
    let url = format!("https://{USER}:{PASSWORD_ENCODED}@localhost:{}", front.port);
    let mut trusted = exit(&url);
    trusted.proxy_ca = Some(ca.clone());
    roundtrip(&trusted, target).await;

    let mut wrong = exit(&format!("https://{USER}:bad@localhost:{}", front.port));
    wrong.proxy_ca = Some(ca);
    let error = failure(&wrong, "127.0.0.1", target, &Timeouts::default()).await;
    assert_eq!(error.class(), ErrorClass::ProxyAuth, "{error}");

    // Without the proxy's CA (system bundle only) the proxy's certificate is refused.
    let untrusted = exit(&url);
    let error = failure(&untrusted, "127.0.0.1", target, &Timeouts::default()).await;
    assert!(matches!(error, ProbeError::ProxyTls(_)), "{error}");
}
