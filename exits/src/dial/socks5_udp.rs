//! UDP through a SOCKS5 exit: the `UDP ASSOCIATE` command (RFC 1928 section 4, command 3) and
//! the relay's datagram framing (section 7), as a socket quinn can drive ([`RelayedUdp`]).
//!
//! `tokio-socks` has no UDP, so the negotiation is written here: method selection, RFC 1929
//! username/password, then `UDP ASSOCIATE`. The association lives as long as its TCP control
//! connection ([`Association::control`]); every datagram to the relay carries a header naming
//! the destination, and every datagram back carries one naming the source.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::io::ReadBuf;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

use super::socks5::Target;
use crate::error::{Phase, ProbeError};

/// RFC 1928 section 6 reply codes.
fn reply_reason(code: u8) -> &'static str {
    match code {
        1 => "general SOCKS server failure",
        2 => "connection not allowed by ruleset",
        3 => "network unreachable",
        4 => "host unreachable",
        5 => "connection refused",
        6 => "TTL expired",
        7 => "command not supported",
        8 => "address type not supported",
        _ => "unassigned reply code",
    }
}

fn io_error(error: &io::Error) -> ProbeError {
    ProbeError::io(Phase::Tunnel, "socks5 proxy", error)
}

/// A granted association: the relay to send datagrams to, and the TCP connection that keeps the
/// association alive (RFC 1928 section 7: it ends when the TCP connection does).
#[derive(Debug)]
pub struct Association {
    /// The TCP control connection; dropping it ends the association.
    pub control: TcpStream,
    /// Where the relay listens for the client's datagrams.
    pub relay: SocketAddr,
}

/// Negotiates `UDP ASSOCIATE` on `tcp`, with username/password when `auth` is given.
///
/// # Errors
/// Auth failures ([`ProbeError::ProxyAuth`]), a refusal ([`ProbeError::SocksReply`]: dante
/// answers 2 when its rules do not grant `udpassociate`), malformed replies and I/O errors.
pub async fn associate(
    mut tcp: TcpStream,
    auth: Option<(&str, &str)>,
) -> Result<Association, ProbeError> {
    // Method selection (section 3): no auth, or username/password (0x02, RFC 1929).
    let method = if auth.is_some() { 0x02 } else { 0x00 };
    tcp.write_all(&[5, 1, method])
        .await
        .map_err(|e| io_error(&e))?;
    let mut choice = [0_u8; 2];
    tcp.read_exact(&mut choice)
        .await
        .map_err(|e| io_error(&e))?;
    if choice[0] != 5 {
        return Err(ProbeError::ProxyProtocol("not a SOCKS5 method selection"));
    }
    if choice[1] != method {
        return Err(ProbeError::ProxyAuth {
            detail: "socks5 no acceptable authentication method".to_owned(),
        });
    }
    if let Some((user, pass)) = auth {
        let (user, pass) = (user.as_bytes(), pass.as_bytes());
        let (Ok(user_len), Ok(pass_len)) = (u8::try_from(user.len()), u8::try_from(pass.len()))
        else {
            return Err(ProbeError::Unsupported(
                "SOCKS5 user name and password must be 1–255 bytes",
            ));
        };
        let mut request = Vec::with_capacity(3 + user.len() + pass.len());
        request.extend_from_slice(&[1, user_len]);
        request.extend_from_slice(user);
        request.push(pass_len);
        request.extend_from_slice(pass);
        tcp.write_all(&request).await.map_err(|e| io_error(&e))?;
        let mut status = [0_u8; 2];
        tcp.read_exact(&mut status)
            .await
            .map_err(|e| io_error(&e))?;
        if status[1] != 0 {
            return Err(ProbeError::ProxyAuth {
                detail: format!("socks5 auth status {}", status[1]),
            });
        }
    }
    // UDP ASSOCIATE with DST 0.0.0.0:0: the client does not know the address its datagrams
    // will come from (section 4), so the relay takes them from the control connection's host.
    tcp.write_all(&[5, 3, 0, 1, 0, 0, 0, 0, 0, 0])
        .await
        .map_err(|e| io_error(&e))?;
    let mut head = [0_u8; 4];
    tcp.read_exact(&mut head).await.map_err(|e| io_error(&e))?;
    if head[0] != 5 {
        return Err(ProbeError::ProxyProtocol("not a SOCKS5 reply"));
    }
    if head[1] != 0 {
        return Err(ProbeError::SocksReply {
            code: head[1],
            reason: reply_reason(head[1]),
        });
    }
    let ip = match head[3] {
        1 => {
            let mut octets = [0_u8; 4];
            tcp.read_exact(&mut octets)
                .await
                .map_err(|e| io_error(&e))?;
            IpAddr::from(octets)
        }
        4 => {
            let mut octets = [0_u8; 16];
            tcp.read_exact(&mut octets)
                .await
                .map_err(|e| io_error(&e))?;
            IpAddr::from(octets)
        }
        _ => return Err(ProbeError::ProxyProtocol("UDP relay address is not an IP")),
    };
    let port = tcp.read_u16().await.map_err(|e| io_error(&e))?;
    let proxy = tcp.peer_addr().map_err(|e| io_error(&e))?.ip();
    Ok(Association {
        control: tcp,
        relay: SocketAddr::new(relay_ip(ip, proxy), port),
    })
}

/// Where to send datagrams, from the relay address a server granted and the address the
/// auditor reached it on. An unspecified address means "the address you reached me on"; a
/// server behind NAT often names its own private address, which the auditor cannot reach when
/// it reached the server on a public one, so that one is used instead (the relay listens on the
/// same host).
fn relay_ip(granted: IpAddr, proxy: IpAddr) -> IpAddr {
    let private = |ip: IpAddr| match ip.to_canonical() {
        IpAddr::V4(v4) => v4.is_private() || v4.is_link_local() || v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.is_unicast_link_local() || (v6.segments()[0] & 0xfe00) == 0xfc00
        }
    };
    if granted.is_unspecified() || (private(granted) && !private(proxy)) {
        proxy
    } else {
        granted
    }
}

/// The section 7 header for a datagram to `target`.
fn header(target: &Target) -> Result<Vec<u8>, ProbeError> {
    let mut out = vec![0, 0, 0];
    match target {
        Target::Addr(SocketAddr::V4(addr)) => {
            out.push(1);
            out.extend_from_slice(&addr.ip().octets());
            out.extend_from_slice(&addr.port().to_be_bytes());
        }
        Target::Addr(SocketAddr::V6(addr)) => {
            out.push(4);
            out.extend_from_slice(&addr.ip().octets());
            out.extend_from_slice(&addr.port().to_be_bytes());
        }
        Target::Name(host, port) => {
            let len = u8::try_from(host.len())
                .map_err(|_| ProbeError::Unsupported("echo host name longer than 255 bytes"))?;
            out.extend_from_slice(&[3, len]);
            out.extend_from_slice(host.as_bytes());
            out.extend_from_slice(&port.to_be_bytes());
        }
    }
    Ok(out)
}

/// The length of a section 7 header at the start of `datagram`, or `None` when it is not one
/// (a fragment, FRAG ≠ 0, is not one either: reassembly is optional and nothing sends them).
fn header_len(datagram: &[u8]) -> Option<usize> {
    let (&[0, 0, 0, atyp], rest) = datagram.split_first_chunk::<4>()? else {
        return None;
    };
    let addr_len = match atyp {
        1 => 4,
        4 => 16,
        3 => 1 + usize::from(*rest.first()?),
        _ => return None,
    };
    let len = 4 + addr_len + 2;
    (datagram.len() >= len).then_some(len)
}

/// A UDP socket whose datagrams go through a SOCKS5 relay to one target. quinn sees a plain
/// socket talking to `remote`: every datagram it sends goes to the relay with the target's
/// header, and every datagram from the relay is handed up as coming from `remote`.
pub struct RelayedUdp {
    socket: UdpSocket,
    relay: SocketAddr,
    remote: SocketAddr,
    header: Vec<u8>,
}

impl fmt::Debug for RelayedUdp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RelayedUdp")
            .field("relay", &self.relay)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

impl RelayedUdp {
    /// A socket bound beside the control connection's local address (so the relay sees the
    /// datagrams come from the host it granted the association to), relaying to `target`;
    /// quinn is to connect to `remote`.
    ///
    /// # Errors
    /// Binding fails, or the target cannot be written in a header.
    pub async fn bind(
        association: &Association,
        target: &Target,
        remote: SocketAddr,
    ) -> Result<Self, ProbeError> {
        let local = association.control.local_addr().map_err(|e| io_error(&e))?;
        let socket = UdpSocket::bind(SocketAddr::new(local.ip(), 0))
            .await
            .map_err(|e| io_error(&e))?;
        Ok(Self {
            socket,
            relay: association.relay,
            remote,
            header: header(target)?,
        })
    }
}

impl AsyncUdpSocket for RelayedUdp {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(Writable(self))
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        let mut datagram = Vec::with_capacity(self.header.len() + transmit.contents.len());
        datagram.extend_from_slice(&self.header);
        datagram.extend_from_slice(transmit.contents);
        self.socket.try_send_to(&datagram, self.relay).map(drop)
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let (Some(buf), Some(meta)) = (bufs.first_mut(), meta.first_mut()) else {
            return Poll::Ready(Ok(0));
        };
        loop {
            let mut read = ReadBuf::new(&mut buf[..]);
            let from = match self.socket.poll_recv_from(cx, &mut read) {
                Poll::Ready(Ok(from)) => from,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => return Poll::Pending,
            };
            let filled = read.filled().len();
            // Only the relay's framed datagrams count; anything else is dropped unread.
            let Some(start) = header_len(&buf[..filled]).filter(|_| from == self.relay) else {
                continue;
            };
            buf.copy_within(start..filled, 0);
            let len = filled - start;
            *meta = RecvMeta {
                addr: self.remote,
                len,
                stride: len,
                ecn: None,
                dst_ip: None,
            };
            return Poll::Ready(Ok(1));
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }
}

/// Write readiness of a [`RelayedUdp`].
#[derive(Debug)]
struct Writable(Arc<RelayedUdp>);

impl UdpPoller for Writable {
    fn poll_writable(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.socket.poll_send_ready(cx)
    }
}

/// A stand-in address for quinn when the target is a name the relay resolves (`socks5h`): the
/// relayed socket sends everything to the relay and never to it, but quinn refuses an
/// unspecified remote, so it is the loopback address.
pub fn placeholder_remote(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv6Addr;

    use super::*;

    #[test]
    fn headers_name_the_target() {
        let v4 = header(&Target::Addr("127.0.0.1:8443".parse().unwrap())).unwrap();
        assert_eq!(v4, [0, 0, 0, 1, 127, 0, 0, 1, 0x20, 0xfb]);
        let name = header(&Target::Name("echo".into(), 443)).unwrap();
        assert_eq!(name, [0, 0, 0, 3, 4, b'e', b'c', b'h', b'o', 1, 0xbb]);
        let v6 = header(&Target::Addr(SocketAddr::new(
            Ipv6Addr::LOCALHOST.into(),
            1,
        )))
        .unwrap();
        assert_eq!(v6.len(), 4 + 16 + 2);
        for h in [&v4, &name, &v6] {
            assert_eq!(header_len(h), Some(h.len()));
        }
    }

    #[test]
    fn relay_address_falls_back_to_the_proxy_behind_nat() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // What the server granted, when the auditor can reach it.
        assert_eq!(
            relay_ip(ip("203.0.113.9"), ip("203.0.113.7")),
            ip("203.0.113.9")
        );
        assert_eq!(relay_ip(ip("127.0.0.1"), ip("127.0.0.1")), ip("127.0.0.1"));
        assert_eq!(relay_ip(ip("10.0.0.5"), ip("10.0.0.4")), ip("10.0.0.5"));
        // Unspecified, or private behind a public address: the proxy's own address.
        assert_eq!(
            relay_ip(ip("0.0.0.0"), ip("203.0.113.7")),
            ip("203.0.113.7")
        );
        assert_eq!(relay_ip(ip("::"), ip("2001:db8::7")), ip("2001:db8::7"));
        assert_eq!(
            relay_ip(ip("192.168.1.20"), ip("203.0.113.7")),
            ip("203.0.113.7")
        );
        assert_eq!(
            relay_ip(ip("fd00::20"), ip("2001:db8::7")),
            ip("2001:db8::7")
        );
    }

    #[test]
    fn header_len_refuses_fragments_and_short_datagrams() {
        assert_eq!(header_len(&[0, 0, 1, 1, 127, 0, 0, 1, 0, 1]), None);
        assert_eq!(header_len(&[0, 0, 0, 1, 127, 0, 0]), None);
        assert_eq!(header_len(&[0, 0, 0, 9, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(header_len(&[0, 0, 0, 3]), None);
        assert_eq!(header_len(&[0, 0, 0, 3, 200, 1]), None);
        assert_eq!(
            header_len(&[0, 0, 0, 1, 127, 0, 0, 1, 0, 1, 0xc0]),
            Some(10)
        );
    }
}
