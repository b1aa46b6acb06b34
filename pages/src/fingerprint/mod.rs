//! The fingerprint page: what the echo server saw of the visitor's own connection, as HTML.
//!
//! Rendered from the [`Echo`] the echo server answers on `/api/all` for the same request (it
//! writes that JSON once and both read it), so the page and the API can never disagree. What the
//! echo knows beyond the JSON (the rule that decided the bucket, layers that did not parse) comes
//! in [`FingerprintPage`]. Tables have captions and header cells; every value can be selected as
//! text, and the script adds a copy button beside it.

mod coherence;
mod detail;
mod geo;
mod http;
mod latency;
mod tcp;
mod tls;

use exitvoice_schema::{Bucket, Echo, Spoken};
use maud::{html, Markup};

use crate::layout::document;

/// What the page shows.
#[derive(Clone, Copy, Debug)]
pub struct FingerprintPage<'a> {
    /// The echo of this request, as `/api/all` answers it.
    pub echo: &'a Echo,
    /// The same echo as the JSON text the API sends.
    pub json: &'a str,
    /// The bucket rule that decided [`Echo::bucket`], in a sentence.
    pub bucket_rule: &'a str,
    /// What the echo could not read of this connection (layers that did not parse, and why).
    pub unseen: &'a [String],
}

/// The page as an HTML document.
pub fn render(page: &FingerprintPage<'_>) -> String {
    let echo = page.echo;
    let body = html! {
        (summary(page))
        (geo::section(echo.geo.as_ref()))
        (tcp::section(echo))
        (latency::section(echo.latency.as_ref()))
        (tls::section(echo))
        (alpn(echo))
        (http::section(echo))
        (bucket(page))
        (coherence::section(echo.coherence.as_ref()))
        (unseen(page))
        section aria-labelledby="json" {
            h2 #json { "The same as JSON" }
            p {
                "This page shows the echo of this request; "
                a href="/api/all" { "/api/all" }
                " answers the same for any request on this connection (and "
                a href="/api/clean" { "/api/clean" }
                " only the hashes). Scripts that send no " code { "Accept: text/html" }
                " get JSON on every path."
            }
            details {
                summary { "JSON of this request" }
                pre #echo-json { (page.json) }
            }
        }
    };
    let lead = html! {
        "What this server saw of your connection from " code { (echo.peer.ip) }
        ": your TCP SYN, your TLS ClientHello and the first HTTP bytes, before anything else."
    };
    document("Your TLS and HTTP fingerprint", lead, body).into_string()
}

/// A value the copy script can copy; `id` names it for tests and links.
pub(crate) fn value(id: &str, text: &str) -> Markup {
    html! { code id=(id) data-copy=(id) { (text) } }
}

/// A value without an id (repeated in lists).
pub(crate) fn plain(label: &str, text: &str) -> Markup {
    html! { code data-copy=(label) { (text) } }
}

/// A bucket as a coloured badge with its letter (`none` without one).
pub(crate) fn bucket_badge(bucket: Option<Bucket>) -> Markup {
    match bucket {
        Some(b) => html! { span class={ "badge bucket-" (b) } { (b) } },
        None => html! { span.badge { "none" } },
    }
}

fn spoken_name(spoken: Spoken) -> &'static str {
    match spoken {
        Spoken::H2 => "h2",
        Spoken::Http1 => "http/1.1",
        _ => "unknown",
    }
}

fn summary(page: &FingerprintPage<'_>) -> Markup {
    let echo = page.echo;
    let tls = echo.tls.as_ref();
    html! {
        section aria-labelledby="summary" {
            h2 #summary { "At a glance" }
            div.scroll { table {
                caption { "The fingerprints of this connection" }
                tbody {
                    tr { th scope="row" { "JA4" }
                        td { @if let Some(t) = tls { (value("ja4", &t.ja4)) } @else { "—" } } }
                    tr { th scope="row" { "JA3 hash" }
                        td { @if let Some(t) = tls { (value("ja3_hash", &t.ja3_hash)) } @else { "—" } } }
                    tr { th scope="row" { "Akamai HTTP/2" }
                        td { @if let Some(h2) = &echo.http2 {
                            (value("akamai_fingerprint", &h2.akamai_fingerprint))
                        } @else { "— (no HTTP/2 spoken)" } } }
                    tr { th scope="row" { "TLS voice" }
                        td { @if let Some(t) = tls { (value("tls_voice_id", &t.voice_id.0)) } @else { "—" } } }
                    tr { th scope="row" { "HTTP voice" }
                        td {
                            @if let Some(h2) = &echo.http2 { (value("http2_voice_id", &h2.voice_id.0)) }
                            @else if let Some(h1) = &echo.http1 { (value("http1_voice_id", &h1.voice_id.0)) }
                            @else { "—" }
                        } }
                    tr { th scope="row" { "Bucket" }
                        td { (bucket_badge(echo.bucket)) " " (page.bucket_rule) } }
                    tr { th scope="row" { "Browser profile" }
                        td { @match &echo.profile {
                            Some(p) => (value("profile", p)),
                            None => "none matched",
                        } } }
                    tr { th scope="row" { "Spoken" }
                        td { (value("spoken", spoken_name(echo.alpn.spoken))) } }
                }
            } }
        }
    }
}

fn alpn(echo: &Echo) -> Markup {
    html! {
        section aria-labelledby="alpn" {
            h2 #alpn { "ALPN" }
            div.scroll { table {
                caption { "Application protocol: offered by you, chosen by the server, spoken by you" }
                tbody {
                    tr { th scope="row" { "Offered" }
                        td { @if echo.alpn.offered.is_empty() { "nothing" }
                             @else { (value("alpn_offered", &echo.alpn.offered.join(","))) } } }
                    tr { th scope="row" { "Negotiated" }
                        td { @match &echo.alpn.negotiated {
                            Some(p) => (value("alpn_negotiated", p)),
                            None => "nothing",
                        } } }
                    tr { th scope="row" { "Spoken" }
                        td { (spoken_name(echo.alpn.spoken)) } }
                }
            } }
        }
    }
}

fn bucket(page: &FingerprintPage<'_>) -> Markup {
    html! {
        section aria-labelledby="bucket" {
            h2 #bucket { "Bucket" }
            p { (bucket_badge(page.echo.bucket)) " " span #bucket-rule { (page.bucket_rule) } }
            p.note {
                "A: browser-shaped HTTP/2 (a known browser's SETTINGS, WINDOW_UPDATE, priority and \
                 pseudo-header order). B: a library's HTTP/2. C: a gateway re-mux. D: ALPN said h2 \
                 but HTTP/1.1 was spoken."
            }
        }
    }
}

/// What the server could not see: the echo's parse failures, caps that cut the capture, and
/// what no TLS endpoint sees.
fn unseen(page: &FingerprintPage<'_>) -> Markup {
    let echo = page.echo;
    let mut notes: Vec<String> = page.unseen.to_vec();
    if echo.tls.is_none() {
        notes.push("The ClientHello could not be read: no TLS fingerprints.".to_owned());
    }
    if let Some(h2) = &echo.http2 {
        notes.extend(http::cut_short(&detail::read(h2.detail.get())));
    }
    match echo.alpn.spoken {
        Spoken::H2 => {}
        Spoken::Http1 => notes.push(
            "HTTP/1.1 was spoken: there are no SETTINGS, WINDOW_UPDATE, priorities or Akamai \
             string to see."
                .to_owned(),
        ),
        _ => notes.push("Nothing recognisable as HTTP was spoken.".to_owned()),
    }
    notes.push(
        "Below TLS: the TCP/IP layer (TTL, window size, options) is not captured, so no p0f-style \
         fingerprint."
            .to_owned(),
    );
    html! {
        section aria-labelledby="unseen" {
            h2 #unseen { "What the server could not see" }
            ul.unseen { @for note in &notes { li { (note) } } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo with an unreadable ClientHello and nothing spoken still renders, and says what
    /// the server could not see; values from the wire are escaped.
    #[test]
    fn a_bare_echo_renders_what_is_missing() {
        let echo: Echo = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "time": "2026-12-01T00:00:00.000Z",
            "peer": {"ip": "192.0.2.1", "port": 1}, "token": null, "method": "GET",
            "path": "/<script>", "alpn": {"offered": ["h2"], "negotiated": null, "spoken": "unknown"},
            "tls": null, "http2": null, "http1": null,
            "request": {"stream_id": null, "index": 1}, "bucket": null, "profile": null,
        }))
        .expect("an echo");
        let unseen = ["The tls layer did not parse: truncated.".to_owned()];
        let html = render(&FingerprintPage {
            echo: &echo,
            json: r#"{"path":"/<script>"}"#,
            bucket_rule: "no bucket",
            unseen: &unseen,
        });
        assert!(html.contains("The ClientHello could not be read"), "{html}");
        assert!(
            html.contains("Nothing recognisable as HTTP was spoken"),
            "{html}"
        );
        assert!(
            html.contains("The tls layer did not parse: truncated."),
            "{html}"
        );
        assert!(
            html.contains("&lt;script&gt;") && !html.contains("<script>\"}"),
            "{html}"
        );
        assert!(
            html.contains(r#"<span class="badge">none</span>"#),
            "{html}"
        );
        assert!(html.contains("Not judged for this request."), "{html}");
    }

    /// An echo of an h2 request with nothing else to show.
    fn spoken_h2() -> Echo {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1, "time": "2026-12-01T00:00:00.000Z",
            "peer": {"ip": "192.0.2.1", "port": 1}, "token": null, "method": "GET",
            "path": "/", "alpn": {"offered": ["h2"], "negotiated": "h2", "spoken": "h2"},
            "tls": null, "http2": null, "http1": null,
            "request": {"stream_id": 1, "index": 1}, "bucket": null, "profile": null,
        }))
        .expect("an echo")
    }

    /// A judged echo shows its families and each reason in a sentence.
    #[test]
    fn coherence_shows_families_and_reasons() {
        let mut echo = spoken_h2();
        let families = exitvoice_schema::Families {
            ua: exitvoice_schema::coherence::ua_family("curl/8.0.1"),
            ..Default::default()
        };
        echo.coherence = Some(exitvoice_schema::coherence::judge(&echo.alpn, families));
        let coherent = render(&FingerprintPage {
            echo: &echo,
            json: "{}",
            bucket_rule: "no bucket",
            unseen: &[],
        });
        assert!(coherent.contains("Nothing disagrees."), "{coherent}");
        assert!(coherent.contains(">curl</code> (by shape)"), "{coherent}");
        assert!(coherent.contains(">1.00</code>"), "{coherent}");

        let judged = echo.coherence.as_mut().expect("judged");
        judged.reasons = vec!["alpn_h2_spoke_http1".into()];
        judged.score = 0.5;
        let incoherent = render(&FingerprintPage {
            echo: &echo,
            json: "{}",
            bucket_rule: "no bucket",
            unseen: &[],
        });
        assert!(
            incoherent.contains("<code>alpn_h2_spoke_http1</code>: ALPN negotiated h2"),
            "{incoherent}"
        );
        assert!(incoherent.contains(">0.50</code>"), "{incoherent}");
    }

    /// With geo databases, the page names the place and every database with its build date;
    /// a name from the database is escaped. Without them the section is not there.
    #[test]
    fn geo_shows_the_place_and_names_the_databases() {
        let mut echo = spoken_h2();
        let page = |echo: &Echo| {
            render(&FingerprintPage {
                echo,
                json: "{}",
                bucket_rule: "no bucket",
                unseen: &[],
            })
        };
        assert!(!page(&echo).contains("Where you connect from"));
        echo.geo = Some(
            serde_json::from_value(serde_json::json!({
                "country": "DE", "asn": 64500, "organization": "<b>Carrier</b>",
                "sources": [
                    {"file": "GeoLite2-Country.mmdb", "database_type": "GeoLite2-Country", "build_date": "2026-11-28"},
                    {"file": "asn.mmdb", "database_type": "DBIP-ASN-Lite", "build_date": "2026-11-01"}
                ]
            }))
            .expect("geo"),
        );
        let html = page(&echo);
        assert!(
            html.contains(r#"id="geo_country" data-copy="geo_country">DE<"#),
            "{html}"
        );
        assert!(html.contains(">AS64500<"), "{html}");
        assert!(html.contains("&lt;b&gt;Carrier&lt;/b&gt;"), "{html}");
        assert!(
            html.contains(
                "<code>GeoLite2-Country.mmdb</code> (GeoLite2-Country, built 2026-11-28)"
            ),
            "{html}"
        );
        assert!(html.contains("(DBIP-ASN-Lite, built 2026-11-01)"), "{html}");
    }
}
