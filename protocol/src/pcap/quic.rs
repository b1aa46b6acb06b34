//! QUIC client Initials in a capture's UDP datagrams: each client's first flight is followed
//! until its ClientHello is complete, with [`crate::quic::ClientInitials`].
//!
//! An attempt is keyed by the client's and server's addresses. It starts with a datagram that
//! opens as a client's first Initial ([`ClientInitials::start`]: version 1 or 2, at least 1200
//! bytes, DCID of 8 bytes or more, decrypts with the keys of that DCID); datagrams that do not,
//! such as the server's Initials, GREASE-version probes or later client Initials after the
//! hello, are left alone. A later first flight on the same addresses with another DCID starts a
//! new attempt (a new connection reusing the port).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use crate::codec::Reader;
use crate::quic::{ClientInitials, InitialPacket, QuicError, Version};

/// Most QUIC attempts followed in one capture.
pub(crate) const MAX_ATTEMPTS: usize = 65_536;

/// One client's QUIC Initials found in a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuicConnection {
    /// The client end.
    pub client: SocketAddr,
    /// The server end.
    pub server: SocketAddr,
    /// 1-based number of the frame that carried the client's first Initial.
    pub first_frame: usize,
    /// The QUIC version.
    pub version: Version,
    /// Length of the Destination Connection ID of the client's first Initial.
    pub first_dcid_len: usize,
    /// The Initial packets opened, in capture order.
    pub packets: Vec<InitialPacket>,
    /// Sizes of the client's datagrams read, in capture order.
    pub datagram_sizes: Vec<usize>,
    /// The reassembled ClientHello handshake message (`01 LL LL LL …`), when complete.
    pub client_hello: Option<Vec<u8>>,
    /// Why reading stopped before the hello was complete, if it did.
    pub error: Option<QuicError>,
}

/// An attempt being followed.
struct Attempt {
    client: SocketAddr,
    server: SocketAddr,
    first_frame: usize,
    initials: ClientInitials,
    error: Option<QuicError>,
}

/// Follows QUIC attempts over a capture's UDP datagrams.
#[derive(Default)]
pub(crate) struct Tracker {
    connections: Vec<Attempt>,
    /// The open attempt of each (client, server) pair: its index in `connections`.
    open: HashMap<(SocketAddr, SocketAddr), usize>,
    /// More than [`MAX_ATTEMPTS`] attempts were seen; the later ones were not followed.
    pub(crate) capped: bool,
}

/// The ports and payload of a UDP datagram (RFC 768), trimmed to its Length field.
fn udp(segment: &[u8]) -> Option<(u16, u16, &[u8])> {
    let mut r = Reader::new(segment);
    let src = r.u16()?;
    let dst = r.u16()?;
    let len = usize::from(r.u16()?);
    r.u16()?; // checksum
    let payload = r.rest();
    // Length counts the 8-byte header; 0 is a jumbogram or an offloaded checksum: keep all.
    let payload = match len.checked_sub(8) {
        Some(body) if len != 0 => payload.get(..body).unwrap_or(payload),
        _ => payload,
    };
    Some((src, dst, payload))
}

impl Tracker {
    /// Reads one UDP datagram (header included) sent from `src` to `dst`.
    pub(crate) fn add(&mut self, src: IpAddr, dst: IpAddr, segment: &[u8], frame: usize) {
        let Some((src_port, dst_port, payload)) = udp(segment) else {
            return;
        };
        // Only long-header packets can be Initials (RFC 9000 section 17.2).
        if payload.first().is_none_or(|b| b & 0xc0 != 0xc0) {
            return;
        }
        let key = (
            SocketAddr::new(src, src_port),
            SocketAddr::new(dst, dst_port),
        );
        if let Some(conn) = self
            .open
            .get(&key)
            .and_then(|&i| self.connections.get_mut(i))
        {
            if conn.error.is_none() && conn.initials.client_hello().is_none() {
                if let Err(error) = conn.initials.push(payload) {
                    conn.error = Some(error);
                }
                return;
            }
        }
        let Ok(initials) = ClientInitials::start(payload) else {
            return;
        };
        // The same connection's later Initials (ACKs, retransmissions) reuse the first DCID:
        // not a new attempt.
        if let Some(conn) = self.open.get(&key).and_then(|&i| self.connections.get(i)) {
            if conn.initials.first_dcid() == initials.first_dcid() {
                return;
            }
        }
        if self.connections.len() >= MAX_ATTEMPTS {
            self.capped = true;
            return;
        }
        self.open.insert(key, self.connections.len());
        self.connections.push(Attempt {
            client: key.0,
            server: key.1,
            first_frame: frame,
            initials,
            error: None,
        });
    }

    /// The attempts, in order of their first frame.
    pub(crate) fn into_connections(self) -> Vec<QuicConnection> {
        self.connections
            .into_iter()
            .map(|a| QuicConnection {
                client: a.client,
                server: a.server,
                first_frame: a.first_frame,
                version: a.initials.version(),
                first_dcid_len: a.initials.first_dcid().len(),
                packets: a.initials.packets().to_vec(),
                datagram_sizes: a.initials.datagram_sizes().to_vec(),
                client_hello: a.initials.client_hello().map(<[u8]>::to_vec),
                error: a.error,
            })
            .collect()
    }
}
