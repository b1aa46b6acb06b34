//! exitvoice exits: the exits file, proxy URLs, gateway sessions, and the dialers that open a
//! stream through an exit. The auditor probes with them; the broker leases what they describe.
//!
//! - [`config`]: the exits file (TOML or a plain list of proxy URLs) and the echo target;
//! - [`proxy_url`]: proxy URLs, parsed and redacted;
//! - [`Exit`], [`SessionMinter`]: one way out, and gateway session ids minted and retired;
//! - [`secret`]: passwords that never print;
//! - [`duration`]: durations as the exits file and the command line write them (`90m`);
//! - [`dial`]: HTTP CONNECT and SOCKS5 tunnels (and SOCKS5 UDP relays) through an exit;
//! - [`error`]: probe errors and their classes, as labels count them;
//! - [`tls`]: TLS to the echo server through a tunnel, its certificate judged by the echo's SPKI
//!   pin ([`leaf`]: the verifier that leaves that decision to its owner).
//!
//! Nothing here knows the auditor's probes or labels, or the echo server: both readers of the
//! exits file depend on this crate, and it depends on neither.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::dbg_macro))]

pub mod config;
pub mod dial;
pub mod duration;
pub mod error;
mod exit;
pub mod leaf;
pub mod proxy_url;
pub mod secret;
pub mod tls;

pub use config::{ConfigError, EchoTarget, ExitsFile};
pub use exit::{Exit, Session, SessionMinter, COUNTRY_PLACEHOLDER, SESSION_PLACEHOLDER};
pub use proxy_url::{ProxyScheme, ProxyUrl, UrlError};
pub use secret::Secret;
