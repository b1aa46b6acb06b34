//! The TLS section: the JA3 / JA4 family and voices, then cipher suites and extensions in wire
//! order with their registry names, GREASE values marked.

use exitvoice_schema::{Echo, TlsEcho};
use maud::{html, Markup};

use super::detail::{self, Code, HelloDetail};
use super::{plain, value};

pub(super) fn section(echo: &Echo) -> Markup {
    html! {
        section aria-labelledby="tls" {
            h2 #tls { "TLS" }
            @match &echo.tls {
                Some(tls) => { (fingerprints(tls)) (hello(&detail::read(tls.detail.get()))) },
                None => p { "The ClientHello could not be read." },
            }
        }
    }
}

fn fingerprints(tls: &TlsEcho) -> Markup {
    let rows: [(&str, &str, &str); 10] = [
        ("ja3", "JA3", &tls.ja3),
        ("ja3_hash_full", "JA3 hash", &tls.ja3_hash),
        ("ja3n", "JA3N (extensions sorted)", &tls.ja3n),
        ("ja3n_hash", "JA3N hash", &tls.ja3n_hash),
        ("ja4_full", "JA4", &tls.ja4),
        ("ja4_r", "JA4_r (raw)", &tls.ja4_r),
        ("ja4_o", "JA4_o (wire order)", &tls.ja4_o),
        ("ja4_ro", "JA4_ro (raw, wire order)", &tls.ja4_ro),
        ("tls_voice", "TLS voice", &tls.voice_id.0),
        ("order_id", "Extension order id", &tls.order_id),
    ];
    html! {
        div.scroll { table {
            caption { "TLS fingerprints of your ClientHello" }
            tbody {
                @for (id, label, text) in rows {
                    tr { th scope="row" { (label) } td { (value(id, text)) } }
                }
                tr { th scope="row" { "Resumption attempted" }
                     td { (if tls.resumed { "yes" } else { "no" }) } }
            }
        } }
    }
}

/// `0x1301`, the way registries print code points.
fn hex(code: &Code) -> String {
    format!("0x{:04x}", code.value)
}

fn name(code: &Code) -> Markup {
    html! {
        @match code.name.as_deref() {
            Some("GREASE") => span.grease { "GREASE (RFC 8701, ignored by voices)" },
            Some(name) => (name),
            None => span.note { "unknown" },
        }
    }
}

fn hello(detail: &HelloDetail) -> Markup {
    html! {
        div.scroll { table #cipher-suites {
            caption { "Cipher suites, in the order you sent them (" (detail.cipher_suites.len()) ")" }
            thead { tr { th scope="col" { "#" } th scope="col" { "Value" } th scope="col" { "Name" } } }
            tbody {
                @for (i, suite) in detail.cipher_suites.iter().enumerate() {
                    tr class=[suite.is_grease().then_some("grease")] {
                        td { (i + 1) } td { (plain("cipher suite", &hex(suite))) } td { (name(suite)) }
                    }
                }
            }
        } }
        div.scroll { table #extensions {
            caption { "Extensions, in the order you sent them (" (detail.extensions.len()) ")" }
            thead { tr {
                th scope="col" { "#" } th scope="col" { "Type" } th scope="col" { "Name" }
                th scope="col" { "Length" } th scope="col" { "Values" }
            } }
            tbody {
                @for (i, ext) in detail.extensions.iter().enumerate() {
                    tr class=[ext.kind.is_grease().then_some("grease")] {
                        td { (i + 1) }
                        td { (plain("extension", &hex(&ext.kind))) }
                        td { (name(&ext.kind)) }
                        td { (ext.len) }
                        td { code { (ext.body.summary()) } }
                    }
                }
            }
        } }
    }
}
