//! exitvoice pages for people: server-rendered HTML, readable without JavaScript.
//!
//! - [`fingerprint`]: the page a browser gets from the echo server, rendered from the same
//!   [`exitvoice_schema::Echo`] that `/api/all` answers for the request.
//! - [`dashboard`]: `exitvoice dashboard`, the audited exits of an auditor's database behind a
//!   token: the pool, each exit with its voice timeline, and the labels export.
//!
//! Both share one small stylesheet and one progressive-enhancement script ([`assets`]), served by
//! the binary itself: a page loads nothing from anywhere else.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::dbg_macro))]

pub mod assets;
pub mod dashboard;
pub mod fingerprint;
mod layout;
pub mod negotiate;

/// The `Content-Security-Policy` of every page: only this server's stylesheet and script, no
/// inline script, no framing. A browser then refuses (and reports in its console) anything a page
/// would load from elsewhere.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; \
     script-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; \
     frame-ancestors 'none'";
