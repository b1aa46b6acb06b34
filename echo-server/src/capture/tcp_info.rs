//! The kernel's round-trip estimates of a TCP connection: `getsockopt(TCP_INFO)` (`tcp(7)`),
//! its `tcpi_rtt`, `tcpi_min_rtt` (Linux 4.6 and later) and `tcpi_rttvar`, in microseconds.
//! The echo's second `unsafe` call beside `saved_syn.rs`: no maintained crate has a typed call
//! for `TCP_INFO` (socket2, rustix and nix do not), so it goes through `libc` here.

use std::os::fd::AsRawFd;

use exitvoice_schema::TcpRoundTrip;

/// `tcpi_min_rtt` before the first sample: the kernel's `~0U`.
#[cfg(target_os = "linux")]
const NO_SAMPLE: u32 = u32::MAX;

/// The round trips the kernel estimates for `stream`; `None` when it has none to give.
#[cfg(target_os = "linux")]
pub fn read(stream: &impl AsRawFd) -> Option<TcpRoundTrip> {
    // SAFETY: `tcp_info` is plain integers; all zeros is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::tcp_info>()).ok()?;
    // SAFETY: `stream` owns an open socket for the duration of the call; the value pointer and
    // `len` describe `info`, which lives across the call; the kernel writes at most `len` bytes
    // into it (fewer on an older kernel, which it reports in `len`).
    let result = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            std::ptr::from_mut(&mut info).cast(),
            &mut len,
        )
    };
    if result != 0 || info.tcpi_rtt == 0 {
        return None;
    }
    // A kernel older than `tcpi_min_rtt` writes less than the structure: the field stays 0.
    let min_rtt_end = std::mem::offset_of!(libc::tcp_info, tcpi_min_rtt) + 4;
    let has_min = usize::try_from(len).is_ok_and(|len| len >= min_rtt_end);
    Some(TcpRoundTrip {
        rtt_us: info.tcpi_rtt,
        min_rtt_us: Some(info.tcpi_min_rtt).filter(|&min| has_min && min != NO_SAMPLE && min != 0),
        rttvar_us: Some(info.tcpi_rttvar),
    })
}

/// Without Linux's `TCP_INFO` there is no estimate to read.
#[cfg(not(target_os = "linux"))]
pub fn read(_stream: &impl AsRawFd) -> Option<TcpRoundTrip> {
    None
}

/// Why [`read`] gives nothing on this system, when it never can.
pub const UNSUPPORTED: Option<&str> = if cfg!(target_os = "linux") {
    None
} else {
    Some("TCP_INFO is read on Linux only")
};

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// After a loopback exchange the kernel has sampled the round trip: small, and the
    /// smallest sample no larger than the smoothed estimate.
    #[tokio::test]
    async fn a_loopback_connection_has_a_sampled_round_trip() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut accepted, _) = listener.accept().await.unwrap();
        accepted.write_all(b"ping").await.unwrap();
        let mut buf = [0_u8; 4];
        client.read_exact(&mut buf).await.unwrap();
        client.write_all(b"pong").await.unwrap();
        accepted.read_exact(&mut buf).await.unwrap();
        let rtt = read(&accepted).expect("TCP_INFO on Linux");
        let min = rtt.min_rtt_us.expect("a sample");
        assert!(min <= rtt.rtt_us, "{rtt:?}");
        assert!(rtt.rtt_us < 1_000_000, "{rtt:?}");
    }
}
