//! The TCP voice: a hash of what a host's stack puts in its SYNs, with what the path changes
//! normalized away, so one exit host has one voice wherever it reaches us from.
//!
//! In: the initial TTL (not the received TTL: the hops vary), the IPv4 options' length, whether
//! an MSS was sent (not its value, which follows the link's MTU), the window in p0f's form
//! (`mss*44` stays `mss*44` over any link; a literal window stays literal), the window scale,
//! the options in wire order with the EOL padding, the quirks of the TCP stack (`ecn`, `ts1-`,
//! `opt+`, `bad`, …) and whether the SYN carried data.
//! Out: the IP layer's quirks (`df`, `id+`, `id-`, `0+`, `flow`), which an IPv6 SYN of the same
//! stack cannot have, so a host's IPv4 and IPv6 SYNs share one voice; the IP version itself; the
//! addresses, ports, sequence number and timestamp values, which change per connection.
//!
//! The description is a fixed sequence of bytes fed to sha256; the id is `tcpv1_` and the first
//! 12 digest bytes in hex, as the other voices are written. Changing what goes in means bumping
//! the `v1`.

use exitvoice_schema::VoiceId;
use sha2::{Digest as _, Sha256};

use super::quirks::Quirks;
use super::signature::WindowForm;
use super::syn::Syn;
use crate::text::hex_id;

/// Prefix of a TCP voice id; the `1` is the normalization version.
pub const VOICE_PREFIX: &str = "tcpv1_";

/// The normalized TCP voice of `syn`.
pub fn voice_id(syn: &Syn) -> VoiceId {
    let mut description = Vec::with_capacity(32 + syn.options.layout.len());
    description.push(syn.initial_ttl());
    description.push(syn.ip.options_len);
    description.push(u8::from(syn.options.mss.is_some()));
    let (form, value) = match syn.window_form() {
        WindowForm::Mss(n) => (1, n),
        WindowForm::Mtu(n) => (2, n),
        WindowForm::Literal(window) => (3, u32::from(window)),
    };
    description.push(form);
    description.extend_from_slice(&value.to_be_bytes());
    match syn.options.window_scale {
        Some(shift) => description.extend_from_slice(&[1, shift]),
        None => description.extend_from_slice(&[0, 0]),
    }
    description.push(u8::try_from(syn.options.layout.len()).unwrap_or(u8::MAX));
    description.extend(syn.options.layout.iter().map(|kind| kind.0));
    description.push(syn.options.eol_pad);
    let quirks = syn.quirks.without(Quirks::IP_LAYER);
    description.extend_from_slice(&quirks.0.to_be_bytes());
    description.push(u8::from(syn.payload_len > 0));
    let digest = Sha256::digest(&description);
    VoiceId(hex_id(VOICE_PREFIX, digest.get(..12).unwrap_or_default()))
}
