//! A user-space link with a one-way delay, on loopback: every chunk read from one side is
//! written to the other `D` ms after it arrived, in order (a long wire of unbounded bandwidth).
//! This kernel has no `netem`; put between a client and its proxy, the relay is the hidden leg
//! the echo's round-trip gap must find.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// A delaying relay from a loopback port to `target`; stops accepting on drop.
pub struct DelayRelay {
    /// Its port on 127.0.0.1.
    pub port: u16,
    delay_ms: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl DelayRelay {
    /// Relays `127.0.0.1:<port>` to `127.0.0.1:target`, `delay_ms` each way.
    pub fn start(target: u16, delay_ms: u64) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let port = listener.local_addr().expect("relay address").port();
        let delay = Arc::new(AtomicU64::new(delay_ms));
        let stop = Arc::new(AtomicBool::new(false));
        let (accept_delay, accept_stop) = (Arc::clone(&delay), Arc::clone(&stop));
        thread::spawn(move || {
            for client in listener.incoming() {
                if accept_stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], target)))
                else {
                    continue;
                };
                let delay = Duration::from_millis(accept_delay.load(Ordering::Relaxed));
                for stream in [&client, &server] {
                    let _ = stream.set_nodelay(true);
                }
                pipe(&client, &server, delay);
                pipe(&server, &client, delay);
            }
        });
        Self {
            port,
            delay_ms: delay,
            stop,
        }
    }

    /// Connections accepted from now on are delayed `delay_ms` each way.
    pub fn set_delay(&self, delay_ms: u64) {
        self.delay_ms.store(delay_ms, Ordering::Relaxed);
    }
}

impl Drop for DelayRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop, which then sees the stop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies `from` to `to`, each chunk `delay` after it was read; the write side closes after
/// the last one.
fn pipe(from: &TcpStream, to: &TcpStream, delay: Duration) {
    let (mut reader, mut writer) = (
        from.try_clone().expect("clone"),
        to.try_clone().expect("clone"),
    );
    let (send, receive) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buf = vec![0_u8; 64 * 1024];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if send
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    thread::spawn(move || {
        for (due, chunk) in receive {
            thread::sleep(due.saturating_duration_since(Instant::now()));
            if writer.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = writer.shutdown(Shutdown::Write);
    });
}
