//! A probe that runs out of time says in which phase: the connect phase when the exit never
//! answers the SYN, the response phase when the echo completes TLS and then stays silent (the
//! tunnel phase is in `audit_dial.rs`, the TLS phase in the scheduler's unit tests). Routers read
//! the phase to tell a dead exit from a slow echo. A name that does not resolve is its own class,
//! `dns`. Loopback only: the unresolvable name has an empty label, which glibc refuses without
//! sending a query.

use std::sync::Arc;
use std::time::{Duration, Instant};

use exitvoice_auditor::probe::{new_token, probe, H2Profile};
use exitvoice_exits::dial::Timeouts;
use exitvoice_exits::error::{ErrorClass, Phase, ProbeError};
use exitvoice_exits::{EchoTarget, Exit, ProxyUrl};

/// The limit of the phase under test; the others keep their defaults (5 s and more).
const LIMIT: Duration = Duration::from_millis(300);

/// The smallest default limit (5 s today). The phase says which limit fired; staying under this
/// says it was the configured one, not a default: 300 ms against 5 s leaves room for any load.
fn default_floor() -> Duration {
    let d = Timeouts::default();
    d.connect.min(d.tunnel).min(d.tls).min(d.response)
}

fn echo_at(port: u16) -> EchoTarget {
    EchoTarget {
        host: "localhost".to_owned(),
        port,
        // The probe records whether the key matches and goes on either way.
        spki_sha256: [0; 32],
    }
}

/// Probes `echo` (through `exit`, if any) with `timeouts` and expects a timeout of `phase`, at
/// [`LIMIT`], well before the other limits could fire.
async fn expect_timeout(
    exit: Option<&Exit>,
    echo: &EchoTarget,
    timeouts: &Timeouts,
    phase: Phase,
) -> ProbeError {
    let started = Instant::now();
    let result = probe(exit, echo, &H2Profile::chrome(), &new_token(), timeouts).await;
    let elapsed = started.elapsed();
    let error = match result {
        Ok(outcome) => panic!("probe succeeded: {:?}", outcome.alpn),
        Err(error) => error,
    };
    assert_eq!(error.class(), ErrorClass::Timeout, "{error}");
    assert_eq!(error.phase(), Some(phase), "{error}");
    // Timers never fire early.
    assert!(
        elapsed >= LIMIT && elapsed < default_floor(),
        "timed out after {elapsed:?}"
    );
    error
}

/// A listener with a one-place accept queue that is never drained: once one connection waits in
/// it, the kernel drops further SYNs (a full accept queue, `ListenOverflows`), so a connect hangs
/// as it does towards a dead or filtered exit.
async fn deaf_listener() -> (tokio::net::TcpListener, tokio::net::TcpStream) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let port = listener.local_addr().unwrap().port();
    let filler = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    (listener, filler)
}

#[tokio::test]
async fn unanswered_syn_is_a_connect_phase_timeout() {
    let (listener, _filler) = deaf_listener().await;
    let port = listener.local_addr().unwrap().port();
    let timeouts = Timeouts {
        connect: LIMIT,
        ..Timeouts::default()
    };
    // Directly (the baseline probe) and through a proxy exit at that address.
    expect_timeout(None, &echo_at(port), &timeouts, Phase::Connect).await;
    for scheme in ["http", "socks5h"] {
        let exit = Exit::new(
            "deaf",
            ProxyUrl::parse(&format!("{scheme}://127.0.0.1:{port}")).unwrap(),
        );
        expect_timeout(Some(&exit), &echo_at(443), &timeouts, Phase::Connect).await;
    }
}

/// A TLS server for `localhost` offering `alpn` that completes every handshake, reads what the
/// client sends and never answers.
async fn mute_tls_server(alpn: &'static [u8]) -> u16 {
    let own = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::try_from(own.signing_key.serialize_der()).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![own.cert.der().clone()], key)
    .unwrap();
    config.alpn_protocols = vec![alpn.to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                if let Ok(mut tls) = acceptor.accept(socket).await {
                    let mut sink = [0u8; 4096];
                    while matches!(tls.read(&mut sink).await, Ok(n) if n > 0) {}
                }
            });
        }
    });
    port
}

#[tokio::test]
async fn silent_echo_after_tls_is_a_response_phase_timeout() {
    let timeouts = Timeouts {
        response: LIMIT,
        ..Timeouts::default()
    };
    for alpn in [b"h2".as_slice(), b"http/1.1"] {
        let port = mute_tls_server(alpn).await;
        let error = expect_timeout(None, &echo_at(port), &timeouts, Phase::Response).await;
        assert!(error.to_string().contains("response"), "{error}");
    }
}

/// Not a valid DNS name (an empty label): the resolver fails it at once, without a query.
const UNRESOLVABLE: &str = "exitvoice..invalid";

#[tokio::test]
async fn unresolvable_names_are_dns_errors() {
    let dns = |error: ProbeError| {
        assert_eq!(error.class(), ErrorClass::Dns, "{error}");
        assert!(error.to_string().contains(UNRESOLVABLE), "{error}");
    };
    let run = |exit: Option<Exit>, echo: EchoTarget| async move {
        let started = Instant::now();
        let result = probe(
            exit.as_ref(),
            &echo,
            &H2Profile::chrome(),
            &new_token(),
            &Timeouts::default(),
        )
        .await;
        // A name that does not resolve fails at once; a probe that went on would wait for a
        // limit.
        assert!(started.elapsed() < default_floor(), "slow failure");
        match result {
            Ok(_) => panic!("probe succeeded"),
            Err(error) => error,
        }
    };
    let unresolvable_echo = EchoTarget {
        host: UNRESOLVABLE.to_owned(),
        ..echo_at(443)
    };
    // The echo's name, probed directly.
    dns(run(None, unresolvable_echo.clone()).await);
    // The exit's own name.
    let exit = Exit::new(
        "unresolvable",
        ProxyUrl::parse(&format!("http://{UNRESOLVABLE}:3128")).unwrap(),
    );
    dns(run(Some(exit), echo_at(443)).await);
    // socks5 (not socks5h) resolves the echo's name on the auditor's side, after connecting to
    // the proxy (here a listener that never answers).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let exit = Exit::new(
        "local-resolution",
        ProxyUrl::parse(&format!("socks5://127.0.0.1:{port}")).unwrap(),
    );
    dns(run(Some(exit), unresolvable_echo).await);
}
