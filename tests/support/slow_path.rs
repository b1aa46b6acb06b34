//! A slow path inside the kernel's TCP: two network namespaces of the test's own joined by two
//! TUN devices, one in each, whose IP packets a pair of threads in the test process carries
//! across `D` ms after they left (each direction, in order; a long wire of unbounded
//! bandwidth). Unlike a user-space relay (`support::delay_relay`), nothing terminates TCP: the
//! two ends' kernels speak to each other, so a server's `TCP_INFO` round trip holds the whole
//! path. This kernel has no `netem`. Needs root, as the test command runs.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::os::fd::AsRawFd as _;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::netns::{ip, Namespaces};

/// The server's address, in [`SlowPath::server`].
pub const SERVER_IP: &str = "10.77.0.1";
/// The client's address, in [`SlowPath::client`].
pub const CLIENT_IP: &str = "10.77.0.2";
/// The TUN device's name in either namespace (each has its own interface names).
const DEVICE: &str = "evslow";
/// How often a reader looks whether the path is being torn down.
const POLL_MS: i32 = 50;

/// Paths made by this test process, for unique namespace names.
static MADE: AtomicU32 = AtomicU32::new(0);

/// Two namespaces, `server` and `client`, joined by a link `delay_ms` long each way; the
/// forwarding stops, then the namespaces (and every process in them) go, on drop.
pub struct SlowPath {
    /// The namespace holding [`SERVER_IP`].
    pub server: String,
    /// The namespace holding [`CLIENT_IP`].
    pub client: String,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Its namespaces, to start processes in; they go after the forwarding threads are joined
    /// (`Drop` runs before the fields drop), so the TUN devices close first.
    pub spaces: Namespaces,
}

impl SlowPath {
    /// Makes the namespaces and the link, `delay_ms` each way.
    pub fn new(delay_ms: u64) -> Self {
        let tag = format!(
            "ev{}p{}",
            std::process::id() % 100_000,
            MADE.fetch_add(1, Ordering::Relaxed)
        );
        let mut spaces = Namespaces::new();
        let server = spaces.add(format!("{tag}s"));
        let client = spaces.add(format!("{tag}c"));
        let server_tun = tun_in(&server);
        let client_tun = tun_in(&client);
        for (ns, address) in [(&server, SERVER_IP), (&client, CLIENT_IP)] {
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{address}/30"),
                "dev",
                DEVICE,
            ]);
            ip(&["-n", ns, "link", "set", DEVICE, "up"]);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let delay = Duration::from_millis(delay_ms);
        let clone = |file: &File| file.try_clone().expect("clone the TUN descriptor");
        let mut threads = Vec::from(carry(clone(&server_tun), clone(&client_tun), delay, &stop));
        threads.extend(carry(client_tun, server_tun, delay, &stop));
        Self {
            server,
            client,
            stop,
            threads,
            spaces,
        }
    }
}

impl Drop for SlowPath {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// `struct ifreq` as TUNSETIFF reads it: the name, then the flags in the 24-byte union.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _union_rest: [u8; 22],
}

/// A TUN device [`DEVICE`] (IP packets, no packet-information header) created in namespace
/// `ns`: opened by a thread that has entered it, since a device is made in its opener's
/// namespace. The returned descriptor reads what the namespace routes to the device and writes
/// what arrives on it.
fn tun_in(ns: &str) -> File {
    let path = format!("/var/run/netns/{ns}");
    thread::spawn(move || {
        let netns = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // SAFETY: a plain system call on a descriptor this thread owns; it moves only this
        // thread, which ends when the device is made.
        let entered = unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(
            entered,
            0,
            "setns {path}: {}",
            std::io::Error::last_os_error()
        );
        let tun = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")
            .expect("open /dev/net/tun");
        let mut request = IfReq {
            name: [0; libc::IFNAMSIZ],
            flags: libc::c_short::try_from(libc::IFF_TUN | libc::IFF_NO_PI).expect("flags"),
            _union_rest: [0; 22],
        };
        request.name[..DEVICE.len()].copy_from_slice(DEVICE.as_bytes());
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which `request` is laid out as
        // and outlives the call.
        let made = unsafe { libc::ioctl(tun.as_raw_fd(), libc::TUNSETIFF, &mut request) };
        assert_eq!(made, 0, "TUNSETIFF: {}", std::io::Error::last_os_error());
        tun
    })
    .join()
    .expect("the TUN opener")
}

/// Carries every packet read from `from` into `to`, `delay` after it was read, in order: a
/// reader thread stamps each and a writer thread holds it until due. Both end once `stop` is
/// set (the reader within [`POLL_MS`], the writer when the reader's queue closes).
fn carry(
    mut from: File,
    mut to: File,
    delay: Duration,
    stop: &Arc<AtomicBool>,
) -> [JoinHandle<()>; 2] {
    let (queue, due) = mpsc::channel::<(Instant, Vec<u8>)>();
    let stop = Arc::clone(stop);
    let reader = thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        while !stop.load(Ordering::Relaxed) {
            let mut ready = libc::pollfd {
                fd: from.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd that lives across the call.
            if unsafe { libc::poll(&mut ready, 1, POLL_MS) } <= 0 {
                continue;
            }
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if queue
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    let writer = thread::spawn(move || {
        for (at, packet) in due {
            if let Some(wait) = at.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
            // A packet the far kernel refuses (its device not up yet) is a lost packet.
            let _ = to.write(&packet);
        }
    });
    [reader, writer]
}
