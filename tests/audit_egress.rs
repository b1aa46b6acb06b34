//! Egress truth and `audit --preflight`. Test exits of our own bind distinct
//! loopback source addresses (127.0.0.x), so each exit has its own egress, next to a real squid,
//! which on loopback leaves from the auditor's own address.

mod support;

use std::net::Ipv4Addr;

use support::bound_exit::BoundExit;
use support::{audit_code, exits_file, EchoServer, Proxy, PASSWORD_ENCODED, USER};

fn ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, last)
}

/// `exits_file` with the last exit marked `rotate = true`.
fn with_rotating_last(path: &std::path::Path) {
    let mut text = std::fs::read_to_string(path).unwrap();
    text.push_str("rotate = true\n");
    std::fs::write(path, text).unwrap();
}

#[test]
fn distinct_egresses_rotate_and_the_pool_passes_preflight() {
    let echo = EchoServer::start();
    let two = BoundExit::start(&[ip(2)]);
    let three = BoundExit::start(&[ip(3)]);
    let rotating = BoundExit::start(&[ip(4), ip(5)]);
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[
            ("two", format!("http://127.0.0.1:{}", two.port)),
            ("three", format!("http://127.0.0.1:{}", three.port)),
            ("rotating", format!("http://127.0.0.1:{}", rotating.port)),
        ],
    );
    with_rotating_last(&exits);
    let (code, run) = audit_code(
        &exits,
        &work.path().join("audit.db"),
        &["--preflight", "--samples", "3", "--min-unique-egress", "4"],
    );
    assert_eq!(code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("preflight: pass"), "{}", run.stdout);
    for (name, egress) in [("two", "127.0.0.2"), ("three", "127.0.0.3")] {
        let label = run.exit(name);
        assert_eq!(label["egress_ips"], serde_json::json!([egress]), "{label}");
        assert_eq!(label["egress"]["unique"], 1, "{label}");
        assert_eq!(
            label["egress"]["rotating"],
            serde_json::Value::Null,
            "{label}"
        );
        assert_eq!(label["flags"]["not_proxied"], false, "{label}");
        assert_eq!(label["route"], "identity", "{label}");
    }
    let label = run.exit("rotating");
    assert_eq!(
        label["egress_ips"],
        serde_json::json!(["127.0.0.4", "127.0.0.5"])
    );
    assert_eq!(label["egress"]["rotating"], true, "{label}");
    let pool = &run.labels["pool"];
    assert_eq!(pool["exits"], 3, "{pool}");
    assert_eq!(pool["unique_egress"], 4, "{pool}");
    assert_eq!(pool["collapsed_egress"], false, "{pool}");
    assert_eq!(pool["success_rate"], 1.0, "{pool}");
    assert_eq!(pool["by_route"]["identity"], 3, "{pool}");
}

#[test]
fn a_failing_pool_exits_3_with_its_reasons() {
    let echo = EchoServer::start();
    let squid = Proxy::squid();
    // Forwards from the auditor's own address: traffic is not proxied at all.
    let direct = BoundExit::start(&[ip(1)]);
    // Configured as rotating, always leaves from one address.
    let stuck = BoundExit::start(&[ip(6)]);
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[
            (
                "squid",
                format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}", squid.port),
            ),
            ("direct", format!("http://127.0.0.1:{}", direct.port)),
            ("stuck", format!("http://127.0.0.1:{}", stuck.port)),
        ],
    );
    with_rotating_last(&exits);
    let (code, run) = audit_code(
        &exits,
        &work.path().join("audit.db"),
        &["--preflight", "--samples", "3", "--min-unique-egress", "3"],
    );
    assert_eq!(code, 3, "{}\n{}", run.stdout, run.stderr);
    let out = &run.stdout;
    assert!(
        out.contains("preflight: FAIL: 0 of 3 exits pass (0.00 < 0.80); 2 unique egress (< 3)"),
        "{out}"
    );
    assert!(out.contains("not_proxied"), "{out}");
    assert!(out.contains("not_rotating"), "{out}");
    // A real squid on loopback leaves from the auditor's own address too.
    for name in ["squid", "direct"] {
        let label = run.exit(name);
        assert_eq!(label["flags"]["not_proxied"], true, "{label}");
        // A flag, not a route, by default: the voice is still the client's.
        assert_eq!(label["route"], "identity", "{label}");
    }
    let stuck = run.exit("stuck");
    assert_eq!(stuck["egress"]["rotating"], false, "{stuck}");
    assert_eq!(stuck["flags"]["not_proxied"], false, "{stuck}");
    assert_eq!(stuck["route"], "quarantine", "{stuck}");
    assert_eq!(stuck["route_reason"], "not_rotating", "{stuck}");
    assert_eq!(run.labels["pool"]["unique_egress"], 2);

    // Two exits, one egress: the pool is one exit in disguise.
    let pair = exits_file(
        work.path(),
        &echo,
        &[
            (
                "squid",
                format!("http://{USER}:{PASSWORD_ENCODED}@127.0.0.1:{}", squid.port),
            ),
            ("direct", format!("http://127.0.0.1:{}", direct.port)),
        ],
    );
    let (code, run) = audit_code(&pair, &work.path().join("pair.db"), &["--samples", "1"]);
    assert_eq!(code, 0, "not a preflight: {}", run.stdout);
    assert_eq!(
        run.labels["pool"]["collapsed_egress"], true,
        "{}",
        run.labels
    );
}

/// A gateway session is sticky when its egress stays: one that moves between two addresses
/// under one session id is `sticky_broken`; one that stays is not.
#[test]
fn a_sticky_session_that_moves_is_sticky_broken() {
    let echo = EchoServer::start();
    let moving = BoundExit::start(&[ip(7), ip(8)]);
    let staying = BoundExit::start(&[ip(9)]);
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(work.path(), &echo, &[]);
    let mut text = std::fs::read_to_string(&exits).unwrap();
    for (name, port) in [("moving", moving.port), ("staying", staying.port)] {
        // One session slot each: `moving#1`, `staying#1`.
        text.push_str(&format!(
            "\n[[exits]]\nname = \"{name}\"\nurl = \"http://user-{{session}}:pw@127.0.0.1:{port}\"\n\
             sessions = 1\n"
        ));
    }
    std::fs::write(&exits, text).unwrap();
    let (code, run) = audit_code(&exits, &work.path().join("audit.db"), &["--samples", "3"]);
    assert_eq!(code, 0, "{}\n{}", run.stdout, run.stderr);
    let moving = run.exit("moving#1");
    assert_eq!(moving["egress"]["sticky_broken"], true, "{moving}");
    assert_eq!(moving["egress"]["unique"], 2, "{moving}");
    let staying = run.exit("staying#1");
    assert_eq!(staying["egress"]["sticky_broken"], false, "{staying}");
    assert_eq!(staying["egress_ips"], serde_json::json!(["127.0.0.9"]));
}

/// Behind an L4 load balancer (real haproxy sending PROXY protocol v2 to an echo that trusts
/// it), a probe's egress is the client address the header carries: the exit's own source
/// address, not the balancer's 127.0.0.1, which every connection to the echo comes from.
#[test]
fn behind_a_load_balancer_the_egress_is_the_proxy_protocol_client() {
    let echo = EchoServer::start_with(&["--proxy-protocol-from", "127.0.0.1/32"]);
    let lb = Proxy::start("haproxy-pp", &["send-proxy-v2", &echo.port.to_string()]);
    let two = BoundExit::start(&[ip(2)]);
    let work = tempfile::tempdir().unwrap();
    let exits = exits_file(
        work.path(),
        &echo,
        &[("two", format!("http://127.0.0.1:{}", two.port))],
    );
    // The auditor and its exit reach the echo through the balancer.
    let text = std::fs::read_to_string(&exits).unwrap().replace(
        &format!("localhost:{}", echo.port),
        &format!("localhost:{}", lb.port),
    );
    std::fs::write(&exits, text).unwrap();
    let (code, run) = audit_code(&exits, &work.path().join("audit.db"), &["--samples", "2"]);
    assert_eq!(code, 0, "{}\n{}", run.stdout, run.stderr);
    let label = run.exit("two");
    assert_eq!(label["samples"], 2, "{label}");
    assert_eq!(
        label["egress_ips"],
        serde_json::json!(["127.0.0.2"]),
        "{label}"
    );
    assert_eq!(label["flags"]["not_proxied"], false, "{label}");
    assert_eq!(label["flags"]["tls_preserved"], true, "{label}");
    assert_eq!(run.labels["pool"]["unique_egress"], 1, "{}", run.labels);
}
