//! The exit host's own voice: the echo reads each TCP connection's SYN back from
//! the kernel (`TCP_SAVED_SYN`) and reports it in `/api/all`'s `tcp`, stores it with the
//! connection, and says why when there is none.
//!
//! Expected values come from outside the project: the socket options the test sets on its own
//! client sockets (`IP_TTL` 37, `TCP_MAXSEG` 1200, IPv6 hop limit 41), and, for everything the
//! kernel chose, tshark's dissection of a dumpcap capture of the same connections and
//! `p0f -r`'s `raw_sig` of the same SYNs. Needs dumpcap, tshark, p0f, haproxy and root for the
//! capture on `lo` (scripts/install-test-deps.sh).

mod echo_support;
mod support;
mod syn_support;

use std::net::SocketAddr;

use echo_support::{client_config, http1_body, http1_request, EchoServer};
use rustls::pki_types::ServerName;
use serde_json::Value;
use socket2::{Domain, Protocol, Socket, Type};
use support::Proxy;
use syn_support::{p0f_os_names, p0f_signatures, tshark_syns, Capture, TsharkSyn};
use tokio::net::TcpStream;

/// The TTL the IPv4 client sets (`IP_TTL`), an initial TTL no stack uses by default.
const CLIENT_TTL: u32 = 37;
/// The hop limit the IPv6 client sets (`IPV6_UNICAST_HOPS`).
const CLIENT_HOPS: u32 = 41;
/// The MSS both clients set (`TCP_MAXSEG`), below loopback's 65,495.
const CLIENT_MSS: u32 = 1200;

/// Connects to `server` with a socket whose TTL (or hop limit) and MSS are set, and returns
/// the client's port and the `/api/all` echo of one HTTP/1.1 request.
async fn echo_from_tuned_socket(server: &EchoServer, addr: SocketAddr) -> (u16, Value) {
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).expect("socket");
    if addr.is_ipv4() {
        socket.set_ttl_v4(CLIENT_TTL).expect("IP_TTL");
    } else {
        socket
            .set_unicast_hops_v6(CLIENT_HOPS)
            .expect("IPV6_UNICAST_HOPS");
    }
    socket.set_tcp_mss(CLIENT_MSS).expect("TCP_MAXSEG");
    socket.connect(&addr.into()).expect("connect");
    socket.set_nonblocking(true).expect("nonblocking");
    let tcp = TcpStream::from_std(socket.into()).expect("tokio stream");
    let port = tcp.local_addr().expect("local address").port();
    let config = client_config(&server.cert_pem(), &[b"http/1.1"]);
    let name = ServerName::try_from("localhost").expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .expect("TLS");
    let response = http1_request(&mut tls, &format!("/api/all?token=syn-{port}")).await;
    (port, http1_body(&response))
}

/// The echo's `tcp` says what tshark read of the same SYN.
fn assert_agrees_with_tshark(tcp: &Value, syn: &TsharkSyn) {
    assert_eq!(tcp["ttl"], syn.ttl, "{tcp}");
    assert_eq!(tcp["df"], syn.df, "{tcp}");
    assert_eq!(tcp["window"], syn.window, "{tcp}");
    assert_eq!(tcp["mss"], serde_json::json!(syn.mss), "{tcp}");
    assert_eq!(
        tcp["window_scale"],
        serde_json::json!(syn.window_scale),
        "{tcp}"
    );
    assert_eq!(tcp["options"], serde_json::json!(syn.option_kinds), "{tcp}");
    assert_eq!(
        tcp["sack_permitted"],
        syn.option_kinds.contains(&4),
        "SACK permitted is kind 4: {tcp}"
    );
    assert_eq!(tcp["timestamps"], syn.option_kinds.contains(&8), "{tcp}");
}

#[tokio::test]
async fn the_syn_of_a_tuned_client_socket_is_echoed_as_tshark_and_p0f_read_it() {
    let server = EchoServer::start(&[
        "--listen",
        "[::1]:0",
        "--no-quic",
        "--p0f-db",
        "/etc/p0f/p0f.fp",
    ]);
    let v4 = server.addrs[0];
    let v6 = *server.addrs.get(1).expect("the [::1] listener");
    let capture = Capture::start(&[v4.port(), v6.port()]);
    let (port4, echo4) = echo_from_tuned_socket(&server, v4).await;
    let (port6, echo6) = echo_from_tuned_socket(&server, v6).await;
    let capture = capture.stop();

    let tshark = tshark_syns(&capture.file);
    let p0f = p0f_signatures(&capture.file);
    let os_names = p0f_os_names(&capture.file);
    for (port, echo, version, ttl) in [
        (port4, &echo4, 4, CLIENT_TTL),
        (port6, &echo6, 6, CLIENT_HOPS),
    ] {
        let tcp = &echo["tcp"];
        // What the test's own socket options set.
        assert_eq!(tcp["ip_version"], version, "{echo}");
        assert_eq!(tcp["ttl"], ttl, "{echo}");
        assert_eq!(tcp["mss"], CLIENT_MSS, "{echo}");
        assert_eq!(echo.get("tcp_absent"), None, "{echo}");
        // What the kernel chose, as tshark and p0f read it from the wire.
        let syn = tshark
            .iter()
            .find(|syn| syn.src_port == port)
            .unwrap_or_else(|| panic!("tshark saw the SYN from port {port}: {tshark:?}"));
        assert_agrees_with_tshark(tcp, syn);
        let signature = p0f
            .get(&port)
            .unwrap_or_else(|| panic!("p0f saw the SYN from port {port}: {p0f:?}"));
        assert_eq!(tcp["p0f"], signature.as_str(), "{echo}");
        // The OS Debian's p0f database names, as p0f names it from the same database.
        let os = os_names.get(&port).cloned().flatten();
        assert_eq!(
            tcp.get("os").cloned().unwrap_or_default(),
            serde_json::json!(os),
            "{echo}"
        );
        assert!(
            tcp["voice_id"]
                .as_str()
                .is_some_and(|v| v.starts_with("tcpv1_")),
            "{echo}"
        );
    }
    // One stack, one voice: the IPv4 and IPv6 SYNs of this host (same options, same window
    // form) differ only in what the voice leaves out.
    assert_eq!(echo4["tcp"]["voice_id"], echo6["tcp"]["voice_id"]);

    // Stored with the connection, derived again from the kept bytes on read (the OS name is
    // the live answer's: --p0f-db is the server's, not the row's).
    let token = format!("syn-{port4}");
    let row = server.row_of_token(&token).await;
    let mut live = echo4["tcp"].clone();
    live.as_object_mut().expect("tcp").remove("os");
    assert_eq!(row.summary["tcp"], live, "stored: {}", row.summary);
}

#[tokio::test]
async fn a_connection_behind_haproxy_send_proxy_v2_has_no_tcp_and_says_why() {
    let server = EchoServer::start(&[
        "--proxy-protocol-from",
        "127.0.0.1/32",
        "--listen",
        "[::1]:0",
        "--no-quic",
    ]);
    let lb = Proxy::start("haproxy-pp", &["send-proxy-v2", &server.port.to_string()]);
    let tcp = TcpStream::connect(("127.0.0.1", lb.port))
        .await
        .expect("connect to haproxy");
    let config = client_config(&server.cert_pem(), &[b"http/1.1"]);
    let name = ServerName::try_from("localhost").expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .expect("TLS through haproxy");
    let echo = http1_body(&http1_request(&mut tls, "/api/all").await);
    // haproxy relayed it: the echo knows (it names the balancer beside the client).
    assert_eq!(echo["peer"]["proxy"]["ip"], "127.0.0.1", "{echo}");
    assert_eq!(echo["tcp"], Value::Null, "{echo}");
    assert_eq!(echo["tcp_absent"]["reason"], "proxy_protocol", "{echo}");
    assert!(
        echo["tcp_absent"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("load balancer")),
        "{echo}"
    );

    // A direct connection (from ::1, not a trusted balancer) to the same server has its SYN.
    let v6 = *server.addrs.get(1).expect("the [::1] listener");
    let (_, echo) = echo_from_tuned_socket(&server, v6).await;
    assert_eq!(echo["tcp"]["ip_version"], 6, "{echo}");
    assert_eq!(echo["tcp"]["ttl"], CLIENT_HOPS, "{echo}");
}
