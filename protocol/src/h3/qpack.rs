//! QPACK field sections (RFC 9204 section 4.5) as a server that forbids the dynamic table reads
//! them: it sends no SETTINGS_QPACK_MAX_TABLE_CAPACITY (default 0, section 3.2.3), so a client
//! can only use the static table (Appendix A) and literals; Huffman strings use HPACK's code
//! (RFC 7541 Appendix B, by RFC 9204 section 4.1.2). Fields come out in wire order.

use serde::Serialize;

use super::H3Error;
use crate::codec::Reader;
use crate::h2::hpack::huffman;

/// Most bytes of names and values one decoded field section may hold.
const MAX_FIELD_SECTION: usize = 64 * 1024;

/// The QPACK static table (RFC 9204 Appendix A), index 0 to 98.
pub const STATIC_TABLE: [(&str, &str); 99] = [
    (":authority", ""),
    (":path", "/"),
    ("age", "0"),
    ("content-disposition", ""),
    ("content-length", "0"),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("referer", ""),
    ("set-cookie", ""),
    (":method", "CONNECT"),
    (":method", "DELETE"),
    (":method", "GET"),
    (":method", "HEAD"),
    (":method", "OPTIONS"),
    (":method", "POST"),
    (":method", "PUT"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "103"),
    (":status", "200"),
    (":status", "304"),
    (":status", "404"),
    (":status", "503"),
    ("accept", "*/*"),
    ("accept", "application/dns-message"),
    ("accept-encoding", "gzip, deflate, br"),
    ("accept-ranges", "bytes"),
    ("access-control-allow-headers", "cache-control"),
    ("access-control-allow-headers", "content-type"),
    ("access-control-allow-origin", "*"),
    ("cache-control", "max-age=0"),
    ("cache-control", "max-age=2592000"),
    ("cache-control", "max-age=604800"),
    ("cache-control", "no-cache"),
    ("cache-control", "no-store"),
    ("cache-control", "public, max-age=31536000"),
    ("content-encoding", "br"),
    ("content-encoding", "gzip"),
    ("content-type", "application/dns-message"),
    ("content-type", "application/javascript"),
    ("content-type", "application/json"),
    ("content-type", "application/x-www-form-urlencoded"),
    ("content-type", "image/gif"),
    ("content-type", "image/jpeg"),
    ("content-type", "image/png"),
    ("content-type", "text/css"),
    ("content-type", "text/html; charset=utf-8"),
    ("content-type", "text/plain"),
    ("content-type", "text/plain;charset=utf-8"),
    ("range", "bytes=0-"),
    ("strict-transport-security", "max-age=31536000"),
    (
        "strict-transport-security",
        "max-age=31536000; includesubdomains",
    ),
    (
        "strict-transport-security",
        "max-age=31536000; includesubdomains; preload",
    ),
    ("vary", "accept-encoding"),
    ("vary", "origin"),
    ("x-content-type-options", "nosniff"),
    ("x-xss-protection", "1; mode=block"),
    (":status", "100"),
    (":status", "204"),
    (":status", "206"),
    (":status", "302"),
    (":status", "400"),
    (":status", "403"),
    (":status", "421"),
    (":status", "425"),
    (":status", "500"),
    ("accept-language", ""),
    ("access-control-allow-credentials", "FALSE"),
    ("access-control-allow-credentials", "TRUE"),
    ("access-control-allow-headers", "*"),
    ("access-control-allow-methods", "get"),
    ("access-control-allow-methods", "get, post, options"),
    ("access-control-allow-methods", "options"),
    ("access-control-expose-headers", "content-length"),
    ("access-control-request-headers", "content-type"),
    ("access-control-request-method", "get"),
    ("access-control-request-method", "post"),
    ("alt-svc", "clear"),
    ("authorization", ""),
    (
        "content-security-policy",
        "script-src 'none'; object-src 'none'; base-uri 'none'",
    ),
    ("early-data", "1"),
    ("expect-ct", ""),
    ("forwarded", ""),
    ("if-range", ""),
    ("origin", ""),
    ("purpose", "prefetch"),
    ("server", ""),
    ("timing-allow-origin", "*"),
    ("upgrade-insecure-requests", "1"),
    ("user-agent", ""),
    ("x-forwarded-for", ""),
    ("x-frame-options", "deny"),
    ("x-frame-options", "sameorigin"),
];

/// One decoded field line, wire order kept by its position in the list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HeaderField {
    /// The name (lossy UTF-8).
    pub name: String,
    /// The value (lossy UTF-8).
    pub value: String,
}

impl HeaderField {
    /// Whether the field is a pseudo-header (RFC 9114 section 4.3).
    pub fn is_pseudo(&self) -> bool {
        self.name.starts_with(':')
    }
}

/// A prefixed integer with an `n`-bit prefix whose first byte is `first` (RFC 9204 section
/// 4.1.1, which is RFC 7541 section 5.1).
fn prefixed_int(first: u8, n: u32, r: &mut Reader<'_>) -> Result<u64, H3Error> {
    let max = (1_u64 << n) - 1;
    let mut value = u64::from(first) & max;
    if value < max {
        return Ok(value);
    }
    let mut shift = 0_u32;
    loop {
        let byte = r.u8().ok_or(H3Error::Truncated { field: "integer" })?;
        let chunk = u64::from(byte & 0x7f);
        if shift > 56 {
            return Err(H3Error::IntegerOverflow);
        }
        value = value
            .checked_add(chunk << shift)
            .ok_or(H3Error::IntegerOverflow)?;
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// A string literal whose Huffman flag is bit `huffman_bit` of `first` and whose length has an
/// `n`-bit prefix (RFC 9204 section 4.1.2).
fn string(first: u8, huffman_bit: u8, n: u32, r: &mut Reader<'_>) -> Result<String, H3Error> {
    let len = prefixed_int(first, n, r)?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&len| len <= MAX_FIELD_SECTION)
        .ok_or(H3Error::FieldSectionTooLarge(MAX_FIELD_SECTION))?;
    let raw = r.take(len).ok_or(H3Error::Truncated { field: "string" })?;
    if first & huffman_bit == 0 {
        return Ok(String::from_utf8_lossy(raw).into_owned());
    }
    let mut out = vec![0; huffman::max_decoded_len(raw.len())];
    let written = huffman::decode(raw, &mut out)?;
    out.truncate(written);
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn static_entry(index: u64) -> Result<(&'static str, &'static str), H3Error> {
    usize::try_from(index)
        .ok()
        .and_then(|i| STATIC_TABLE.get(i))
        .copied()
        .ok_or(H3Error::StaticIndex(index))
}

/// Decodes a HEADERS frame's payload into its fields, wire order.
///
/// # Errors
/// An [`H3Error`] on truncation, a dynamic table reference, a bad static index or Huffman
/// string, or a section over 64 KiB.
pub fn decode_field_section(payload: &[u8]) -> Result<Vec<HeaderField>, H3Error> {
    let mut r = Reader::new(payload);
    // Encoded Field Section Prefix (section 4.5.1): Required Insert Count, then Delta Base.
    let first = r.u8().ok_or(H3Error::Truncated { field: "prefix" })?;
    if prefixed_int(first, 8, &mut r)? != 0 {
        return Err(H3Error::DynamicTable);
    }
    let base = r.u8().ok_or(H3Error::Truncated { field: "prefix" })?;
    prefixed_int(base, 7, &mut r)?;
    let mut fields = Vec::new();
    let mut size = 0_usize;
    while let Some(first) = r.u8() {
        let field = if first & 0x80 != 0 {
            // Indexed Field Line (section 4.5.2): 1 T index(6).
            if first & 0x40 == 0 {
                return Err(H3Error::DynamicTable);
            }
            let (name, value) = static_entry(prefixed_int(first, 6, &mut r)?)?;
            HeaderField {
                name: name.to_owned(),
                value: value.to_owned(),
            }
        } else if first & 0x40 != 0 {
            // Literal Field Line with Name Reference (section 4.5.4): 01 N T index(4).
            if first & 0x10 == 0 {
                return Err(H3Error::DynamicTable);
            }
            let (name, _) = static_entry(prefixed_int(first, 4, &mut r)?)?;
            let v = r.u8().ok_or(H3Error::Truncated { field: "value" })?;
            HeaderField {
                name: name.to_owned(),
                value: string(v, 0x80, 7, &mut r)?,
            }
        } else if first & 0x20 != 0 {
            // Literal Field Line with Literal Name (section 4.5.6): 001 N H length(3).
            let name = string(first, 0x08, 3, &mut r)?;
            let v = r.u8().ok_or(H3Error::Truncated { field: "value" })?;
            HeaderField {
                name,
                value: string(v, 0x80, 7, &mut r)?,
            }
        } else {
            // Post-Base forms (sections 4.5.3, 4.5.5) index the dynamic table only.
            return Err(H3Error::DynamicTable);
        };
        size = size.saturating_add(field.name.len() + field.value.len());
        if size > MAX_FIELD_SECTION {
            return Err(H3Error::FieldSectionTooLarge(MAX_FIELD_SECTION));
        }
        fields.push(field);
    }
    Ok(fields)
}

/// Appends a prefixed integer with an `n`-bit prefix, the first byte's high bits from `flags`.
fn put_prefixed_int(out: &mut Vec<u8>, flags: u8, n: u32, mut value: u64) {
    let max = (1_u64 << n) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    value -= max;
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Encodes a field section with the static table only and literals without Huffman coding:
/// a whole-entry match as an Indexed Field Line, a name match as a Literal with Name Reference,
/// else a Literal with Literal Name (names must be lowercase, RFC 9114 section 4.2).
pub fn encode_field_section(fields: &[(&str, &str)]) -> Vec<u8> {
    // Required Insert Count 0, Delta Base 0.
    let mut out = vec![0, 0];
    for &(name, value) in fields {
        let whole = STATIC_TABLE.iter().position(|&e| e == (name, value));
        let named = STATIC_TABLE.iter().position(|&(n, _)| n == name);
        if let Some(index) = whole {
            put_prefixed_int(&mut out, 0xc0, 6, index as u64);
        } else {
            if let Some(index) = named {
                put_prefixed_int(&mut out, 0x50, 4, index as u64);
            } else {
                put_prefixed_int(&mut out, 0x20, 3, name.len() as u64);
                out.extend_from_slice(name.as_bytes());
            }
            put_prefixed_int(&mut out, 0x00, 7, value.len() as u64);
            out.extend_from_slice(value.as_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(fields: &[HeaderField]) -> Vec<(&str, &str)> {
        fields
            .iter()
            .map(|f| (f.name.as_str(), f.value.as_str()))
            .collect()
    }

    #[test]
    fn rfc9204_appendix_b1_literal_with_name_reference() {
        // RFC 9204 Appendix B.1: ":path: /index.html" as a Literal Field Line with a static
        // name reference, Required Insert Count 0.
        let section = hex::decode("0000510b2f696e6465782e68746d6c").expect("hex");
        let fields = decode_field_section(&section).expect("decodes");
        assert_eq!(pairs(&fields), [(":path", "/index.html")]);
    }

    #[test]
    fn huffman_values_decode_with_the_hpack_code() {
        // RFC 7541 C.4.1: "www.example.com" Huffman-coded; as the value of :authority (static
        // name index 0) in a Literal with Name Reference.
        let mut section = vec![0x00, 0x00, 0x50, 0x8c];
        section.extend(hex::decode("f1e3c2e5f23a6ba0ab90f4ff").expect("hex"));
        let fields = decode_field_section(&section).expect("decodes");
        assert_eq!(pairs(&fields), [(":authority", "www.example.com")]);
    }

    #[test]
    fn what_we_encode_we_decode_in_order() {
        let fields = [
            (":status", "200"),
            ("content-type", "application/json"),
            ("content-length", "1234"),
            ("alt-svc", "h3=\":443\"; ma=86400"),
            ("x-exitvoice", "1"),
        ];
        let encoded = encode_field_section(&fields);
        // :status 200 is static entry 25: Indexed Field Line 0b11_011001.
        assert_eq!(encoded[2], 0xd9);
        assert_eq!(
            pairs(&decode_field_section(&encoded).expect("decodes")),
            fields
        );
    }

    #[test]
    fn dynamic_references_and_bad_bytes_are_errors() {
        assert_eq!(
            decode_field_section(&[0x01, 0x00]),
            Err(H3Error::DynamicTable)
        );
        assert_eq!(
            decode_field_section(&[0x00, 0x00, 0x80]),
            Err(H3Error::DynamicTable)
        );
        assert_eq!(
            decode_field_section(&[0x00, 0x00, 0x10]),
            Err(H3Error::DynamicTable)
        );
        assert_eq!(
            decode_field_section(&[0x00, 0x00, 0xff, 0x24]),
            Err(H3Error::StaticIndex(99))
        );
        assert!(decode_field_section(&[0x00]).is_err());
        assert!(decode_field_section(&[0x00, 0x00, 0x51, 0x0b, b'/']).is_err());
        assert!(decode_field_section(&[
            0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f
        ])
        .is_err());
    }
}
