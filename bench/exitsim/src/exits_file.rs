//! The exits file for `exitvoice audit`: an `[echo]` table and one `[[exits]]` entry per
//! simulated exit, `sim-<n>` through the user name `exit-<n>` (the TOML format is documented in
//! `auditor/src/exits/config.rs`).
//!
//! With both listeners, even exits go through HTTP `CONNECT` and odd ones through `socks5h`.

use std::io::Write;
use std::net::SocketAddr;

use crate::users::user_name;

/// What the file describes.
#[derive(Debug)]
pub struct Spec<'a> {
    /// Exits written, `sim-0` upwards.
    pub exits: usize,
    /// The HTTP `CONNECT` listener, if any.
    pub http: Option<SocketAddr>,
    /// The SOCKS5 listener, if any.
    pub socks: Option<SocketAddr>,
    /// The shared password (URL-safe characters only, see `main.rs`).
    pub password: &'a str,
    /// The echo server's `https://host:port` URL.
    pub echo_url: &'a str,
    /// The echo certificate's pin (hex or `sha256//<base64>`).
    pub echo_pin: &'a str,
}

/// Writes the exits file for `spec` to `out`.
///
/// # Errors
/// Write failures.
pub fn write(out: &mut impl Write, spec: &Spec<'_>) -> std::io::Result<()> {
    writeln!(
        out,
        "[echo]\nurl = \"{}\"\nspki_sha256 = \"{}\"",
        spec.echo_url, spec.echo_pin
    )?;
    let proxies: Vec<(&str, SocketAddr)> = [("http", spec.http), ("socks5h", spec.socks)]
        .into_iter()
        .filter_map(|(scheme, addr)| addr.map(|a| (scheme, a)))
        .collect();
    for (index, (scheme, addr)) in (0..spec.exits).zip(proxies.iter().cycle()) {
        writeln!(
            out,
            "\n[[exits]]\nname = \"sim-{index}\"\nurl = \"{scheme}://{}:{}@{addr}\"",
            user_name(index),
            spec.password
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternates_listeners_and_names_each_exit() {
        let mut out = Vec::new();
        let spec = Spec {
            exits: 3,
            http: Some("127.0.0.1:1".parse().unwrap()),
            socks: Some("127.0.0.1:2".parse().unwrap()),
            password: "pw",
            echo_url: "https://127.0.0.1:3",
            echo_pin: "sha256//x",
        };
        write(&mut out, &spec).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "[echo]\nurl = \"https://127.0.0.1:3\"\nspki_sha256 = \"sha256//x\"\n\
             \n[[exits]]\nname = \"sim-0\"\nurl = \"http://exit-0:pw@127.0.0.1:1\"\n\
             \n[[exits]]\nname = \"sim-1\"\nurl = \"socks5h://exit-1:pw@127.0.0.1:2\"\n\
             \n[[exits]]\nname = \"sim-2\"\nurl = \"http://exit-2:pw@127.0.0.1:1\"\n"
        );
    }
}
