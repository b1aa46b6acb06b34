//! p0f v3's signature of a SYN, as `p0f -r` prints it in `raw_sig` (p0f README, section 5,
//! "TCP signatures"): `ver:ttl+dist:olen:mss:wsize,scale:olayout:quirks:pclass`.

use super::options::OptionKind;
use super::syn::Syn;
use crate::text::push_decimal;

/// Beyond this many hops p0f does not trust its distance guess and prints `ttl+?`
/// (p0f's `MAX_DIST`).
const MAX_DIST: u8 = 35;
/// IPv4 + TCP and IPv6 + TCP headers without options: what an MTU exceeds an MSS by.
const MIN_TCP4: u32 = 40;
const MIN_TCP6: u32 = 60;
/// The Ethernet MTU, which some stacks size their window by whatever the link.
const ETHERNET_MTU: u32 = 1500;
/// The bytes of a timestamps option with its usual padding, which some stacks take off the MSS.
const TIMESTAMP_OVERHEAD: u32 = 12;

/// How p0f writes a window: a multiple of the MSS or the MTU, or the number itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WindowForm {
    /// `mss*n`.
    Mss(u32),
    /// `mtu*n`.
    Mtu(u32),
    /// The window as sent.
    Literal(u16),
}

impl Syn {
    /// The window as p0f writes it. Many stacks size their first window as a multiple of the
    /// MSS or the MTU (README section 5, "wsize"); the divisors are tried in p0f's order, so the
    /// two agree on which multiple a window is: the MSS; with timestamps on, the MSS less their
    /// 12 bytes; the MSS of a 1500-byte IPv4 (and IPv6) link, with and without those 12; then
    /// the MTU of the MSS over IPv4, over this packet's own headers, over IPv6; and 1500.
    pub(crate) fn window_form(&self) -> WindowForm {
        let window = u32::from(self.window);
        let mss = u32::from(self.options.mss.unwrap_or(0));
        if window == 0 || mss < 100 {
            return WindowForm::Literal(self.window);
        }
        let ipv6 = self.ip.version == 6;
        let timestamped = self.options.timestamp.is_some_and(|(tsval, _)| tsval != 0);
        let headers = u32::try_from(self.ip.header_len + self.tcp_header_len).unwrap_or(u32::MAX);
        let mss_divisors = [
            Some(mss),
            timestamped.then(|| mss - TIMESTAMP_OVERHEAD),
            Some(ETHERNET_MTU - MIN_TCP4),
            Some(ETHERNET_MTU - MIN_TCP4 - TIMESTAMP_OVERHEAD),
            ipv6.then_some(ETHERNET_MTU - MIN_TCP6),
            ipv6.then_some(ETHERNET_MTU - MIN_TCP6 - TIMESTAMP_OVERHEAD),
        ];
        if let Some(divisor) = mss_divisors.into_iter().flatten().find(|d| window % d == 0) {
            return WindowForm::Mss(window / divisor);
        }
        let mtu_divisors = [
            Some(mss + MIN_TCP4),
            Some(mss + headers),
            ipv6.then_some(mss + MIN_TCP6),
            Some(ETHERNET_MTU),
        ];
        match mtu_divisors.into_iter().flatten().find(|d| window % d == 0) {
            Some(divisor) => WindowForm::Mtu(window / divisor),
            None => WindowForm::Literal(self.window),
        }
    }

    /// The p0f v3 signature, exactly as `p0f -r` prints it in `raw_sig`.
    pub fn p0f_signature(&self) -> String {
        let mut out = String::with_capacity(64);
        push_decimal(&mut out, self.ip.version);
        out.push(':');
        push_decimal(&mut out, self.ip.ttl);
        out.push('+');
        match self.hops() {
            hops if hops > MAX_DIST => out.push('?'),
            hops => push_decimal(&mut out, hops),
        }
        out.push(':');
        push_decimal(&mut out, self.ip.options_len);
        out.push(':');
        push_decimal(&mut out, self.options.mss.unwrap_or(0));
        out.push(':');
        match self.window_form() {
            WindowForm::Mss(n) => {
                out.push_str("mss*");
                push_decimal(&mut out, n);
            }
            WindowForm::Mtu(n) => {
                out.push_str("mtu*");
                push_decimal(&mut out, n);
            }
            WindowForm::Literal(window) => push_decimal(&mut out, window),
        }
        out.push(',');
        push_decimal(&mut out, self.options.window_scale.unwrap_or(0));
        out.push(':');
        for (i, kind) in self.options.layout.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_layout_name(&mut out, *kind, self.options.eol_pad);
        }
        out.push(':');
        for (i, name) in self.quirks.names().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(name);
        }
        out.push_str(if self.payload_len > 0 { ":+" } else { ":0" });
        out
    }
}

/// An option's name in p0f's `olayout`.
fn push_layout_name(out: &mut String, kind: OptionKind, eol_pad: u8) {
    match kind {
        OptionKind::EOL => {
            out.push_str("eol+");
            push_decimal(out, eol_pad);
        }
        OptionKind::NOP => out.push_str("nop"),
        OptionKind::MSS => out.push_str("mss"),
        OptionKind::WINDOW_SCALE => out.push_str("ws"),
        OptionKind::SACK_PERMITTED => out.push_str("sok"),
        OptionKind::SACK => out.push_str("sack"),
        OptionKind::TIMESTAMPS => out.push_str("ts"),
        OptionKind(other) => {
            out.push('?');
            push_decimal(out, other);
        }
    }
}
