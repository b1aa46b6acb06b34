//! The servers start, answer, speak TLS with a certificate that verifies, and forget
//! everything on restart. Raw RESP over std TCP: the crate has no Redis client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use exitvoice_redistest::{fresh_prefix, private_server, server, tls_server};

fn connect(port: u16) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(
        &SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        Duration::from_secs(2),
    )?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    Ok(stream)
}

/// `args` as a RESP array of bulk strings.
fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
    }
    out
}

/// Sends one command and reads its reply: a line, plus the payload of a bulk string.
fn command(port: u16, args: &[&str]) -> String {
    let mut stream = connect(port).expect("connect");
    stream.write_all(&resp(args)).expect("send");
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).expect("reply");
    if let Some(len) = line.strip_prefix('$') {
        if let Ok(len @ 0..) = len.trim_end().parse::<i64>() {
            let mut payload = vec![0; usize::try_from(len).unwrap() + 2];
            reader.read_exact(&mut payload).expect("bulk payload");
            line.push_str(&String::from_utf8_lossy(&payload));
        }
    }
    line
}

#[test]
fn plain_server_answers_ping() {
    let s = server();
    assert_eq!(s.url(), format!("redis://127.0.0.1:{}/", s.port()));
    assert!(s.ca_pem().is_none());
    let mut stream = connect(s.port()).expect("connect");
    stream.write_all(b"PING\r\n").expect("send");
    let mut reply = [0; 7];
    stream.read_exact(&mut reply).expect("reply");
    assert_eq!(&reply, b"+PONG\r\n");
    // The same server for the whole process.
    assert_eq!(server().port(), s.port());
}

#[test]
fn tls_server_speaks_only_tls_with_a_verifiable_certificate() {
    let s = tls_server();
    assert_eq!(s.url(), format!("rediss://127.0.0.1:{}/", s.port()));
    let ca = s.ca_pem().expect("the TLS server's CA");

    // Plain text on the TLS port gets no PONG: the server closes the connection or says nothing.
    let mut stream = connect(s.port()).expect("connect");
    stream.write_all(b"PING\r\n").expect("send");
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    assert!(
        !reply.starts_with(b"+PONG"),
        "plain PING answered on the TLS port: {reply:?}"
    );

    // openssl verifies the chain against the CA, for the IP address and for `localhost`.
    for check in [
        ["-verify_ip", "127.0.0.1"],
        ["-verify_hostname", "localhost"],
    ] {
        let out = Command::new("openssl")
            .args(["s_client", "-connect"])
            .arg(format!("127.0.0.1:{}", s.port()))
            .arg("-CAfile")
            .arg(ca)
            .arg("-verify_return_error")
            .args(check)
            .stdin(Stdio::null())
            .output()
            .expect("run openssl s_client");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("Verify return code: 0 (ok)"),
            "openssl s_client {check:?} failed ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // And it is Redis behind the TLS: redis-cli (Debian's redis-tools, a dependency of
    // redis-server) gets PONG.
    let out = Command::new("redis-cli")
        .args(["--tls", "--cacert"])
        .arg(ca)
        .args(["-h", "127.0.0.1", "-p", &s.port().to_string(), "PING"])
        .stdin(Stdio::null())
        .output()
        .expect("run redis-cli");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "PONG",
        "redis-cli --tls: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn private_server_forgets_everything_on_restart() {
    let s = private_server();
    assert_ne!(s.port(), server().port());
    assert_eq!(command(s.port(), &["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(command(s.port(), &["GET", "k"]), "$1\r\nv\r\n");

    s.restart_empty();
    assert_eq!(command(s.port(), &["GET", "k"]), "$-1\r\n");

    assert_eq!(command(s.port(), &["SET", "k", "w"]), "+OK\r\n");
    s.stop();
    assert!(connect(s.port()).is_err(), "a stopped server accepts");
    s.stop(); // Stopped already: nothing to do.
    s.start_again();
    assert_eq!(command(s.port(), &["GET", "k"]), "$-1\r\n");

    let port = s.port();
    drop(s);
    assert!(connect(port).is_err(), "a dropped server accepts");
}

#[test]
fn fresh_prefixes_are_unique_and_clean() {
    let a = fresh_prefix("Quota / Limits!");
    let b = fresh_prefix("Quota / Limits!");
    assert_ne!(a, b);
    for p in [&a, &b] {
        let (n, rest) = p.split_once('_').expect("t<n>_<hint>");
        assert!(n.starts_with('t') && n[1..].parse::<u32>().is_ok(), "{p}");
        assert_eq!(rest, "quota___limits_");
    }
    assert_eq!(
        fresh_prefix(&"x".repeat(100))
            .split_once('_')
            .unwrap()
            .1
            .len(),
        40
    );
}
