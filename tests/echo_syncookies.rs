//! Where the kernel keeps no SYN, the echo says why. In a network namespace of the
//! test's own with `net.ipv4.tcp_syncookies=2`, the kernel answers every SYN with a cookie and
//! keeps no state for it (RFC 4987 section 3.6), so `TCP_SAVED_SYN` has nothing: `/api/all`'s
//! `tcp` is `null` with `tcp_absent.reason` `not_saved`. With the namespace's default (cookies
//! only when the SYN queue overflows), the same server reads the SYN.

mod support;

use serde_json::Value;
use support::netns::{in_ns, Namespaces};

/// `/api/all` fetched by curl from inside `ns`.
fn api_all(ns: &str, port: u16) -> Value {
    let out = in_ns(ns, "curl")
        .args([
            "-sk",
            "--http1.1",
            &format!("https://127.0.0.1:{port}/api/all"),
        ])
        .output()
        .expect("curl");
    assert!(out.status.success(), "curl: {out:?}");
    serde_json::from_slice(&out.stdout).expect("the echo's JSON")
}

fn syncookies(ns: &str, value: &str) {
    let set = in_ns(ns, "sysctl")
        .args(["-q", "-w", &format!("net.ipv4.tcp_syncookies={value}")])
        .status()
        .expect("sysctl");
    assert!(set.success(), "tcp_syncookies={value} in {ns}");
}

#[test]
fn syn_cookies_leave_no_syn_and_the_echo_says_so() {
    let work = tempfile::tempdir().unwrap();
    let mut spaces = Namespaces::new();
    let ns = spaces.add(format!("ev{}k", std::process::id() % 100_000));
    let (port, _) = spaces.echo(&ns, "127.0.0.1", work.path(), &[]);

    syncookies(&ns, "2");
    let cookie = api_all(&ns, port);
    assert_eq!(cookie["tcp"], Value::Null, "{cookie}");
    assert_eq!(cookie["tcp_absent"]["reason"], "not_saved", "{cookie}");

    syncookies(&ns, "1");
    let kept = api_all(&ns, port);
    assert!(kept["tcp"].is_object(), "{kept}");
    assert!(kept.get("tcp_absent").is_none_or(Value::is_null), "{kept}");
}
