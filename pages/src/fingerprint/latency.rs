//! The round-trip section: the TCP round trip the server's kernel measured (to whichever host
//! opened the connection), the round trips the visitor's own stack answered (the TLS flight,
//! HTTP/2 PINGs), the gap between them and what it says.

use exitvoice_schema::RoundTrips;
use maud::{html, Markup};

use super::value;

/// Microseconds as milliseconds with three decimals (the integers stay exact).
fn ms(us: u32) -> String {
    format!("{}.{:03} ms", us / 1000, us % 1000)
}

pub(super) fn section(latency: Option<&RoundTrips>) -> Markup {
    let Some(latency) = latency else {
        return html! {};
    };
    let rows: Vec<(&str, &str, Option<u32>)> = vec![
        (
            "rtt_tcp",
            "TCP round trip, smallest (kernel)",
            latency.tcp_min_rtt_us,
        ),
        (
            "rtt_tcp_smoothed",
            "TCP round trip, smoothed",
            latency.tcp_rtt_us,
        ),
        (
            "rtt_tls",
            "TLS flight (your stack's answer)",
            latency.tls_rtt_us,
        ),
        (
            "rtt_h2_ping",
            "HTTP/2 PING, fastest",
            latency.h2_ping_rtt_us,
        ),
        ("rtt_quic", "QUIC round trip", latency.quic_rtt_us),
        ("rtt_gap", "Gap", latency.gap_us),
    ];
    html! {
        section aria-labelledby="latency" {
            h2 #latency { "Round trips" }
            p {
                "The TCP round trip ends at the host that opened the connection to this server; "
                "the TLS flight and HTTP/2 PINGs end at your own client. Behind a proxy, the "
                "gap between them is the way from you to the proxy."
            }
            table { caption { "Your connection's round trips" } tbody {
                @for (id, label, us) in &rows {
                    @if let Some(us) = us {
                        tr { th scope="row" { (label) } td { (value(id, &ms(*us))) } }
                    }
                }
                tr { th scope="row" { "Verdict" } td { (value("rtt_verdict", latency.verdict.as_str())) } }
            } }
            p #rtt-reason { (latency.reason) }
        }
    }
}

#[cfg(test)]
mod tests {
    use exitvoice_schema::{Measures, TcpRoundTrip};

    use super::*;

    #[test]
    fn measured_rows_show_and_absent_ones_do_not() {
        let latency = RoundTrips::judge(&Measures {
            tcp: Some(TcpRoundTrip {
                rtt_us: 90,
                min_rtt_us: Some(45),
                rttvar_us: Some(20),
            }),
            tls_us: Some(81_250),
            ..Measures::default()
        });
        let html = section(Some(&latency)).into_string();
        assert!(html.contains(">0.045 ms</code>"), "{html}");
        assert!(html.contains(">81.205 ms</code>"), "{html}");
        assert!(html.contains(">likely</code>"), "{html}");
        assert!(!html.contains("rtt_h2_ping"), "{html}");
        assert!(section(None).into_string().is_empty());
    }
}
