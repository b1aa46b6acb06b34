//! The HTTP section: HTTP/2 (SETTINGS in order, WINDOW_UPDATE, priorities, pseudo-header and
//! header order, the Akamai string) or the HTTP/1 request head.

use exitvoice_schema::{Echo, Http1Echo, Http2Echo};
use maud::{html, Markup};

use super::detail::{self, Http2Detail};
use super::{plain, value};

pub(super) fn section(echo: &Echo) -> Markup {
    html! {
        @if let Some(h2) = &echo.http2 { (http2(h2, &detail::read(h2.detail.get()))) }
        @if let Some(h1) = &echo.http1 { (http1(h1)) }
    }
}

/// What the capture caps cut from the HTTP/2 prefix, as notes for the "could not see" list.
pub(super) fn cut_short(detail: &Http2Detail) -> Vec<String> {
    [
        (
            detail.truncated,
            "The HTTP/2 prefix ended mid-frame: later frames were not seen.",
        ),
        (
            detail.frames_capped,
            "More frames arrived than the frame cap keeps.",
        ),
        (
            detail.header_blocks_capped,
            "A header block was over the header-block cap.",
        ),
        (
            detail.priority_capped,
            "More PRIORITY frames arrived than the cap keeps.",
        ),
    ]
    .into_iter()
    .filter(|(cut, _)| *cut)
    .map(|(_, note)| note.to_owned())
    .collect()
}

fn http2(h2: &Http2Echo, detail: &Http2Detail) -> Markup {
    let headers_priority = detail
        .request
        .as_ref()
        .and_then(|r| r.priority.as_ref())
        .map(|p| p.describe());
    html! {
        section aria-labelledby="http2" {
            h2 #http2 { "HTTP/2" }
            div.scroll { table {
                caption { "HTTP/2 fingerprints of your connection and this request" }
                tbody {
                    tr { th scope="row" { "Akamai fingerprint" }
                         td { (value("akamai_fingerprint_full", &h2.akamai_fingerprint)) } }
                    tr { th scope="row" { "Akamai hash" }
                         td { (value("akamai_fingerprint_hash", &h2.akamai_fingerprint_hash)) } }
                    tr { th scope="row" { "HTTP/2 voice" } td { (value("http2_voice", &h2.voice_id.0)) } }
                    tr { th scope="row" { "Connection WINDOW_UPDATE" }
                         td { @match detail.connection_window_update {
                             Some(increment) => (value("window_update", &increment.to_string())),
                             None => "none before the first request",
                         } } }
                    tr { th scope="row" { "First HEADERS priority" }
                         td { @match &headers_priority {
                             Some(p) => (p),
                             None => "none",
                         } } }
                    tr { th scope="row" { "Pseudo-header order" }
                         td { (value("pseudo_header_order", &h2.pseudo_header_order.join(","))) } }
                    tr { th scope="row" { "Header order" }
                         td { (value("header_order", &h2.header_order.join(","))) } }
                }
            } }
            div.scroll { table #settings {
                caption { "SETTINGS, in the order you sent them" }
                thead { tr { th scope="col" { "#" } th scope="col" { "Id" } th scope="col" { "Name" } th scope="col" { "Value" } } }
                tbody {
                    @for (i, s) in detail.settings.iter().flatten().enumerate() {
                        tr class=[(s.name.as_deref() == Some("GREASE")).then_some("grease")] {
                            td { (i + 1) }
                            td { (plain("setting id", &format!("0x{:x}", s.id))) }
                            td { (s.name.as_deref().unwrap_or("unknown")) }
                            td { (plain("setting value", &s.value.to_string())) }
                        }
                    }
                }
            } }
            @if !detail.priority_frames.is_empty() {
                div.scroll { table {
                    caption { "PRIORITY frames before the first request" }
                    thead { tr { th scope="col" { "Stream" } th scope="col" { "Priority" } } }
                    tbody {
                        @for p in &detail.priority_frames {
                            tr { td { (p.stream_id) } td { (p.priority.describe()) } }
                        }
                    }
                } }
            }
            @if !detail.voice_description.is_empty() {
                h3 { "What the HTTP/2 voice is made of" }
                pre { (detail.voice_description) }
            }
        }
    }
}

fn http1(h1: &Http1Echo) -> Markup {
    html! {
        section aria-labelledby="http1" {
            h2 #http1 { "HTTP/1" }
            div.scroll { table {
                caption { "Your HTTP/1 request head" }
                tbody {
                    tr { th scope="row" { "Request line" } td { (value("request_line", &h1.request_line)) } }
                    tr { th scope="row" { "Header order (original case)" }
                         td { (value("http1_header_order", &h1.header_order.join(","))) } }
                    tr { th scope="row" { "HTTP/1 voice" } td { (value("http1_voice", &h1.voice_id.0)) } }
                }
            } }
        }
    }
}
