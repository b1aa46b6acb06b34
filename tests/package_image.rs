//! The OCI image (README.md, "Install"), built by scripts/image.sh from the build this test run
//! already has and run for real with podman: built from `scratch` in one layer, with exactly the
//! libraries the binary links (checked against `readelf`), a non-root user, `/data` as its
//! volume, its labels, and at most 1.3 times the size of the stripped binary; a container on the
//! host's network serves the echo to curl on loopback, a second one on the same volume, with
//! `-p` to a loopback port, serves it again with the same certificate and adds to the same
//! database. The `-p` container runs in a network namespace the test makes (its bridge and
//! firewall rules go with it). The containers, the volume and the image are removed, on failure
//! too.
//!
//! As root; needs buildah, podman, runc, binutils, sqlite3 and curl
//! (scripts/install-test-deps.sh). This machine's podman runs with runc and cgroupfs, and a
//! containers.conf without default ulimits: crun refuses its cgroup layout.

mod package_support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use package_support::{cmd, echo, ok, run, script, sqlite_count, version_and_commit, BINARY};

/// The image's user and group (scripts/image.sh).
const UID: &str = "10001";

/// What the test made, removed when it ends however it ends.
struct Made {
    tag: String,
    volume: String,
    netns: String,
    containers: Vec<String>,
    conf: tempfile::TempDir,
}

impl Made {
    /// `podman` with this machine's runtime flags and the test's containers.conf.
    fn podman(&self, args: &[&str]) -> Command {
        let mut podman = Command::new("podman");
        podman
            .env("CONTAINERS_CONF", self.conf.path().join("containers.conf"))
            .args(["--runtime", "runc", "--cgroup-manager", "cgroupfs"])
            .args(args);
        podman
    }

    /// The same inside the test's network namespace (nsenter keeps the host's /sys, where
    /// runc finds the cgroups; `ip netns exec` would mount another).
    fn podman_in_netns(&self, args: &[&str]) -> Command {
        let mut podman = Command::new("nsenter");
        podman
            .env("CONTAINERS_CONF", self.conf.path().join("containers.conf"))
            .arg(format!("--net=/run/netns/{}", self.netns))
            .args([
                "podman",
                "--runtime",
                "runc",
                "--cgroup-manager",
                "cgroupfs",
            ])
            .args(args);
        podman
    }

    /// What container `name` printed so far.
    fn logs(&self, name: &str) -> String {
        let out = run(&mut self.podman(&["logs", name]));
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    }

    /// Stops container `name` (SIGTERM: the server flushes its queue) and checks it exited 0.
    fn stop(&self, name: &str) {
        ok(&mut self.podman(&["stop", "-t", "30", name]));
        let code = ok(&mut self.podman(&["inspect", "-f", "{{.State.ExitCode}}", name]));
        assert_eq!(code.trim(), "0", "{}", self.logs(name));
        ok(&mut self.podman(&["rm", name]));
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        for name in &self.containers {
            let _ = run(&mut self.podman(&["rm", "-f", "-t", "0", name]));
        }
        let _ = run(&mut self.podman(&["volume", "rm", "-f", &self.volume]));
        let _ = run(&mut self.podman(&["rmi", "-f", &self.tag]));
        let _ = run(&mut cmd("ip", &["netns", "del", &self.netns]));
    }
}

#[test]
fn the_image_serves_the_echo_and_keeps_its_database_on_the_volume() {
    let id = std::process::id();
    let conf = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        conf.path().join("containers.conf"),
        "[containers]\ndefault_ulimits = []\n",
    )
    .expect("containers.conf");
    let mut made = Made {
        tag: format!("localhost/exitvoice-test:{id}"),
        volume: format!("exitvoice-test-{id}"),
        netns: format!("evimage{id}"),
        containers: vec![
            format!("exitvoice-test-{id}-host"),
            format!("exitvoice-test-{id}-p"),
        ],
        conf,
    };
    assert_eq!(script("image.sh", &["--tag", &made.tag]), made.tag);

    let (version, commit) = version_and_commit(&ok(&mut cmd(BINARY, &["--version"])));
    assert_eq!(commit, package_support::git_commit());
    the_image_is_what_it_says(&made, &version, &commit);

    // On the host's network, on a loopback port of its choosing.
    ok(&mut made.podman(&["volume", "create", &made.volume]));
    let host = made.containers[0].clone();
    ok(&mut made.podman(&[
        "run",
        "-d",
        "--name",
        &host,
        "--network",
        "host",
        "-e",
        "EXITVOICE_LISTEN=127.0.0.1:0",
        "-v",
        &format!("{}:/data", made.volume),
        &made.tag,
    ]));
    let addr = package_support::wait_for_line("exitvoice serve: listening on https://", || {
        made.logs(&host)
    });
    let pin =
        package_support::wait_for_line("exitvoice serve: certificate pin ", || made.logs(&host));
    assert!(pin.ends_with("(generated exitvoice.db.cert.pem)"), "{pin}");
    let first = echo(&mut cmd(
        "curl",
        &["-sk", "--http2", &format!("https://{addr}/api/all")],
    ));
    assert_eq!(first["peer"]["ip"], "127.0.0.1");
    made.stop(&host);

    let data = ok(&mut made.podman(&["volume", "inspect", "-f", "{{.Mountpoint}}", &made.volume]));
    let db = Path::new(data.trim()).join("exitvoice.db");
    let owner = ok(&mut cmd(
        "stat",
        &["-c", "%u:%g", db.to_str().expect("path")],
    ));
    assert_eq!(owner.trim(), format!("{UID}:{UID}"));
    assert_eq!(sqlite_count(&db, "requests"), 1);

    // A second container on the same volume, published with -p on a loopback port, in a
    // network namespace of the test's own.
    ok(&mut cmd("ip", &["netns", "add", &made.netns]));
    ok(&mut cmd(
        "ip",
        &["-n", &made.netns, "link", "set", "lo", "up"],
    ));
    let published = made.containers[1].clone();
    ok(&mut made.podman_in_netns(&[
        "run",
        "-d",
        "--name",
        &published,
        "-p",
        "127.0.0.1:8443:8443",
        "-v",
        &format!("{}:/data", made.volume),
        &made.tag,
    ]));
    let addr = package_support::wait_for_line("exitvoice serve: listening on https://", || {
        made.logs(&published)
    });
    assert_eq!(addr, "0.0.0.0:8443", "the image's default address");
    let again = package_support::wait_for_line("exitvoice serve: certificate pin ", || {
        made.logs(&published)
    });
    let (pin, again) = (pin.split(' ').next(), again.split(' ').next());
    assert_eq!(pin, again, "the certificate on the volume is served again");
    let mut curl = Command::new("nsenter");
    curl.arg(format!("--net=/run/netns/{}", made.netns)).args([
        "curl",
        "-sk",
        "--http2",
        "https://127.0.0.1:8443/api/all",
    ]);
    let second = echo(&mut curl);
    // Through the port mapping: the container saw the bridge's address, not loopback.
    assert_ne!(second["peer"]["ip"], "127.0.0.1", "{second}");
    made.stop(&published);
    assert_eq!(
        sqlite_count(&db, "requests"),
        2,
        "both containers' requests"
    );

    ok(&mut made.podman(&["volume", "rm", &made.volume]));
    ok(&mut made.podman(&["rmi", &made.tag]));
    let out = run(&mut made.podman(&["image", "exists", &made.tag]));
    assert!(!out.status.success(), "the image is removed");
    made.containers.clear();
}

/// The image's configuration, layers, files and size.
fn the_image_is_what_it_says(made: &Made, version: &str, commit: &str) {
    let inspect = ok(&mut made.podman(&["image", "inspect", &made.tag]));
    let inspect: serde_json::Value = serde_json::from_str(&inspect).expect("JSON");
    let image = &inspect[0];
    let config = &image["Config"];
    assert_eq!(config["User"], format!("{UID}:{UID}"));
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/bin/exitvoice"])
    );
    assert_eq!(config["Cmd"], serde_json::json!(["serve"]));
    assert_eq!(config["WorkingDir"], "/data");
    assert!(config["Volumes"]["/data"].is_object(), "{config}");
    assert!(config["ExposedPorts"]["8443/tcp"].is_object(), "{config}");
    let labels = &image["Labels"];
    assert_eq!(labels["org.opencontainers.image.version"], version);
    assert_eq!(labels["org.opencontainers.image.revision"], commit);
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert!(labels["org.opencontainers.image.source"]
        .as_str()
        .is_some_and(|source| source.starts_with("https://")));
    // From scratch: one layer, ours.
    assert_eq!(
        image["RootFS"]["Layers"].as_array().map(Vec::len),
        Some(1),
        "{image}"
    );

    // The size: at most 1.3 times the binary's own, stripped as the image holds it.
    let stripped = tempfile::tempdir().expect("tempdir");
    let binary = stripped.path().join("exitvoice");
    ok(&mut cmd(
        "strip",
        &["-o", binary.to_str().expect("path"), BINARY],
    ));
    let binary_size = std::fs::metadata(&binary).expect("stripped").len();
    let image_size = image["Size"].as_u64().expect("size");
    eprintln!("image {image_size} bytes, stripped binary {binary_size} bytes");
    assert!(
        image_size * 10 <= binary_size * 13,
        "image {image_size} > 1.3 × binary {binary_size}"
    );

    // The files: the libraries are exactly what the binary asks for (readelf's NEEDED and
    // its program interpreter), the CA bundle is the system's, the user is not root.
    let root = ok(&mut made.podman(&["image", "mount", &made.tag]));
    let root = Path::new(root.trim());
    let dynamic = ok(&mut cmd("readelf", &["-d", BINARY]));
    let mut needed: BTreeSet<String> = dynamic
        .lines()
        .filter(|line| line.contains("(NEEDED)"))
        .filter_map(|line| line.split('[').nth(1))
        .map(|name| name.trim_end_matches(']').to_owned())
        .collect();
    let program = ok(&mut cmd("readelf", &["-l", BINARY]));
    let interpreter = program
        .lines()
        .find_map(|line| line.split("program interpreter: ").nth(1))
        .map(|rest| rest.trim_end_matches(']').to_owned())
        .expect("an interpreter");
    assert!(
        root.join(interpreter.trim_start_matches('/')).is_file(),
        "{interpreter} missing"
    );
    needed.insert(
        Path::new(&interpreter)
            .file_name()
            .and_then(|name| name.to_str())
            .expect("name")
            .to_owned(),
    );
    let listed = ok(&mut cmd(
        "find",
        &[
            root.to_str().expect("path"),
            "-name",
            "*.so*",
            "-printf",
            "%f\n",
        ],
    ));
    let present: BTreeSet<String> = listed.lines().map(str::to_owned).collect();
    assert_eq!(present, needed, "the image's libraries");
    assert_eq!(
        std::fs::read(root.join("etc/ssl/certs/ca-certificates.crt")).expect("CA bundle"),
        std::fs::read("/etc/ssl/certs/ca-certificates.crt").expect("system CA bundle")
    );
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).expect("passwd");
    assert!(
        passwd
            .lines()
            .any(|line| line.starts_with(&format!("exitvoice:x:{UID}:{UID}:"))),
        "{passwd}"
    );
    let data = ok(&mut cmd(
        "stat",
        &["-c", "%u:%g %a", root.join("data").to_str().expect("path")],
    ));
    assert_eq!(data.trim(), format!("{UID}:{UID} 700"));
    ok(&mut made.podman(&["image", "unmount", &made.tag]));
}
