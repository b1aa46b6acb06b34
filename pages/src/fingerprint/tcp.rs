//! The TCP section: what the SYN of the connection said (for a visitor behind a proxy, the
//! proxy's host), with its p0f signature and the TCP voice; or why there was none to read.

use exitvoice_schema::{Echo, TcpEcho};
use maud::{html, Markup};

use super::value;

pub(super) fn section(echo: &Echo) -> Markup {
    html! {
        section aria-labelledby="tcp" {
            h2 #tcp { "TCP" }
            @match (&echo.tcp, &echo.tcp_absent) {
                (Some(tcp), _) => (syn(tcp)),
                (None, Some(absent)) => p #tcp-absent {
                    "No SYN to read (" code { (absent.reason.as_str()) } "): " (absent.detail) "."
                },
                (None, None) => p #tcp-absent { "No SYN to read." },
            }
        }
    }
}

/// A number, or `none` when the option was not sent.
fn optional(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "none".to_owned(), |v| v.to_string())
}

fn yes_no(flag: bool) -> &'static str {
    if flag {
        "yes"
    } else {
        "no"
    }
}

fn syn(tcp: &TcpEcho) -> Markup {
    let options = tcp
        .options
        .iter()
        .map(u8::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let rows: [(&str, &str, String); 12] = [
        ("tcp_ip_version", "IP version", tcp.ip_version.to_string()),
        (
            "tcp_ttl",
            "TTL / hop limit as received",
            tcp.ttl.to_string(),
        ),
        (
            "tcp_initial_ttl",
            "Likely initial TTL (hops)",
            format!("{} ({})", tcp.initial_ttl, tcp.hops),
        ),
        ("tcp_df", "Don't fragment", yes_no(tcp.df).to_owned()),
        ("tcp_window", "Window", tcp.window.to_string()),
        ("tcp_mss", "MSS", optional(tcp.mss)),
        (
            "tcp_window_scale",
            "Window scale",
            optional(tcp.window_scale),
        ),
        (
            "tcp_sack",
            "SACK permitted",
            yes_no(tcp.sack_permitted).to_owned(),
        ),
        (
            "tcp_timestamps",
            "Timestamps",
            yes_no(tcp.timestamps).to_owned(),
        ),
        ("tcp_options", "Option kinds, wire order", options),
        ("tcp_p0f", "p0f signature", tcp.p0f.clone()),
        ("tcp_voice", "TCP voice", tcp.voice_id.0.clone()),
    ];
    html! {
        div.scroll { table {
            caption { "Your host's TCP SYN" }
            tbody {
                @for (id, label, text) in &rows {
                    tr { th scope="row" { (label) } td { (value(id, text)) } }
                }
                @if let Some(os) = &tcp.os {
                    tr { th scope="row" { "Operating system (p0f database)" } td { (value("tcp_os", os)) } }
                }
            }
        } }
    }
}
