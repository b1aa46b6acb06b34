//! The exit host's own voice in the labels. Exits of the tests' own set their
//! outgoing sockets' IP TTL and TCP MSS (`BoundExit::with_stacks`), so their SYNs arrive at the
//! echo server as another host's stack would: an initial TTL of 128 (Windows's) and an MSS
//! of 1200, against this kernel's defaults. The expected values are the ones the test set on
//! the sockets; the labels must tell the stacks apart, flag the exit that rotates over both,
//! and count the pool by stack.

mod support;

use std::net::Ipv4Addr;

use serde_json::Value;
use support::bound_exit::{BoundExit, Stack};
use support::{audit, exits_file, EchoServer};

const WINDOWS_TTL: u32 = 128;
const SMALL_MSS: u32 = 1200;

/// The p0f signature's fields (`ver:ittl:olen:mss:wsize,scale:olayout:quirks:pclass`).
fn p0f_fields(stack: &Value) -> Vec<String> {
    stack["p0f"]
        .as_str()
        .unwrap_or_else(|| panic!("no p0f signature: {stack}"))
        .split(':')
        .map(str::to_owned)
        .collect()
}

#[test]
fn labels_tell_exit_host_stacks_apart() {
    let work = tempfile::tempdir().unwrap();
    let echo = EchoServer::start();
    let windows_like = Stack {
        ttl: Some(WINDOWS_TTL),
        mss: Some(SMALL_MSS),
    };
    let native = BoundExit::start(&[Ipv4Addr::new(127, 0, 0, 2)]);
    let other = BoundExit::with_stacks(&[Ipv4Addr::new(127, 0, 0, 3)], &[windows_like]);
    let rotating = BoundExit::with_stacks(
        &[Ipv4Addr::new(127, 0, 0, 4)],
        &[Stack::default(), windows_like],
    );
    let url = |exit: &BoundExit| format!("http://127.0.0.1:{}", exit.port);
    let exits = exits_file(
        work.path(),
        &echo,
        &[
            ("native", url(&native)),
            ("other", url(&other)),
            ("rotating", url(&rotating)),
        ],
    );
    let run = audit(
        &exits,
        &work.path().join("audit.db"),
        &["--samples", "4", "--no-quic"],
    );

    let native = run.exit("native")["stack"].clone();
    let other = run.exit("other")["stack"].clone();
    assert!(native.is_object() && other.is_object(), "{native} {other}");
    assert_ne!(native["voice"], other["voice"], "two stacks, two voices");
    // The fields set on the sockets, as p0f's signature writes them: TTL 128 over loopback
    // (no hop), MSS 1200.
    let fields = p0f_fields(&other);
    assert_eq!(fields[1], format!("{WINDOWS_TTL}+0"), "{other}");
    assert_eq!(fields[3], SMALL_MSS.to_string(), "{other}");
    assert_eq!(other["hops"], 0);
    assert_ne!(p0f_fields(&native)[1], fields[1], "{native}");
    for name in ["native", "other"] {
        assert_eq!(run.exit(name)["flags"]["stack_changed"], false, "{name}");
        assert_eq!(
            run.exit(name)["stack"]["voices"].as_array().unwrap().len(),
            1
        );
    }

    let both = run.exit("rotating");
    assert_eq!(both["flags"]["stack_changed"], true, "{both}");
    let mut voices: Vec<&Value> = both["stack"]["voices"].as_array().unwrap().iter().collect();
    voices.sort_by_key(|v| v.as_str().map(str::to_owned));
    let mut expected = vec![&native["voice"], &other["voice"]];
    expected.sort_by_key(|v| v.as_str().map(str::to_owned));
    assert_eq!(voices, expected, "{both}");

    // The pool by the newest SYN's voice: three exits over two stacks.
    let by_stack = &run.labels["pool"]["by_stack"];
    let counted: u64 = by_stack
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(counted, 3, "{by_stack}");
    assert!(by_stack[native["voice"].as_str().unwrap()].as_u64() >= Some(1));
    assert!(by_stack[other["voice"].as_str().unwrap()].as_u64() >= Some(1));
}
