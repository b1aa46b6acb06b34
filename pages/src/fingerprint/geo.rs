//! "Where you connect from": the visitor's country and network from the server's geo
//! databases (`--geoip`), each database named with its build date (some free ones require
//! attribution). Nothing without databases.

use exitvoice_schema::EchoGeo;
use maud::{html, Markup};

use super::value;

pub(super) fn section(geo: Option<&EchoGeo>) -> Markup {
    let Some(geo) = geo else {
        return html! {};
    };
    let place = &geo.place;
    let unknown = "not in the databases";
    html! {
        section aria-labelledby="geo" {
            h2 #geo { "Where you connect from" }
            div.scroll { table {
                caption { "Your address in this server's geo databases" }
                tbody {
                    tr { th scope="row" { "Country" }
                        td { @if let Some(c) = &place.country { (value("geo_country", c)) } @else { (unknown) } } }
                    tr { th scope="row" { "Network" }
                        td { @if let Some(asn) = place.asn { (value("geo_asn", &format!("AS{asn}"))) } @else { (unknown) } } }
                    tr { th scope="row" { "Organisation" }
                        td { @if let Some(o) = &place.organization { (value("geo_organization", o)) } @else { (unknown) } } }
                }
            } }
            p { "Looked up in: "
                @for (i, source) in geo.sources.iter().enumerate() {
                    @if i > 0 { "; " }
                    code { (source.file) } " (" (source.database_type) ", built " (source.build_date) ")"
                }
                ". The server looks this up as it answers and does not store it."
            }
        }
    }
}
