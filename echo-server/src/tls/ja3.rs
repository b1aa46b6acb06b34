//! JA3 (salesforce/ja3, README.md and python/ja3.py) and JA3N, the same string with the
//! extension list sorted (spec: fingerprints.md section 1).
//!
//! `SSLVersion,Ciphers,Extensions,EllipticCurves,EllipticCurvePointFormats`, decimal numbers
//! joined by `-`, GREASE removed everywhere except the point formats, which are taken byte by
//! byte. A malformed supported_groups or ec_point_formats extension gives an empty field.

use super::client_hello::ClientHello;
use super::enums::ExtensionType;
use super::extension::ExtensionBody;
use super::grease::is_grease;

/// Appends `value` in decimal.
fn push_dec(out: &mut String, value: u16) {
    let mut digits = [0u8; 5];
    let mut n = value;
    let mut start = digits.len();
    loop {
        start -= 1;
        if let Some(slot) = digits.get_mut(start) {
            // `n % 10` is a single digit.
            *slot = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || start == 0 {
            break;
        }
    }
    for d in digits.iter().skip(start) {
        out.push(char::from(*d));
    }
}

/// Appends `values` in decimal joined by `-`.
fn push_list(out: &mut String, values: impl Iterator<Item = u16>) {
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push('-');
        }
        push_dec(out, v);
    }
}

/// The JA3 and JA3N strings of `hello`. `scratch` is reused for sorting.
pub(crate) fn ja3_strings(hello: &ClientHello<'_>, scratch: &mut Vec<u16>) -> (String, String) {
    let mut head = String::with_capacity(160);
    push_dec(&mut head, hello.legacy_version.0);
    head.push(',');
    push_list(
        &mut head,
        hello.cipher_suites.values().filter(|v| !is_grease(*v)),
    );
    head.push(',');

    let mut tail = String::with_capacity(48);
    tail.push(',');
    if let Some(ExtensionBody::SupportedGroups(groups)) =
        hello.extension(ExtensionType::SUPPORTED_GROUPS)
    {
        push_list(&mut tail, groups.values().filter(|v| !is_grease(*v)));
    }
    tail.push(',');
    if let Some(ExtensionBody::EcPointFormats(formats)) =
        hello.extension(ExtensionType::EC_POINT_FORMATS)
    {
        push_list(&mut tail, formats.values().map(u16::from));
    }

    let types = || {
        hello
            .extensions()
            .iter()
            .map(|e| e.kind.0)
            .filter(|v| !is_grease(*v))
    };
    let mut ja3 = String::with_capacity(head.len() + tail.len() + 128);
    ja3.push_str(&head);
    push_list(&mut ja3, types());
    ja3.push_str(&tail);

    scratch.clear();
    scratch.extend(types());
    scratch.sort_unstable();
    let mut ja3n = head;
    push_list(&mut ja3n, scratch.iter().copied());
    ja3n.push_str(&tail);
    (ja3, ja3n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal() {
        for v in [0u16, 7, 10, 99, 100, 771, 4865, 65535] {
            let mut s = String::new();
            push_dec(&mut s, v);
            assert_eq!(s, v.to_string());
        }
    }
}
