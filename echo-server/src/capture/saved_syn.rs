//! The SYN the kernel kept of an accepted connection: the one place with `unsafe` code in the
//! echo server (docs/decisions.md, "The SYN of each connection").
//!
//! Linux keeps the IP and TCP headers of a connection's SYN when its listener has set
//! `TCP_SAVE_SYN`, and hands them over once to `getsockopt(TCP_SAVED_SYN)` on the accepted
//! socket, which frees them (Linux commit cd8ae85299d5, "tcp: provide SYN headers for passive
//! connections"; `tcp(7)`). No maintained crate wraps either option (socket2, rustix and nix
//! have typed calls for other options only), so the two calls go through `libc` here.
//!
//! Public for `bench/floor`, whose floor reads the SYN with these same calls.

use std::io;
use std::os::fd::AsRawFd;

use exitvoice_protocol::analysis::SynSource;
use exitvoice_schema::TcpAbsence;

/// Room for the saved headers: an IPv4 header of at most 60 bytes or an IPv6 header with its
/// extension headers, and a TCP header of at most 60 (RFC 9293 section 3.1). The kernel refuses
/// a shorter buffer (`EINVAL`) rather than truncate.
const SAVED_SYN_CAP: usize = 512;

/// What a connection's SYN is to the analysis: its headers, or why there are none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SavedSyn {
    /// The network and TCP headers, as the kernel kept them.
    Saved(Vec<u8>),
    /// Why there is no SYN to read.
    Absent(TcpAbsence),
}

impl SavedSyn {
    /// The SYN as the analysis reads it.
    pub fn source(&self) -> SynSource<'_> {
        match self {
            Self::Saved(bytes) => SynSource::Saved(bytes),
            Self::Absent(reason) => SynSource::Absent(*reason),
        }
    }
}

/// Asks the kernel to keep the SYN of every connection `listener` accepts.
///
/// # Errors
/// The kernel's, on a system without `TCP_SAVE_SYN` (not Linux, or before Linux 4.2).
#[cfg(target_os = "linux")]
pub fn keep(listener: &impl AsRawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `listener` owns an open socket for the duration of the call; the value pointer
    // and length describe `on`, a live `c_int` the kernel only reads.
    let result = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_SAVE_SYN,
            std::ptr::from_ref(&on).cast(),
            len,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Takes the SYN the kernel kept for the accepted connection `stream` (once: the kernel frees
/// it). `Absent(NotSaved)` when it kept none: SYN cookies were in use, or the listener did not
/// ask.
#[cfg(target_os = "linux")]
pub fn take(stream: &impl AsRawFd) -> SavedSyn {
    // On the stack: the connection keeps only the bytes the kernel wrote (~60 to 120).
    let mut buf = [0_u8; SAVED_SYN_CAP];
    let mut len = SAVED_SYN_CAP as libc::socklen_t;
    // SAFETY: `stream` owns an open socket for the duration of the call; the value pointer and
    // `len` describe `buf`, which lives across the call, and the kernel writes at most `len`
    // bytes into it and the length it wrote into `len`.
    let result = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_SAVED_SYN,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let written = usize::try_from(len).ok().filter(|len| *len > 0);
    match written.and_then(|len| buf.get(..len)) {
        Some(bytes) if result == 0 => SavedSyn::Saved(bytes.to_vec()),
        _ => SavedSyn::Absent(TcpAbsence::NotSaved),
    }
}

/// Without Linux's `TCP_SAVE_SYN` there is no SYN to keep.
#[cfg(not(target_os = "linux"))]
pub fn keep(_listener: &impl AsRawFd) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Without Linux's `TCP_SAVE_SYN` there is no SYN to take.
#[cfg(not(target_os = "linux"))]
pub fn take(_stream: &impl AsRawFd) -> SavedSyn {
    SavedSyn::Absent(TcpAbsence::Unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener that kept the SYN hands over headers that start with the IP version the
    /// client connected over, once; a listener that did not ask has none.
    #[tokio::test]
    async fn the_kernel_hands_a_kept_syn_over_once() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        keep(&listener).unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let SavedSyn::Saved(bytes) = take(&accepted) else {
            panic!("no SYN kept");
        };
        assert_eq!(bytes.first().map(|b| b >> 4), Some(4));
        assert_eq!(take(&accepted), SavedSyn::Absent(TcpAbsence::NotSaved));

        let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = tokio::net::TcpStream::connect(plain.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, _) = plain.accept().await.unwrap();
        assert_eq!(take(&accepted), SavedSyn::Absent(TcpAbsence::NotSaved));
    }
}
