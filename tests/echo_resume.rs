//! Session tickets, as a real origin issues them: a rustls client that connects twice with one
//! configuration resumes on the second connection, and the echo says the hello tried to resume.
//! Also: the server listens on IPv6 loopback when asked.
//!
//! Run with `cargo test --test echo_resume`; needs curl (scripts/install-test-deps.sh).

mod echo_support;

use echo_support::{
    client_config, curl, http1_body, http1_request, json_stream, tls_connect, EchoServer,
};

#[tokio::test]
async fn second_connection_resumes_with_a_ticket_and_the_echo_says_so() {
    let server = EchoServer::start(&[]);
    let config = client_config(&server.cert_pem(), &[b"http/1.1"]);

    let mut first = tls_connect(server.port, std::sync::Arc::clone(&config))
        .await
        .expect("first handshake");
    let echo = http1_body(&http1_request(&mut first, "/api/tls").await);
    assert_eq!(echo["tls"]["resumed"], false);
    let fresh_voice = echo["tls"]["voice_id"].clone();
    assert!(fresh_voice.is_string());

    let mut second = tls_connect(server.port, config)
        .await
        .expect("second handshake");
    let (_, session) = second.get_ref();
    assert_eq!(
        session.handshake_kind(),
        Some(rustls::HandshakeKind::Resumed),
        "the server issued a ticket and accepted it"
    );
    let echo = http1_body(&http1_request(&mut second, "/api/tls").await);
    assert_eq!(echo["tls"]["resumed"], true, "{echo}");
    // The hello changed shape (pre_shared_key in, session_ticket out), and the echo shows it.
    let names = |echo: &serde_json::Value| -> Vec<String> {
        echo["tls"]["detail"]["extensions"]
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|e| e["type"]["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(
        names(&echo).contains(&"pre_shared_key".to_owned()),
        "{echo}"
    );
    // …and yet it is the same stack: the voice ignores resumption (docs/voice-tls.md).
    assert_eq!(echo["tls"]["voice_id"], fresh_voice, "{echo}");
}

#[tokio::test]
async fn listens_on_ipv6_loopback_too() {
    let server = EchoServer::start(&["--listen", "[::1]:0"]);
    let v6 = server
        .addrs
        .iter()
        .find(|addr| addr.is_ipv6())
        .expect("an IPv6 listener");
    let out = curl(&[
        "-sk",
        "--http2",
        &format!("https://[::1]:{}/api/all", v6.port()),
    ]);
    assert!(out.status.success(), "{out:?}");
    let echo = &json_stream(&out.stdout)[0];
    assert_eq!(echo["peer"]["ip"], "::1");
    assert_eq!(echo["alpn"]["spoken"], "h2");
}
