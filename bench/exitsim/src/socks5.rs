//! SOCKS5 exits (RFC 1928) with username/password authentication (RFC 1929): the user name
//! picks the exit. Only `CONNECT` is served; targets may be IPv4, IPv6 or a name (`socks5h`).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::tunnel::{self, TunnelError};
use crate::users::Holder;
use crate::Sim;

/// Longest wait for the whole negotiation (greeting, authentication, request).
const NEGOTIATION_TIMEOUT: Duration = Duration::from_secs(10);

/// RFC 1928 section 3: version 5; method 0x02 is username/password, 0xff "no acceptable".
const VERSION: u8 = 0x05;
const USER_PASSWORD: u8 = 0x02;
const NO_ACCEPTABLE: u8 = 0xff;
/// RFC 1929 section 2: the subnegotiation's own version byte.
const AUTH_VERSION: u8 = 0x01;
/// RFC 1928 section 4: CONNECT.
const CONNECT: u8 = 0x01;
/// RFC 1928 section 4: UDP ASSOCIATE.
const UDP_ASSOCIATE: u8 = 0x03;

/// RFC 1928 section 6 reply codes.
#[derive(Clone, Copy, Debug)]
enum Reply {
    Succeeded = 0x00,
    NotAllowed = 0x02,
    HostUnreachable = 0x04,
    CommandNotSupported = 0x07,
    AddressTypeNotSupported = 0x08,
}

/// Serves one client connection.
pub async fn serve(mut client: TcpStream, sim: Arc<Sim>) {
    let negotiated = tokio::time::timeout(NEGOTIATION_TIMEOUT, negotiate(&mut client, &sim)).await;
    let (exit, host, port) = match negotiated {
        Ok(Ok(target)) => target,
        Ok(Err(Refused::UdpAssociate)) => {
            sim.tally.refuse_udp();
            return;
        }
        _ => {
            sim.tally.refuse();
            return;
        }
    };
    let upstream = match tunnel::connect(&host, port).await {
        Ok(upstream) => upstream,
        Err(error) => {
            let code = match error {
                TunnelError::NotLoopback => Reply::NotAllowed,
                TunnelError::Unresolved | TunnelError::Unreachable => Reply::HostUnreachable,
            };
            sim.tally.refuse();
            let _ = reply(&mut client, code).await;
            return;
        }
    };
    let Some(open) = sim.tally.open(&exit, sim.counts(port)) else {
        sim.tally.refuse();
        return;
    };
    if reply(&mut client, Reply::Succeeded).await.is_err() {
        return;
    }
    tunnel::relay(client, upstream, &[], open).await;
}

/// A negotiation that ended without a tunnel (the client was told why where the protocol has
/// a way to say it).
#[derive(Debug)]
enum Refused {
    /// A `UDP ASSOCIATE` (the auditor's QUIC probe): the simulator carries TCP only.
    UdpAssociate,
    /// Anything else.
    Other,
}

impl From<std::io::Error> for Refused {
    fn from(_: std::io::Error) -> Self {
        Refused::Other
    }
}

/// Greeting, authentication and request: the exit number and the target.
async fn negotiate(client: &mut TcpStream, sim: &Sim) -> Result<(Holder, String, u16), Refused> {
    // Greeting: VER NMETHODS METHODS…
    let [version, count] = read_array(client).await?;
    let methods = read_vec(client, count).await?;
    if version != VERSION {
        return Err(Refused::Other);
    }
    if !methods.contains(&USER_PASSWORD) {
        client.write_all(&[VERSION, NO_ACCEPTABLE]).await?;
        return Err(Refused::Other);
    }
    client.write_all(&[VERSION, USER_PASSWORD]).await?;

    // RFC 1929: VER ULEN UNAME PLEN PASSWD; status 0 is success.
    let [auth_version, user_len] = read_array(client).await?;
    let user = read_vec(client, user_len).await?;
    let [password_len] = read_array(client).await?;
    let password = read_vec(client, password_len).await?;
    let exit = (auth_version == AUTH_VERSION)
        .then(|| sim.users.exit_of(&user, &password))
        .flatten();
    let Some(exit) = exit else {
        client.write_all(&[AUTH_VERSION, 0x01]).await?;
        return Err(Refused::Other);
    };
    client.write_all(&[AUTH_VERSION, 0x00]).await?;

    // Request: VER CMD RSV ATYP DST.ADDR DST.PORT
    let [version, command, _reserved, address_type] = read_array(client).await?;
    let host = match address_type {
        0x01 => Ipv4Addr::from(read_array::<4>(client).await?).to_string(),
        0x03 => {
            let [len] = read_array(client).await?;
            String::from_utf8(read_vec(client, len).await?).map_err(|_| Refused::Other)?
        }
        0x04 => Ipv6Addr::from(read_array::<16>(client).await?).to_string(),
        _ => {
            reply(client, Reply::AddressTypeNotSupported).await?;
            return Err(Refused::Other);
        }
    };
    let port = u16::from_be_bytes(read_array(client).await?);
    if version != VERSION || command != CONNECT {
        reply(client, Reply::CommandNotSupported).await?;
        return Err(if version == VERSION && command == UDP_ASSOCIATE {
            Refused::UdpAssociate
        } else {
            Refused::Other
        });
    }
    Ok((exit, host, port))
}

async fn read_array<const N: usize>(client: &mut TcpStream) -> std::io::Result<[u8; N]> {
    let mut buf = [0u8; N];
    client.read_exact(&mut buf).await?;
    Ok(buf)
}

async fn read_vec(client: &mut TcpStream, len: u8) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; usize::from(len)];
    client.read_exact(&mut buf).await?;
    Ok(buf)
}

/// A reply with BND.ADDR 0.0.0.0:0: the client has no use for the simulator's own address.
async fn reply(client: &mut TcpStream, code: Reply) -> std::io::Result<()> {
    client
        .write_all(&[VERSION, code as u8, 0x00, 0x01, 0, 0, 0, 0, 0, 0])
        .await
}
