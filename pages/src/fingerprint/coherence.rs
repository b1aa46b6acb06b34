//! The coherence section: which client families the connection's TLS and HTTP/2 voices look
//! like, which one its User-Agent claims, and the reasons its story does not hang together
//! (`exitvoice_schema::coherence`, the same judgement `/api/all` answers).

use exitvoice_schema::{Coherence, Family};
use maud::{html, Markup};

use super::value;

pub(super) fn section(coherence: Option<&Coherence>) -> Markup {
    html! {
        section aria-labelledby="coherence" {
            h2 #coherence { "Coherence" }
            @match coherence {
                None => p { "Not judged for this request." },
                Some(c) => {
                    div.scroll { table {
                        caption { "The client families your connection shows, and whether they agree" }
                        tbody {
                            tr { th scope="row" { "Score" }
                                td { (value("coherence_score", &format!("{:.2}", c.score)))
                                     " (1 = coherent)" } }
                            (family_row("TLS looks like", "tls_family", c.tls_family.as_ref()))
                            (family_row("HTTP/2 looks like", "http_family", c.http_family.as_ref()))
                            (family_row("User-Agent claims", "ua_family", c.ua_family.as_ref()))
                        }
                    } }
                    @if c.reasons.is_empty() {
                        p #coherence-reasons { "Nothing disagrees." }
                    } @else {
                        ul #coherence-reasons {
                            @for reason in &c.reasons {
                                li { code { (reason) } ": " (explain(reason)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn family_row(label: &str, id: &str, family: Option<&Family>) -> Markup {
    html! {
        tr { th scope="row" { (label) }
            td { @match family {
                Some(f) => {
                    (value(id, &f.name))
                    @if f.exact { " (a recorded fingerprint)" } @else { " (by shape)" }
                }
                None => "no known family",
            } } }
    }
}

/// A reason in a sentence (the table in `exitvoice_schema::coherence`).
fn explain(reason: &str) -> &'static str {
    match reason {
        "alpn_h2_spoke_http1" => "ALPN negotiated h2, but HTTP/1.1 was spoken.",
        "tls_family_ne_http_family" => "that TLS stack does not carry that HTTP/2 stack.",
        "ua_family_ne_tls_family" => {
            "the client the User-Agent claims does not use that TLS stack."
        }
        "browser_tls_library_h2" => "a browser's TLS under a library's (or unknown) HTTP/2 shape.",
        _ => "see the echo's documentation.",
    }
}
