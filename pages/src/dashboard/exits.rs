//! `/exits`: the pool at a glance (bucket and route charts), then every exit as a table row,
//! filtered and sorted by the query.

use axum::extract::{Query, State};
use axum::response::Html;
use exitvoice_schema::{ExitLabel, Flags, LabelsDoc};
use maud::{html, Markup};

use super::filter::{asn_name, bucket_name, country_name, error_count, ExitQuery, SORT_KEYS};
use super::{charts, latest, path_segment, DashboardError, DashboardState};
use crate::layout::document;

const STATES: [&str; 4] = ["stable", "alternating", "mutating", "unknown"];
const ROUTES: [&str; 4] = ["identity", "anonymous", "stateless", "quarantine"];
const BUCKETS: [&str; 5] = ["A", "B", "C", "D", "none"];

pub(super) async fn page(
    State(state): State<DashboardState>,
    Query(query): Query<ExitQuery>,
) -> Result<Html<String>, DashboardError> {
    let doc = latest(&state).await?;
    Ok(Html(render(&doc, &query)))
}

fn render(doc: &LabelsDoc, query: &ExitQuery) -> String {
    let shown = query.apply(&doc.exits);
    let lead = html! {
        "Labels of " (doc.generated_at)
        @if let Some(persona) = &doc.persona { ", persona " code { (persona) } }
        ": " (doc.exits.len()) " exits. "
        a href="/exits.json" { "Labels JSON" }
    };
    let body = html! {
        (pool(doc))
        section aria-labelledby="exits-heading" {
            h2 #exits-heading { "Exits" }
            (filters(doc, query))
            p #shown { "Showing " (shown.len()) " of " (doc.exits.len()) " exits." }
            div.scroll { table #exits {
                caption { "Every audited exit, its verdict and its evidence" }
                thead { tr {
                    @for (key, heading) in SORT_KEYS {
                        th scope="col" { a href=(sort_link(query, key)) { (heading) } }
                    }
                    th scope="col" { "Route reasons" }
                    th scope="col" { "Flags" }
                    th scope="col" { "Voices" }
                } }
                tbody { @for label in &shown { (row(label)) } }
            } }
        }
    };
    document("Exits", lead, body).into_string()
}

fn pool(doc: &LabelsDoc) -> Markup {
    let Some(pool) = &doc.pool else {
        return html! {};
    };
    let buckets: Vec<(String, u32, String)> = BUCKETS
        .iter()
        .map(|b| {
            let n = pool.by_bucket.get(*b).copied().unwrap_or(0);
            ((*b).to_owned(), n, format!("mark-{b}"))
        })
        .collect();
    let routes: Vec<(String, u32, String)> = ROUTES
        .iter()
        .map(|r| {
            (
                (*r).to_owned(),
                pool.by_route.get(*r).copied().unwrap_or(0),
                "bar".to_owned(),
            )
        })
        .collect();
    html! {
        section aria-labelledby="pool" {
            h2 #pool { "The pool" }
            p {
                (pool.exits) " exits, " (pool.unique_egress) " distinct egress addresses"
                @if pool.collapsed_egress { " (all answering exits leave from one address)" }
                @if let Some(rate) = pool.success_rate {
                    ", " (format!("{:.0}", rate * 100.0)) " % of probes succeeded"
                }
                "."
            }
            @if !pool.by_country.is_empty() {
                p #pool-geo {
                    "By country: "
                    @for (i, (country, n)) in pool.by_country.iter().enumerate() {
                        @if i > 0 { ", " }
                        (country) " " (n)
                    }
                    @if let Some(share) = pool.largest_asn_share {
                        "; the largest network holds " (format!("{:.0}", share * 100.0)) " % of the placed exits"
                    }
                    ". Geo from "
                    @for (i, source) in pool.geo_sources.iter().enumerate() {
                        @if i > 0 { ", " }
                        code { (source.file) } " (" (source.database_type) ", built " (source.build_date) ")"
                    }
                    "."
                }
            }
            div.charts {
                (charts::bars("chart-buckets", "Exits by bucket of their newest sample", &buckets))
                (charts::bars("chart-routes", "Exits by route", &routes))
            }
        }
    }
}

/// The filter form: a GET form, so it works without JavaScript.
fn filters(doc: &LabelsDoc, query: &ExitQuery) -> Markup {
    let mut tags: Vec<String> = doc
        .exits
        .iter()
        .flat_map(|l| l.tags.iter().map(|(k, v)| format!("{k}={v}")))
        .collect();
    tags.sort();
    tags.dedup();
    let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
    let seen = |name: fn(&ExitLabel) -> String| {
        let mut values: Vec<String> = doc.exits.iter().map(name).collect();
        values.sort();
        values.dedup();
        values
    };
    let (countries, networks) = (seen(country_name), seen(asn_name));
    let countries: Vec<&str> = countries.iter().map(String::as_str).collect();
    let networks: Vec<&str> = networks.iter().map(String::as_str).collect();
    let placed = doc.exits.iter().any(|l| l.geo.is_some());
    html! {
        form.filters method="get" action="/exits" {
            (select("state", "State", &STATES, &query.state))
            (select("route", "Route", &ROUTES, &query.route))
            (select("bucket", "Bucket", &BUCKETS, &query.bucket))
            (select("tag", "Tag", &tags, &query.tag))
            @if placed {
                (select("country", "Country", &countries, &query.country))
                (select("asn", "Network", &networks, &query.asn))
            }
            input type="hidden" name="sort" value=(query.sort);
            input type="hidden" name="order" value=(query.order);
            button type="submit" { "Filter" }
            a href="/exits" { "Clear" }
        }
    }
}

fn select(name: &str, label: &str, options: &[&str], chosen: &str) -> Markup {
    html! {
        label {
            (label)
            select name=(name) {
                option value="" { "any" }
                @for option in options {
                    option value=(option) selected[*option == chosen] { (option) }
                }
            }
        }
    }
}

/// The link of a column heading: sort by it, ascending, or descending when it is already the
/// ascending sort; filters kept.
fn sort_link(query: &ExitQuery, key: &str) -> String {
    let order = if query.sort == key && !query.descending() {
        "desc"
    } else {
        "asc"
    };
    let mut link = format!("/exits?sort={key}&order={order}");
    for (name, value) in [
        ("state", &query.state),
        ("route", &query.route),
        ("bucket", &query.bucket),
        ("tag", &query.tag),
        ("country", &query.country),
        ("asn", &query.asn),
    ] {
        if !value.is_empty() {
            link.push_str(&format!("&{name}={}", path_segment(value)));
        }
    }
    link
}

/// The flags that are set, by name.
pub(super) fn set_flags(flags: &Flags) -> Vec<&'static str> {
    [
        (flags.tls_preserved, "tls_preserved"),
        (flags.h2_preserved, "h2_preserved"),
        (flags.alpn_preserved, "alpn_preserved"),
        (flags.tls_intercepted, "tls_intercepted"),
        (flags.tls_reoriginated, "tls_reoriginated"),
        (flags.remuxed, "remuxed"),
        (flags.not_proxied, "not_proxied"),
        (flags.geo_changed, "geo_changed"),
        (flags.gap_moved, "gap_moved"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect()
}

pub(super) fn route_badge(label: &ExitLabel) -> Markup {
    html! { span class={ "badge route-" (label.route) } { (label.route) } }
}

pub(super) fn bucket_badge(label: &ExitLabel) -> Markup {
    let bucket = bucket_name(label);
    html! { span class={ "badge bucket-" (bucket) } { (bucket) } }
}

fn ms(value: Option<u64>) -> String {
    value.map_or_else(|| "—".to_owned(), |v| v.to_string())
}

fn row(label: &ExitLabel) -> Markup {
    html! {
        tr data-exit=(label.name) {
            th scope="row" {
                a href={ "/exits/" (path_segment(&label.name)) } { (label.name) }
                @for (k, v) in &label.tags { br; small.tag { (k) "=" (v) } }
            }
            td.state { (label.state) }
            td.bucket { (bucket_badge(label)) }
            td.route { (route_badge(label)) }
            @if let Some(geo) = &label.geo {
                td.country { (country_name(label)) }
                td.asn {
                    (asn_name(label))
                    @if let Some(org) = &geo.newest.organization { br; small { (org) } }
                }
            } @else {
                td.country { "—" }
                td.asn { "—" }
            }
            td { (label.samples) }
            td.errors {
                (error_count(label))
                @for (class, n) in &label.errors { br; small { (class) ": " (n) } }
            }
            td { (ms(label.latency.p50_ms)) }
            td { (ms(label.latency.p95_ms)) }
            td.gap {
                @if let Some(rt) = &label.latency.round_trip {
                    (format!("{:.1}", f64::from(rt.excess_gap_us) / 1000.0)) br; small { (rt.verdict.as_str()) }
                } @else { "—" }
            }
            td { (label.last_probe_at.as_deref().unwrap_or("never")) }
            td.reasons { ul { @for reason in &label.route_reasons { li { (reason) } } } }
            td { (set_flags(&label.flags).join(", ")) }
            td.voices { @for voice in &label.voices { code { (voice) } br; } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With geo in the labels, each row shows its country and network and the pool names the
    /// databases; the filter form offers the countries seen.
    #[test]
    fn geo_columns_filters_and_sources() {
        let doc: LabelsDoc = serde_json::from_value(serde_json::json!({
            "schema_version": 3, "generated_at": "2026-12-03T00:00:00Z", "persona": "p",
            "baseline": null,
            "pool": {"exits": 1, "by_state": {}, "by_bucket": {}, "by_route": {},
                     "success_rate": null, "unique_egress": 1, "collapsed_egress": false,
                     "by_country": {"DE": 1}, "by_asn": {"AS3320": 1}, "largest_asn_share": 1.0,
                     "geo_sources": [{"file": "c.mmdb", "database_type": "GeoLite2-Country",
                                      "build_date": "2026-11-28"}]},
            "exits": [{
                "name": "de", "url": "http://h:1", "tags": {}, "egress_ips": ["192.0.2.1"],
                "state": "stable", "changed_at": null, "bucket": "A",
                "flags": {"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false,
                          "geo_changed": true},
                "voices": [], "route": "identity", "route_reason": "r", "route_reasons": ["r"],
                "samples": 1, "errors": {}, "latency": {"p50_ms": null, "p95_ms": null},
                "last_probe_at": null, "history": [],
                "geo": {"newest": {"country": "DE", "asn": 3320, "organization": "<Telekom>"},
                        "countries": ["DE", "AT"], "asns": [3320]}
            }]
        }))
        .expect("labels");
        let html = render(&doc, &ExitQuery::default());
        assert!(html.contains(r#"<td class="country">DE</td>"#), "{html}");
        assert!(
            html.contains("AS3320<br><small>&lt;Telekom&gt;</small>"),
            "{html}"
        );
        assert!(html.contains("By country: DE 1"), "{html}");
        assert!(html.contains("100 % of the placed exits"), "{html}");
        assert!(html.contains("<code>c.mmdb</code> (GeoLite2-Country, built 2026-11-28)"));
        assert!(html.contains(r#"<option value="DE">DE</option>"#), "{html}");
        assert!(html.contains("geo_changed"), "{html}");
    }

    /// An exit's round-trip gap shows as the hidden leg in milliseconds with its verdict, and
    /// a moved gap among the flags; an exit without one shows a dash.
    #[test]
    fn the_gap_column_shows_the_hidden_leg() {
        let exit = |name: &str, round_trip: serde_json::Value| {
            serde_json::json!({
                "name": name, "url": "http://h:1", "tags": {}, "egress_ips": [],
                "state": "stable", "changed_at": null, "bucket": "A",
                "flags": {"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false,
                          "gap_moved": !round_trip.is_null()},
                "voices": [], "route": "identity", "route_reason": "r", "route_reasons": ["r"],
                "samples": 1, "errors": {},
                "latency": {"p50_ms": null, "p95_ms": null, "round_trip": round_trip},
                "last_probe_at": null, "history": []
            })
        };
        let far = serde_json::json!({
            "samples": 3, "gap_min_us": 81_000, "gap_p50_us": 82_000, "tcp_rtt_min_us": 40,
            "tcp_rtt_p50_us": 50, "app_rtt_min_us": 81_040, "app_rtt_p50_us": 82_050,
            "baseline_gap_us": 700, "excess_gap_us": 80_300, "verdict": "likely", "reason": "r",
            "previous_run_gap_min_us": 20_000, "moved": true
        });
        let doc: LabelsDoc = serde_json::from_value(serde_json::json!({
            "schema_version": 5, "generated_at": "2026-12-03T00:00:00Z", "persona": "p",
            "baseline": null, "pool": null,
            "exits": [exit("far", far), exit("near", serde_json::Value::Null)]
        }))
        .expect("labels");
        let html = render(&doc, &ExitQuery::default());
        assert!(html.contains("Gap ms"), "{html}");
        assert!(
            html.contains(r#"<td class="gap">80.3<br><small>likely</small></td>"#),
            "{html}"
        );
        assert!(html.contains(r#"<td class="gap">—</td>"#), "{html}");
        assert!(html.contains("gap_moved"), "{html}");
    }
}
