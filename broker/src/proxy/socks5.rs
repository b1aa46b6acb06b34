//! The SOCKS5 server handshake (RFC 1928) with username/password authentication (RFC 1929),
//! `CONNECT` only: the user name is the lease request, the password the broker's token.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::client::Client;
use super::http_head::Target;

/// The SOCKS version byte.
pub const VERSION: u8 = 5;
/// RFC 1928 §3: username/password (RFC 1929).
const USER_PASSWORD: u8 = 2;
/// RFC 1928 §3: no acceptable method.
const NO_METHOD: u8 = 0xff;

/// A reply code of RFC 1928 §6.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Reply {
    /// Succeeded.
    Succeeded = 0,
    /// General SOCKS server failure (nothing free within the wait).
    GeneralFailure = 1,
    /// Connection not allowed by ruleset.
    NotAllowed = 2,
    /// Host unreachable (the exit could not reach the target).
    HostUnreachable = 4,
    /// Connection refused (the exit refused the tunnel).
    Refused = 5,
    /// TTL expired (the exit did not answer in time).
    TimedOut = 6,
    /// Command not supported.
    CommandNotSupported = 7,
    /// Address type not supported.
    AddressNotSupported = 8,
}

/// Why a SOCKS5 handshake ended.
#[derive(Debug, thiserror::Error)]
pub enum SocksError {
    /// The client's stream failed or ended.
    #[error("client: {0}")]
    Io(#[from] io::Error),
    /// A field the protocol does not have.
    #[error("not SOCKS5: {0}")]
    Protocol(&'static str),
    /// The client offered no username/password method (answered `0xff`).
    #[error("the client offers no username/password authentication")]
    NoMethod,
    /// A command other than `CONNECT`, or an unknown address type (answered with its code).
    #[error("{0:?}")]
    Unsupported(Reply),
}

/// Reads the greeting and the RFC 1929 credentials: the user name and password. The method is
/// chosen here; the credentials are answered by [`answer_credentials`] once judged.
///
/// # Errors
/// A broken or foreign greeting; a client without username/password is answered `0xff`.
pub async fn credentials(client: &mut Client) -> Result<(String, String), SocksError> {
    client.need(2).await?;
    let count = usize::from(client.read()[1]);
    client.need(2 + count).await?;
    let greeting = client.take(2 + count);
    if greeting[0] != VERSION {
        return Err(SocksError::Protocol("version"));
    }
    if !greeting[2..].contains(&USER_PASSWORD) {
        client.send(&[VERSION, NO_METHOD]).await?;
        return Err(SocksError::NoMethod);
    }
    client.send(&[VERSION, USER_PASSWORD]).await?;
    // RFC 1929 §2: VER(1) ULEN UNAME PLEN PASSWD.
    client.need(2).await?;
    if client.read()[0] != 1 {
        return Err(SocksError::Protocol("username/password version"));
    }
    let user_len = usize::from(client.read()[1]);
    client.need(2 + user_len + 1).await?;
    let pass_len = usize::from(client.read()[2 + user_len]);
    client.need(3 + user_len + pass_len).await?;
    let message = client.take(3 + user_len + pass_len);
    let user = String::from_utf8(message[2..2 + user_len].to_vec())
        .map_err(|_| SocksError::Protocol("user name is not UTF-8"))?;
    let password = String::from_utf8(message[3 + user_len..].to_vec())
        .map_err(|_| SocksError::Protocol("password is not UTF-8"))?;
    Ok((user, password))
}

/// Answers the credentials (RFC 1929 §2: status 0 admits, anything else refuses and the
/// connection closes).
///
/// # Errors
/// The client's stream.
pub async fn answer_credentials(client: &mut Client, admitted: bool) -> io::Result<()> {
    client.send(&[1, u8::from(!admitted)]).await
}

/// Reads the request: the target of a `CONNECT`.
///
/// # Errors
/// A broken request; another command or an unknown address type, answered with its code.
pub async fn request(client: &mut Client) -> Result<Target, SocksError> {
    // VER CMD RSV ATYP, then the address and the port.
    client.need(5).await?;
    let (version, command, kind) = (client.read()[0], client.read()[1], client.read()[3]);
    if version != VERSION {
        return Err(SocksError::Protocol("request version"));
    }
    let address_len = match kind {
        1 => 4,
        3 => 1 + usize::from(client.read()[4]),
        4 => 16,
        _ => {
            answer(client, Reply::AddressNotSupported).await?;
            return Err(SocksError::Unsupported(Reply::AddressNotSupported));
        }
    };
    client.need(4 + address_len + 2).await?;
    let message = client.take(4 + address_len + 2);
    if command != 1 {
        answer(client, Reply::CommandNotSupported).await?;
        return Err(SocksError::Unsupported(Reply::CommandNotSupported));
    }
    let address = &message[4..4 + address_len];
    let host = match kind {
        1 => Ipv4Addr::from(<[u8; 4]>::try_from(address).unwrap_or_default()).to_string(),
        4 => Ipv6Addr::from(<[u8; 16]>::try_from(address).unwrap_or_default()).to_string(),
        _ => {
            let name = std::str::from_utf8(&address[1..])
                .ok()
                .filter(|name| {
                    !name.is_empty()
                        && name
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
                })
                .ok_or(SocksError::Protocol("host name"))?;
            name.to_ascii_lowercase()
        }
    };
    let port = u16::from_be_bytes([message[4 + address_len], message[5 + address_len]]);
    if port == 0 {
        return Err(SocksError::Protocol("port 0"));
    }
    Ok(Target { host, port })
}

/// Sends reply `code` with an unspecified bound address (the exit's is no business of the
/// client's).
///
/// # Errors
/// The client's stream.
pub async fn answer(client: &mut Client, code: Reply) -> io::Result<()> {
    client
        .send(&[VERSION, code as u8, 0, 1, 0, 0, 0, 0, 0, 0])
        .await
}
